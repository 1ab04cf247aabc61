package ratelimits

import (
	"errors"
	"testing"
	"time"
)

// TestBoxUntil checks the ERL TTL rule: round the TTL to the nearest
// minute (half up), then leave the box at the first whole minute at or
// after now plus that.
func TestBoxUntil(t *testing.T) {
	minute := time.Date(2026, 11, 22, 0, 1, 0, 0, time.UTC)
	for _, tc := range []struct {
		now  time.Time
		ttl  time.Duration
		want time.Time
	}{
		{minute.Add(12600 * time.Millisecond), 10 * time.Minute, minute.Add(11 * time.Minute)},
		{minute.Add(12600 * time.Millisecond), 89 * time.Second, minute.Add(2 * time.Minute)},
		{minute.Add(12600 * time.Millisecond), 90 * time.Second, minute.Add(3 * time.Minute)},
		{minute.Add(12600 * time.Millisecond), time.Hour, minute.Add(61 * time.Minute)},
		// On the minute, a 1m TTL lasts exactly a minute; just after it,
		// almost two.
		{minute, time.Minute, minute.Add(time.Minute)},
		{minute.Add(time.Nanosecond), time.Minute, minute.Add(2 * time.Minute)},
		{minute.Add(-time.Nanosecond), time.Minute, minute.Add(time.Minute)},
	} {
		if got := BoxUntil(tc.now.UnixNano(), tc.ttl); got != tc.want.UnixNano() {
			t.Errorf("BoxUntil(%s, %s) = %s, want %s", tc.now.Format(time.RFC3339Nano), tc.ttl,
				time.Unix(0, got).UTC().Format(time.RFC3339Nano), tc.want.Format(time.RFC3339Nano))
		}
	}
}

func TestRateCounterLimitRanges(t *testing.T) {
	good, err := NewRateCounterLimit(10*time.Second, 100, 15*time.Minute)
	if err != nil || good.Burst != 1000 || good.Count != 1000 || !good.HasBox() {
		t.Fatalf("NewRateCounterLimit(10s, 100, 15m) = %+v, %v; want burst and count 1000, with a box", good, err)
	}
	for _, tc := range []struct {
		window  time.Duration
		rate    int64
		penalty time.Duration
	}{
		{5 * time.Second, 100, time.Minute}, {1500 * time.Millisecond, 100, time.Minute}, {time.Minute + time.Second, 100, time.Minute},
		{time.Second, 9, time.Minute}, {time.Second, 70_000_001, time.Minute},
		{time.Second, 10, 59 * time.Second}, {time.Second, 10, time.Hour + time.Second},
	} {
		if _, err := NewRateCounterLimit(tc.window, tc.rate, tc.penalty); !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("NewRateCounterLimit(%s, %d, %s) = %v, want ErrInvalidLimit", tc.window, tc.rate, tc.penalty, err)
		}
	}
	l, _ := NewLimit(5, 5, time.Minute)
	for _, p := range []time.Duration{0, 999 * time.Millisecond, 24*time.Hour + 1} {
		if _, err := l.WithPenalty(p); !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("WithPenalty(%s) = %v, want ErrInvalidLimit", p, err)
		}
	}
	if lp, err := l.WithPenalty(15 * time.Minute); err != nil || !lp.HasBox() || l.HasBox() {
		t.Errorf("WithPenalty(15m) = %+v, %v; want a box on the copy only", lp, err)
	}
	for _, ttl := range []time.Duration{59 * time.Second, time.Hour + 1} {
		if err := CheckTTL(ttl); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("CheckTTL(%s) = %v, want ErrInvalidArgument", ttl, err)
		}
	}
}
