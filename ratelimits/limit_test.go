package ratelimits

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// TestLimitNewLimit checks the validity rules of a limit and the
// truncating integer arithmetic of the emission interval.
func TestLimitNewLimit(t *testing.T) {
	good := []struct {
		burst, count int64
		period       time.Duration
		ei, bo       int64
	}{
		{3, 3, time.Second, 333333333, 999999999}, // truncated, not rounded
		{20, 20, time.Second, 50_000_000, 1_000_000_000},
		{5, 1, time.Hour, int64(time.Hour), 5 * int64(time.Hour)},
		{2, 2, 3, 1, 2}, // 3ns / 2 = 1ns
		{math.MaxInt64, 1, 1, 1, math.MaxInt64},
	}
	for _, g := range good {
		l, err := NewLimit(g.burst, g.count, g.period)
		if err != nil {
			t.Errorf("NewLimit(%d, %d, %v): %v", g.burst, g.count, g.period, err)
			continue
		}
		if l.EmissionInterval() != g.ei || l.BurstOffset() != g.bo || l.Override {
			t.Errorf("NewLimit(%d, %d, %v): EI %d, BO %d, override %v; want %d, %d, false",
				g.burst, g.count, g.period, l.EmissionInterval(), l.BurstOffset(), l.Override, g.ei, g.bo)
		}
	}

	bad := []struct {
		burst, count int64
		period       time.Duration
		want         string
	}{
		{0, 1, time.Second, "burst must be greater than 0"},
		{-1, 1, time.Second, "burst must be greater than 0"},
		{1, 0, time.Second, "count must be greater than 0"},
		{1, -3, time.Second, "count must be greater than 0"},
		{1, 1, 0, "period must be greater than 0"},
		{1, 1, -time.Second, "period must be greater than 0"},
		{2, 2, 1, "emission interval is 0"},
		{1, 1_000_000_001, time.Second, "emission interval is 0"},
		{math.MaxInt64, 1, 2, "burst offset overflows"},
		{1 << 40, 1, 1 << 24, "burst offset overflows"},
	}
	for _, b := range bad {
		_, err := NewLimit(b.burst, b.count, b.period)
		if !errors.Is(err, ErrInvalidLimit) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("NewLimit(%d, %d, %v) = %v; want an ErrInvalidLimit saying %q", b.burst, b.count, b.period, err, b.want)
		}
	}
	if (Limit{}).EmissionInterval() != 0 || (Limit{}).BurstOffset() != 0 {
		t.Error("the zero Limit has a non-zero emission interval or burst offset")
	}
}
