package envoyapi

import (
	"math"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// A period of exactly a second, minute, hour or day shows its count per
// that unit. Any other period takes the smallest unit at least as long
// (a day beyond), with the count scaled down to it and rounded down, at
// least 1, at most the largest uint32.
func TestCurrentLimitUnits(t *testing.T) {
	const (
		second = rlsv3.RateLimitResponse_RateLimit_SECOND
		minute = rlsv3.RateLimitResponse_RateLimit_MINUTE
		hour   = rlsv3.RateLimitResponse_RateLimit_HOUR
		day    = rlsv3.RateLimitResponse_RateLimit_DAY
	)
	for _, tc := range []struct {
		count   int64
		period  time.Duration
		unit    rlsv3.RateLimitResponse_RateLimit_Unit
		perUnit uint32
	}{
		{5, time.Second, second, 5},
		{3, time.Minute, minute, 3},
		{10, time.Hour, hour, 10},
		{100, 24 * time.Hour, day, 100},
		{2, 500 * time.Millisecond, second, 4},           // 2 per half second
		{1, time.Nanosecond, second, 1_000_000_000},      // the shortest period
		{3, 7 * time.Second, minute, 25},                 // 180/7 = 25.7
		{7, 3 * time.Second, minute, 140},                // exact after scaling
		{2, 90 * time.Second, hour, 80},                  // a minute is too short for 90s
		{1, 2 * time.Hour, day, 12},                      //
		{300, 168 * time.Hour, day, 42},                  // a week: 300/7 = 42.9 a day
		{1, 1000 * time.Hour, day, 1},                    // 0.024 a day: at least 1
		{4_000_000_000, time.Hour, hour, 4_000_000_000},  // fits
		{5_000_000_000, time.Hour, hour, math.MaxUint32}, // saturates
		{math.MaxInt64, time.Nanosecond, second, math.MaxUint32},
		{math.MaxInt64, 2 * time.Second, minute, math.MaxUint32},
		{math.MaxInt64, 25 * time.Hour, day, math.MaxUint32}, // count × day needs 128 bits
		{1<<28 - 1, 90 * time.Minute, day, 1<<32 - 16},       // 16 windows a day
		{1 << 28, 90 * time.Minute, day, math.MaxUint32},     // 2^32: one past uint32
	} {
		unit, perUnit := currentLimit(tc.count, tc.period)
		if unit != tc.unit || perUnit != tc.perUnit {
			t.Errorf("currentLimit(%d, %v) = %v %d, want %v %d", tc.count, tc.period, unit, perUnit, tc.unit, tc.perUnit)
		}
	}
}

// Durations are whole milliseconds rounded up, so a client that waits
// them is never early.
func TestMillisUp(t *testing.T) {
	for _, tc := range []struct {
		d       time.Duration
		seconds int64
		nanos   int32
	}{
		{0, 0, 0},
		{-time.Second, 0, 0},
		{time.Nanosecond, 0, 1_000_000},
		{time.Millisecond, 0, 1_000_000},
		{333_333_333 * time.Nanosecond, 0, 334_000_000},
		{1500*time.Millisecond + 1, 1, 501_000_000},
		{time.Hour, 3600, 0},
	} {
		s, n := millisUp(tc.d)
		if s != tc.seconds || n != tc.nanos {
			t.Errorf("millisUp(%v) = %ds %dns, want %ds %dns", tc.d, s, n, tc.seconds, tc.nanos)
		}
	}
}
