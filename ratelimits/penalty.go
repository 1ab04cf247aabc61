package ratelimits

import (
	"fmt"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// The ranges of a rate-counter limit and of the ERL calls (docs/erl.md).
const (
	// MinRate and MaxRate bound a rate limit, in hits per second.
	MinRate = 10
	MaxRate = 70_000_000
	// MinTTL and MaxTTL bound an ERL TTL: a rate-counter limit's penalty
	// and the ttl of check_rate, check_rates and a box add.
	MinTTL = time.Minute
	MaxTTL = time.Hour
	// MinPenalty and MaxPenalty bound the penalty of a GCRA or window
	// limit, which is exact.
	MinPenalty = time.Second
	MaxPenalty = 24 * time.Hour
	// MaxRateCost is the most hits one transaction or check_rate adds to
	// a rate counter; MaxIncrement the most one increment adds.
	MaxRateCost  = 100_000
	MaxIncrement = 1_000
	// DefaultCapacity is how many entries each counter and each box holds
	// in process memory when the limit does not say.
	DefaultCapacity = 200_000
)

// NewRateCounterLimit validates a rate-counter limit: rate hits per second
// (MinRate to MaxRate) over a window of 1s, 10s or 60s, boxing an id whose
// rate goes above it for penalty (an ERL TTL, MinTTL to MaxTTL). Errors
// wrap ErrInvalidLimit.
func NewRateCounterLimit(window time.Duration, rate int64, penalty time.Duration) (Limit, error) {
	w := int64(window / time.Second)
	switch {
	case window%time.Second != 0 || !ratecounter.ValidWindow(w):
		return Limit{}, fmt.Errorf("%w: window must be 1s, 10s or 60s, got %s", ErrInvalidLimit, window)
	case rate < MinRate || rate > MaxRate:
		return Limit{}, fmt.Errorf("%w: rate must be from %d to %d hits per second, got %d", ErrInvalidLimit, MinRate, MaxRate, rate)
	case penalty < MinTTL || penalty > MaxTTL:
		return Limit{}, fmt.Errorf("%w: penalty must be from 1m to 1h, got %s", ErrInvalidLimit, penalty)
	}
	return Limit{Algorithm: RateCounter, Burst: rate * w, Count: rate * w, Period: window, Rate: rate, Penalty: penalty}, nil
}

// WithPenalty returns l (a GCRA or window limit) with a penalty box: an id
// that a spend of l denies stays in the box for penalty, from 1s to 24h,
// exactly. Errors wrap ErrInvalidLimit.
func (l Limit) WithPenalty(penalty time.Duration) (Limit, error) {
	switch {
	case l.Algorithm == RateCounter:
		return Limit{}, fmt.Errorf("%w: a rate-counter limit's penalty is set by NewRateCounterLimit", ErrInvalidLimit)
	case penalty < MinPenalty || penalty > MaxPenalty:
		return Limit{}, fmt.Errorf("%w: penalty must be from 1s to 24h, got %s", ErrInvalidLimit, penalty)
	}
	l.Penalty = penalty
	return l, nil
}

// CheckTTL refuses an ERL TTL outside MinTTL to MaxTTL; errors wrap
// ErrInvalidArgument.
func CheckTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return fmt.Errorf("%w: ttl must be from 1m to 1h, got %s", ErrInvalidArgument, ttl)
	}
	return nil
}

// BoxUntil is when an entry boxed at now (unix ns) for an ERL TTL leaves
// the box: the TTL is rounded to the nearest whole minute (a half minute
// up: 89s is 1m, 90s is 2m), and the entry leaves at the first whole UTC
// minute at or after now plus that. A 1m TTL so lasts one to two minutes.
func BoxUntil(now int64, ttl time.Duration) int64 {
	rounded := ttl.Round(time.Minute)
	const minute = int64(time.Minute)
	t := addSaturating(now, int64(rounded))
	m := t % minute
	if m < 0 {
		m += minute
	}
	if m == 0 {
		return t
	}
	return addSaturating(t, minute-m)
}
