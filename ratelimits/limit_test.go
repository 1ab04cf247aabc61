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

// TestNewWindowLimit checks the rules of a window limit: count at least 1,
// a period of whole seconds from 1s to 8784h, and count × period in ms at
// most 2^53 − 1, each edge on both sides.
func TestNewWindowLimit(t *testing.T) {
	good := []struct {
		alg    Algorithm
		count  int64
		period time.Duration
	}{
		{SlidingWindow, 1, time.Second},
		{FixedWindow, 100, time.Minute},
		{SlidingWindow, 3, MaxWindowPeriod},
		{FixedWindow, (1<<53 - 1) / 1000, time.Second}, // 9007199254740 × 1000 <= 2^53 − 1
		{SlidingWindow, (1<<53 - 1) / (8784 * 3600 * 1000), MaxWindowPeriod},
	}
	for _, g := range good {
		l, err := NewWindowLimit(g.alg, g.count, g.period)
		if err != nil {
			t.Errorf("NewWindowLimit(%s, %d, %v): %v", g.alg, g.count, g.period, err)
			continue
		}
		want := Limit{Algorithm: g.alg, Burst: g.count, Count: g.count, Period: g.period}
		if l != want || !l.valid() || l.EmissionInterval() != 0 {
			t.Errorf("NewWindowLimit(%s, %d, %v) = %+v; want %+v, valid, with no emission interval", g.alg, g.count, g.period, l, want)
		}
		if w := l.window(); w.Count != g.count || w.Period != g.period.Milliseconds() || w.Fixed != (g.alg == FixedWindow) {
			t.Errorf("window() = %+v", w)
		}
	}
	bad := []struct {
		alg    Algorithm
		count  int64
		period time.Duration
		want   string
	}{
		{GCRA, 1, time.Second, "gcra is not a window algorithm"},
		{SlidingWindow, 0, time.Second, "count must be at least 1, got 0"},
		{FixedWindow, -1, time.Second, "count must be at least 1, got -1"},
		{SlidingWindow, 1, 1500 * time.Millisecond, "whole number of seconds, got 1.5s"},
		{SlidingWindow, 1, time.Nanosecond, "whole number of seconds"},
		{SlidingWindow, 1, 0, "from 1s to 8784h, got 0s"},
		{SlidingWindow, 1, -time.Second, "from 1s to 8784h"},
		{FixedWindow, 1, MaxWindowPeriod + time.Second, "from 1s to 8784h"},
		{FixedWindow, (1<<53-1)/1000 + 1, time.Second, "exceeds 2^53 − 1"},
		{SlidingWindow, math.MaxInt64, time.Second, "exceeds 2^53 − 1"},
	}
	for _, b := range bad {
		_, err := NewWindowLimit(b.alg, b.count, b.period)
		if !errors.Is(err, ErrInvalidLimit) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("NewWindowLimit(%s, %d, %v) = %v; want an ErrInvalidLimit saying %q", b.alg, b.count, b.period, err, b.want)
		}
	}
}

func TestParseAlgorithm(t *testing.T) {
	for s, want := range map[string]Algorithm{"": GCRA, "gcra": GCRA, "sliding-window": SlidingWindow, "fixed-window": FixedWindow, "rate-counter": RateCounter} {
		if got, err := ParseAlgorithm(s); err != nil || got != want {
			t.Errorf("ParseAlgorithm(%q) = %v, %v; want %v", s, got, err, want)
		}
		if s != "" && want.String() != s {
			t.Errorf("%v.String() = %q; want %q", want, want.String(), s)
		}
	}
	for s, want := range map[string]string{
		"GCRA": `unknown algorithm "GCRA"`, "sliding": `unknown algorithm "sliding"`, " gcra": "unknown algorithm",
		"ratecounter": `unknown algorithm "ratecounter"`,
	} {
		if _, err := ParseAlgorithm(s); !errors.Is(err, ErrInvalidLimit) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseAlgorithm(%q) = %v; want an ErrInvalidLimit saying %q", s, err, want)
		}
	}
}
