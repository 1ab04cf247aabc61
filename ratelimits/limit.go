package ratelimits

import (
	"fmt"
	"math"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/calendar"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// Algorithm is how a limit counts: GCRA (the default), SlidingWindow,
// FixedWindow, RateCounter or Calendar. It belongs to a limit's name: every limit of one name
// counts the same way, since the state stored under its keys is that
// algorithm's.
type Algorithm = bucket.Algorithm

// The algorithms (docs/semantics.md).
const (
	GCRA          = bucket.GCRA
	SlidingWindow = bucket.SlidingWindow
	FixedWindow   = bucket.FixedWindow
	RateCounter   = bucket.RateCounter
	Calendar      = bucket.Calendar
	Concurrency   = bucket.Concurrency
)

// ParseAlgorithm reads an algorithm as spelt in config files; the empty
// string is GCRA.
func ParseAlgorithm(s string) (Algorithm, error) {
	if a, ok := bucket.ParseAlgorithm(s); ok {
		return a, nil
	}
	return 0, fmt.Errorf("%w: unknown algorithm %q: want gcra, sliding-window, fixed-window, rate-counter, calendar or concurrency", ErrInvalidLimit, s)
}

// The bounds of a window limit's period: whole seconds, from one second to
// 8784 hours (a leap year).
const (
	MinWindowPeriod = time.Second
	MaxWindowPeriod = 8784 * time.Hour
)

// Limit is an effective limit.
//
// A GCRA limit is a bucket of Burst tokens, refilled at Count tokens per
// Period. GCRA works on its emission interval and burst offset, both whole
// nanoseconds; NewLimit guarantees they are positive and fit in an int64,
// so a Limit from NewLimit or a Config never breaks the arithmetic.
//
// A window limit (NewWindowLimit) allows Count hits per window of Period;
// its Burst equals Count, the most one transaction may cost.
//
// A calendar limit (NewCalendarLimit) allows Count hits per period of its
// Calendar (a day, ISO week, month or year of a time zone); its Burst
// equals Count and its Period is 0, since its periods differ in length.
//
// Make a Limit with NewLimit or NewWindowLimit: they compute what a
// decision needs once, so that deciding a transaction divides nothing. A
// Limit literal has none of it.
type Limit struct {
	Algorithm Algorithm
	Burst     int64
	Count     int64
	Period    time.Duration
	Override  bool // true when it is an override for some ids, not a default
	// SyncRate says where a window or rate-counter limit is counted when
	// the source is shared by several processes: 0 on the source, exactly;
	// below 0 in each process alone; above 0 in each process, pushed to
	// and read back from the source every SyncRate. It belongs to the
	// name, so a Config gives every override of a name its default's
	// SyncRate.
	SyncRate time.Duration
	// Rate is a rate-counter limit's: hits per second over the window
	// Period (1s, 10s or 60s). Its Burst and Count are Rate × window.
	Rate int64
	// Penalty is how long an id stays in the limit's penalty box once the
	// limit denies it (WithPenalty); 0 when the limit has no box. A
	// rate-counter limit always has one: its Penalty is the box's TTL,
	// rounded as an ERL TTL is (BoxUntil).
	Penalty time.Duration
	// Capacity bounds the entries of each of the limit's counters and of
	// its box where the state lives in process memory (0: the default,
	// DefaultCapacity). It belongs to the name, like SyncRate.
	Capacity int
	// Shadow makes the limit watch without enforcing: it is decided and
	// its state kept as for a spend-only transaction, but it never denies
	// a batch nor decides one, so a new limit can be rolled out and its
	// would-be denials counted first. It belongs to the name, like
	// SyncRate.
	Shadow bool
	// Calendar is a calendar limit's periods: its unit and zone, which
	// belong to the name, so a Config gives every override of a name its
	// default's Calendar. Nil for other limits.
	Calendar *calendar.Calendar

	emissionInterval int64
	burstOffset      int64
}

// NewLimit validates a GCRA limit as docs/semantics.md requires: burst,
// count and period all > 0, an emission interval (period / count,
// truncated) of at least 1ns, and a burst offset (emission interval ×
// burst) that fits in an int64. Errors wrap ErrInvalidLimit and say which
// rule failed.
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
	return Limit{Algorithm: GCRA, Burst: burst, Count: count, Period: period, emissionInterval: ei, burstOffset: ei * burst}, nil
}

// NewWindowLimit validates a sliding or fixed window limit of count hits
// per period: count >= 1; period a whole number of seconds from
// MinWindowPeriod to MaxWindowPeriod; count × period in milliseconds at
// most 2^53 − 1, which keeps every product of the arithmetic exact, also
// in the Redis script's doubles. Errors wrap ErrInvalidLimit.
func NewWindowLimit(alg Algorithm, count int64, period time.Duration) (Limit, error) {
	switch {
	case !alg.Windowed():
		return Limit{}, fmt.Errorf("%w: %s is not a window algorithm", ErrInvalidLimit, alg)
	case count < 1:
		return Limit{}, fmt.Errorf("%w: count must be at least 1, got %d", ErrInvalidLimit, count)
	case period%time.Second != 0:
		return Limit{}, fmt.Errorf("%w: period must be a whole number of seconds, got %s", ErrInvalidLimit, period)
	case period < MinWindowPeriod || period > MaxWindowPeriod:
		return Limit{}, fmt.Errorf("%w: period must be from 1s to 8784h, got %s", ErrInvalidLimit, period)
	}
	ms := period.Milliseconds()
	if count > window.MaxProduct/ms {
		return Limit{}, fmt.Errorf("%w: count %d × period %dms exceeds 2^53 − 1; lower count or shorten period", ErrInvalidLimit, count, ms)
	}
	return Limit{Algorithm: alg, Burst: count, Count: count, Period: period}, nil
}

