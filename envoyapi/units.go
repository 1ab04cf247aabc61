package envoyapi

import (
	"math"
	"math/bits"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/limiter-dev/limiter/ratelimits/calendar"
)

// unitLengths are the units current_limit can name, shortest first. Envoy
// also has WEEK, MONTH and YEAR, but a month and a year have no fixed
// length, and the day is long enough for every period in practice.
var unitLengths = [...]struct {
	unit   rlsv3.RateLimitResponse_RateLimit_Unit
	length time.Duration
}{
	{rlsv3.RateLimitResponse_RateLimit_SECOND, time.Second},
	{rlsv3.RateLimitResponse_RateLimit_MINUTE, time.Minute},
	{rlsv3.RateLimitResponse_RateLimit_HOUR, time.Hour},
	{rlsv3.RateLimitResponse_RateLimit_DAY, 24 * time.Hour},
}

// currentLimit says a limit of count tokens per period the way Envoy's
// current_limit can: requests per second, minute, hour or day.
//
// A period of exactly one of those units is shown as it is: count per
// unit. Any other period is shown in the smallest unit at least as long as
// the period (DAY when the period is longer than a day), with count scaled
// to that unit and rounded down: floor(count × unit / period), so Envoy is
// never shown more than the limit allows over a unit, but at least 1, since
// a limit of 0 would read as "nothing allowed". Values past the uint32
// field saturate. The product count × unit is computed in 128 bits, so no
// limit overflows.
func currentLimit(count int64, period time.Duration) (rlsv3.RateLimitResponse_RateLimit_Unit, uint32) {
	count = max(count, 0)
	for _, u := range unitLengths {
		if period == u.length {
			return u.unit, saturate32(uint64(count))
		}
	}
	if period <= 0 {
		// A limited decision always has a period; this only keeps a
		// broken one from dividing by zero.
		return rlsv3.RateLimitResponse_RateLimit_SECOND, saturate32(uint64(count))
	}
	u := unitLengths[len(unitLengths)-1]
	for _, c := range unitLengths {
		if c.length >= period {
			u = c
			break
		}
	}
	hi, lo := bits.Mul64(uint64(count), uint64(u.length))
	if hi >= uint64(period) {
		return u.unit, math.MaxUint32 // the quotient does not even fit in 64 bits
	}
	perUnit, _ := bits.Div64(hi, lo, uint64(period))
	return u.unit, max(saturate32(perUnit), 1)
}

// calendarLimit says a calendar limit of count per calendar day, week,
// month or year as Envoy's current_limit has the same units: count per
// unit, saturated to the uint32 field.
func calendarLimit(count int64, u calendar.Unit) (rlsv3.RateLimitResponse_RateLimit_Unit, uint32) {
	unit := rlsv3.RateLimitResponse_RateLimit_DAY
	switch u {
	case calendar.Week:
		unit = rlsv3.RateLimitResponse_RateLimit_WEEK
	case calendar.Month:
		unit = rlsv3.RateLimitResponse_RateLimit_MONTH
	case calendar.Year:
		unit = rlsv3.RateLimitResponse_RateLimit_YEAR
	}
	return unit, saturate32(uint64(max(count, 0)))
}

// saturate32 is n, or the largest uint32 when n is larger.
func saturate32(n uint64) uint32 {
	return uint32(min(n, math.MaxUint32))
}
