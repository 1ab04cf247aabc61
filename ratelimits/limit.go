package ratelimits

import (
	"fmt"
	"math"
	"time"
)

// Limit is an effective limit: a bucket of Burst tokens, refilled at Count
// tokens per Period. GCRA works on its emission interval and burst offset,
// both whole nanoseconds; NewLimit guarantees they are positive and fit in an
// int64, so a Limit from NewLimit or a Config never breaks the arithmetic.
//
// Make a Limit with NewLimit: it computes the two once, so that deciding a
// transaction divides nothing. A Limit literal has neither.
type Limit struct {
	Burst    int64
	Count    int64
	Period   time.Duration
	Override bool // true when it is an override for some ids, not a default

	emissionInterval int64
	burstOffset      int64
}

// NewLimit validates a limit as docs/semantics.md requires: burst, count and
// period all > 0, an emission interval (period / count, truncated) of at
// least 1ns, and a burst offset (emission interval × burst) that fits in an
// int64. Errors wrap ErrInvalidLimit and say which rule failed.
func NewLimit(burst, count int64, period time.Duration) (Limit, error) {
	switch {
	case burst <= 0:
		return Limit{}, fmt.Errorf("%w: burst must be greater than 0, got %d", ErrInvalidLimit, burst)
	case count <= 0:
		return Limit{}, fmt.Errorf("%w: count must be greater than 0, got %d", ErrInvalidLimit, count)
	case period <= 0:
		return Limit{}, fmt.Errorf("%w: period must be greater than 0, got %s", ErrInvalidLimit, period)
	}
	ei := int64(period) / count
	if ei == 0 {
		return Limit{}, fmt.Errorf("%w: emission interval is 0: period %s is shorter than count %d nanoseconds; lower count or lengthen period",
			ErrInvalidLimit, period, count)
	}
	if ei > math.MaxInt64/burst {
		return Limit{}, fmt.Errorf("%w: burst offset overflows: emission interval %dns × burst %d does not fit in int64 nanoseconds; lower burst or raise count",
			ErrInvalidLimit, ei, burst)
	}
	return Limit{Burst: burst, Count: count, Period: period, emissionInterval: ei, burstOffset: ei * burst}, nil
}

// EmissionInterval is the time one token takes to come back, period / count
// in nanoseconds, truncated. It is 0 for a Limit not made by NewLimit.
func (l Limit) EmissionInterval() int64 { return l.emissionInterval }

// BurstOffset is the time an empty bucket takes to fill completely,
// EmissionInterval() × Burst in nanoseconds.
func (l Limit) BurstOffset() int64 { return l.burstOffset }