// NewCalendarLimit validates a calendar limit of count hits per period of
// cal: count from 1 to calendar.MaxCount (2^53 − 1, exact in the Redis
// script's doubles too). cal may be nil for an override, which takes its
// name's calendar (NewConfig). Errors wrap ErrInvalidLimit.
func NewCalendarLimit(count int64, cal *calendar.Calendar) (Limit, error) {
	if count < 1 || count > calendar.MaxCount {
		return Limit{}, fmt.Errorf("%w: count must be from 1 to 2^53 − 1, got %d", ErrInvalidLimit, count)
	}
	return Limit{Algorithm: Calendar, Burst: count, Count: count, Calendar: cal}, nil
}

// PeriodName is how the limit's period is spelt in the API: a calendar
// limit's unit ("month"), or the period as a Go duration ("15m0s").
func (l Limit) PeriodName() string {
	if l.Calendar != nil {
		return l.Calendar.Unit().String()
	}
	return l.Period.String()
}

// Zone is a calendar limit's time zone name, "" for other limits.
func (l Limit) Zone() string {
	if l.Calendar != nil {
		return l.Calendar.Zone()
	}
	return ""
}

// MinSyncRate is the shortest sync period above 0: a sync_rate between 0
// and it is refused.
const MinSyncRate = time.Millisecond

// EmissionInterval is a GCRA limit's time for one token to come back,
// period / count in nanoseconds, truncated. It is 0 for a window limit and
// for a Limit not made by NewLimit.
func (l Limit) EmissionInterval() int64 { return l.emissionInterval }

// BurstOffset is the time an empty GCRA bucket takes to fill completely,
// EmissionInterval() × Burst in nanoseconds.
func (l Limit) BurstOffset() int64 { return l.burstOffset }

// valid reports whether l came from NewLimit, NewWindowLimit or
// NewRateCounterLimit.
func (l Limit) valid() bool {
	switch {
	case l.Algorithm == Concurrency:
		return l.Count >= 1 && l.Period >= MinLeasePeriod
	case l.Algorithm == RateCounter:
		return l.Rate >= MinRate && l.Penalty > 0
	case l.Algorithm.Windowed():
		return l.Count >= 1 && l.Period >= MinWindowPeriod
	case l.Algorithm == Calendar:
		return l.Count >= 1 && l.Count <= calendar.MaxCount
	}
	return l.emissionInterval > 0
}

// MostPerTransaction is the most one transaction of l may cost: its burst
// (a window, calendar or concurrency limit's count), or MaxRateCost for a
// rate counter, whose cost is hits observed and may be denied whatever
// it is. A higher cost is ErrInvalidCost: no bucket could ever grant it.
func (l Limit) MostPerTransaction() int64 {
	if l.Algorithm == RateCounter {
		return MaxRateCost
	}
	return l.Burst
}

// HasBox reports whether the limit has a penalty box: a rate-counter
// limit, or one with a Penalty. A limit without one never reads a box.
func (l Limit) HasBox() bool { return l.Penalty > 0 }

// window returns a window limit as the window package takes it.
func (l Limit) window() window.Limit {
	return window.Limit{Count: l.Count, Period: l.Period.Milliseconds(), Fixed: l.Algorithm == FixedWindow}
}

// op is the source's view of a transaction on key under l at now (unix
// ns, which sets when an id boxed by it leaves the box). A limit's box
// entry has the bucket's key: a source keeps boxes apart.
func (l Limit) op(key string, cost int64, mode Mode, now int64) bucket.Op {
	op := bucket.Op{Key: key, Algorithm: l.Algorithm, Cost: cost, Mode: mode, SyncRate: l.SyncRate}
	switch {
	case l.Algorithm == Concurrency:
		op.Lease = l.lease()
	case l.Algorithm == RateCounter:
		op.Rate = ratecounter.Limit{Window: int64(l.Period / time.Second), Rate: l.Rate}
	case l.Algorithm.Windowed():
		op.Window = l.window()
	case l.Algorithm == Calendar:
		op.Calendar = calendar.Limit{Count: l.Count, Tag: l.Calendar.Tag()}
		op.Periods = l.Calendar
	default:
		op.EmissionInterval, op.BurstOffset = l.emissionInterval, l.burstOffset
	}
	if l.Penalty > 0 {
		op.Box, op.BoxUntil = key, l.boxUntil(now)
		op.Capacity = l.capacity()
		if l.Shadow && l.Algorithm != RateCounter {
			// A shadow limit's transactions take part as spend-only ones
			// do, which box nobody; a check of one answers as if spent, so
			// it boxes nobody either.
			op.BoxUntil = 0
		}
	}
	return op
}

// capacity is how many entries each of l's counters and its box hold in
// process memory.
func (l Limit) capacity() int {
	if l.Capacity > 0 {
		return l.Capacity
	}
	return DefaultCapacity
}

// boxUntil is when an id that l boxes at now leaves the box: a rate-counter
// limit's Penalty is an ERL TTL (BoxUntil), any other limit's is exact.
func (l Limit) boxUntil(now int64) int64 {
	if l.Algorithm == RateCounter {
		return BoxUntil(now, l.Penalty)
	}
	return addSaturating(now, int64(l.Penalty))
}

func addSaturating(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
