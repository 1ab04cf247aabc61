// Package bucket decides batches of operations that mix algorithms, for
// the sources that store them.
//
// A bucket is whatever a source stores under one key: a GCRA bucket's
// TAT, a window limit's counter, or a rate counter's hits per second. A
// limit may also have a penalty box: a second store, beside its buckets,
// of ids shut out until an expiry. An Op names the key, its algorithm and
// that algorithm's numbers, and its box entry when its limit has a box;
// SpendBatch and RefundBatch apply the batch rules (modes, the
// all-or-nothing write, boxing) and leave each op's arithmetic to its
// algorithm's package (gcra, window, ratecounter, calendar, concurrency). A
// source reads the states of a batch's keys (and box entries), calls one of
// them, and stores what the outcomes ask it to, all in one atomic step.
// Nothing here does I/O, and nothing allocates but a lease set that grows.
package bucket

import (
	"time"

	"github.com/limiter-dev/limiter/ratelimits/calendar"
	"github.com/limiter-dev/limiter/ratelimits/concurrency"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// Algorithm is how a limit counts.
type Algorithm uint8

const (
	// GCRA is the Generic Cell Rate Algorithm: a burst refilled at a
	// steady rate, stored as one TAT. It is the default.
	GCRA Algorithm = iota
	// SlidingWindow counts hits in aligned windows, weighting the previous
	// window's hits by its overlap with the last period.
	SlidingWindow
	// FixedWindow counts hits in aligned windows, the current one only.
	FixedWindow
	// RateCounter counts hits per second, as Fastly's rate counters do,
	// and boxes an id whose rate over its window goes above the limit.
	RateCounter
	// Calendar counts hits per calendar day, week, month or year of a
	// time zone.
	Calendar
	// Concurrency bounds how many slots are held at once: an acquire
	// holds a lease until it is released or its time to live runs out.
	Concurrency
)

// String returns the algorithm's name as it appears in config files and
// in the API.
func (a Algorithm) String() string {
	switch a {
	case GCRA:
		return "gcra"
	case SlidingWindow:
		return "sliding-window"
	case FixedWindow:
		return "fixed-window"
	case RateCounter:
		return "rate-counter"
	case Calendar:
		return "calendar"
	case Concurrency:
		return "concurrency"
	}
	return "unknown"
}

// ParseAlgorithm reads an algorithm's name; the empty string is GCRA.
func ParseAlgorithm(s string) (Algorithm, bool) {
	switch s {
	case "", "gcra":
		return GCRA, true
	case "sliding-window":
		return SlidingWindow, true
	case "fixed-window":
		return FixedWindow, true
	case "rate-counter":
		return RateCounter, true
	case "calendar":
		return Calendar, true
	case "concurrency":
		return Concurrency, true
	}
	return 0, false
}

// Windowed reports whether a counts hits in windows.
func (a Algorithm) Windowed() bool { return a == SlidingWindow || a == FixedWindow }

// Counted reports whether a limit of a stores a count of hits per period
// (a window or calendar counter) rather than a TAT or a rate counter:
// sources keep those in one place.
func (a Algorithm) Counted() bool { return a.Windowed() || a == Calendar }

// Mode says how a transaction takes part in a batch.
type Mode uint8

const (
	// CheckAndSpend counts toward the batch decision and is written when the
	// whole batch is allowed. It is the default.
	CheckAndSpend Mode = iota
	// CheckOnly counts toward the batch decision and is never written.
	CheckOnly
	// SpendOnly does not count toward the batch decision; it is written only
	// when it is itself allowed and the whole batch is allowed.
	SpendOnly
)

// String returns the mode's name as it appears in the HTTP API.
func (m Mode) String() string {
	switch m {
	case CheckAndSpend:
		return "check-and-spend"
	case CheckOnly:
		return "check-only"
	case SpendOnly:
		return "spend-only"
	}
	return "unknown"
}

// Counts reports whether a transaction in this mode takes part in the batch
// decision.
func (m Mode) Counts() bool { return m != SpendOnly }

// Op is one key's part in a batch, as a source sees it: the key, the
// algorithm and its numbers, the cost and the mode, and the op's box entry
// when its limit has one. A source needs nothing else to decide and store
// a batch.
type Op struct {
	Key       string
	Algorithm Algorithm
	// EmissionInterval and BurstOffset are a GCRA limit's, in ns.
	EmissionInterval int64
	BurstOffset      int64
	// Window is a window limit's (Algorithm SlidingWindow or FixedWindow).
	Window window.Limit
	// Rate is a rate-counter limit's (Algorithm RateCounter).
	Rate ratecounter.Limit
	// Calendar and Periods are a calendar limit's (Algorithm Calendar):
	// its count and calendar, and the calendar's periods, which give the
	// period of now.
	Calendar calendar.Limit
	Periods  *calendar.Calendar
	Cost     int64
	Mode     Mode
	// Box is the key of the op's entry in its limit's penalty box, "" when
	// the limit has no box; a source keeps box entries apart from buckets,
	// so Box may equal Key. Every rate-counter limit has a box.
	Box string
	// BoxUntil is the expiry (unix ns) an entry boxed by this op gets, at
	// the least: boxing never shortens an expiry already stored. A GCRA,
	// window or calendar op whose BoxUntil is not after now boxes nobody
	// (a shadow limit's): its box is read, and its denial is its bucket's.
	BoxUntil int64
	// Capacity bounds the entries of the op's limit (the enum part of a
	// key "<enum>:<id>") in a rate counter, and in its box, where a source
	// keeps them in process memory: past it, a new entry evicts one (a
	// counter's least recently incremented, a box's closest to expiring).
	// It is 0 for other ops.
	Capacity int
	// Lease is a concurrency op's limit; LeaseID the id of the lease an
	// acquire takes (made by the Limiter) or a release or renew names;
	// LeaseAction what the op does in RefundBatch (see lease.go).
	Lease       concurrency.Limit
	LeaseID     string
	LeaseAction LeaseAction
	// SyncRate is the op's limit's sync_rate, set on every op. A layer in
	// front of a shared source (source/local) counts the window and
	// rate-counter ops whose SyncRate is not 0 in process memory; a
	// source ignores it.
	SyncRate time.Duration
}

// State is what a source stores for one op: TAT for a GCRA op
// (gcra.Missing, or any time not after now, when the bucket is full),
// Window for a window op (the zero Counter when nothing is stored),
// Calendar for a calendar op (likewise), Rate
// for a rate-counter op (nil when nothing is stored), and, for an op with a
// Box, BoxExpires: the expiry of its box entry (0, or any time not after
// now, when the id is not in the box). The zero State is an empty bucket
// of any kind, out of the box.
type State struct {
	TAT      int64
	Window   window.Counter
	Calendar calendar.Counter
	// Rate is read, never written, by this package: a source may point it
	// at the counter it stores, while it holds the lock that keeps it.
	Rate       *ratecounter.Counter
	BoxExpires int64
	// Leases are a concurrency op's bucket (nil when nothing is stored).
	// A decision may reorder, cut or change them in place. They are held
	// by pointer so that a State, and an Outcome, stay comparable.
	Leases *[]concurrency.Lease
}

// Empty is the state of a key nothing is stored under.
var Empty = State{TAT: gcra.Missing}

// Decision is one op's answer, durations in nanoseconds. Penalized says
// the id is in the op's box (after the op): the decision is then the box's.
// Hits is a rate-counter op's hits over its window, the op's own cost
// included (after a spend, as if counted; after a refund, what is left);
// check_rate answers its rate from them. It is 0 for other ops. Period is
// a calendar op's period at now (unix ms), zero for other ops.
type Decision struct {
	Allowed   bool
	Remaining int64
	RetryIn   int64
	ResetIn   int64
	Penalized bool
	Hits      int64
	Period    calendar.Period
	// Lease is the id of the lease a concurrency op took: set only when
	// it is written (see SpendBatch).
	Lease string
}

// Outcome is one op's decision in a batch, the state it leaves, and what
// must be stored.
//
// Write asks for the op's bucket to be stored: for a GCRA or window op,
// New.TAT or New.Window (a TAT not after now, or a counter whose Expires
// is not after now, describes an empty bucket, so a source may delete it
// instead); for a calendar op, New.Calendar (one with Used 0 is empty); for a rate-counter op, the op's Cost added to the counter's
// second at now (ratecounter.Counter.Add) by a spend, or taken from it
// (Counter.Remove) by a refund. New.Rate is not filled.
//
// WriteBox asks for New.BoxExpires to be stored as the op's box entry.
// It is set even in a denied batch: an id is boxed by the denial itself.
type Outcome struct {
	Decision
	New      State
	Write    bool
	WriteBox bool
}

// msPerNs converts the window package's milliseconds to nanoseconds.
const nsPerMs = 1_000_000

// Millis is now (unix ns) in whole milliseconds, rounded down, also
// before 1970: the resolution of the window, calendar and lease
// arithmetic, which every source reads the clock at.
func Millis(now int64) int64 {
	ms := now / nsPerMs
	if now%nsPerMs < 0 {
		ms--
	}
	return ms
}

// spend decides one op at now from its stored state. An op whose id is in
// its box is answered by the box without reading its bucket; one that its
// bucket denies in a mode that decides boxes its id (written by
// SpendBatch's caller although the batch is denied). A rate-counter op
// decides by its rate alone.
func spend(now int64, op *Op, st State) Outcome {
	switch {
	case op.Algorithm == RateCounter:
		return spendRate(now, op, st)
	case op.Algorithm == Concurrency:
		return acquire(now, op, st)
	case op.Box != "" && st.BoxExpires > now:
		// Boxed: the bucket is not touched; its own reset still shows.
		own := spendBucket(now, op, 0, st)
		return boxed(st.BoxExpires, now, own, st, false)
	}
	o := spendBucket(now, op, op.Cost, st)
	o.New.BoxExpires = st.BoxExpires
	if !o.Allowed && op.Box != "" && op.Mode != SpendOnly && op.BoxUntil > now {
		return boxed(max(st.BoxExpires, op.BoxUntil), now, o, st, op.Mode == CheckAndSpend)
	}
	return o
}

// boxed is the answer of an op whose id is in its box until expires:
// denied, nothing remaining, retry when the box lets it out, reset the
// later of that and the bucket's own (from own). The bucket keeps its
// state; write asks for the box entry to be stored.
func boxed(expires, now int64, own Outcome, st State, write bool) Outcome {
	retry := expires - now
	return Outcome{
		Decision: Decision{Allowed: false, Remaining: 0, RetryIn: retry, ResetIn: max(retry, own.ResetIn), Penalized: true, Period: own.Period},
		New:      State{TAT: st.TAT, Window: st.Window, Calendar: st.Calendar, BoxExpires: expires},
		WriteBox: write,
	}
}

// spendBucket decides cost at now from a GCRA, window or calendar op's
// bucket.
func spendBucket(now int64, op *Op, cost int64, st State) Outcome {
	if op.Algorithm == Calendar {
		ms := Millis(now)
		p := op.Periods.At(ms)
		return calendarOutcome(calendar.Spend(ms, op.Calendar, p, cost, st.Calendar), p)
	}
	if op.Algorithm.Windowed() {
		d := window.Spend(Millis(now), op.Window, cost, st.Window)
		return windowOutcome(d)
	}
	d := gcra.Spend(now, st.TAT, op.EmissionInterval, op.BurstOffset, cost)
	return Outcome{
		Decision: Decision{Allowed: d.Allowed, Remaining: d.Remaining, RetryIn: d.RetryIn, ResetIn: d.ResetIn},
		New:      State{TAT: d.NewTAT},
	}
}

// spendRate decides a rate-counter op: its hits over the window, this op's
// cost included, go above the limit or not. Going above boxes the id
// (unless the op is check-only); the op is allowed exactly when the id is
// not in the box afterwards. Its hits are written in every mode but
// check-only, whether the batch is allowed or not: they are observations
// of traffic, not tokens.
func spendRate(now int64, op *Op, st State) Outcome {
	c := counterOf(st)
	s := ratecounter.Second(now)
	hits := c.Window(s, op.Rate.Window) + op.Cost
	expires := st.BoxExpires
	if op.Rate.Above(hits) {
		expires = max(expires, op.BoxUntil)
	}
	o := Outcome{New: State{BoxExpires: expires}, Write: op.Mode != CheckOnly && op.Cost > 0}
	o.WriteBox = op.Mode != CheckOnly && expires != st.BoxExpires
	newest, ok := s, op.Cost > 0
	if !ok {
		newest, ok = c.Newest(s, op.Rate.Window)
	}
	o.Decision = rateDecision(now, op.Rate, hits, newest, ok, expires)
	return o
}

// rateDecision is a rate-counter op's answer when its window holds hits
// and its newest hit (if any) is at second newest. The window is reset
// when that hit leaves it.
func rateDecision(now int64, l ratecounter.Limit, hits, newest int64, any bool, boxExpires int64) Decision {
	var resetIn int64
	if any {
		resetIn = max(0, (newest+l.Window)*nsPerSecond-now)
	}
	if boxExpires > now {
		retry := boxExpires - now
		return Decision{Allowed: false, RetryIn: retry, ResetIn: max(retry, resetIn), Penalized: true, Hits: hits}
	}
	return Decision{Allowed: true, Remaining: max(0, l.Capacity()-hits), ResetIn: resetIn, Hits: hits}
}

// counterOf returns the rate counter of st, or an empty one.
func counterOf(st State) *ratecounter.Counter {
	if st.Rate != nil {
		return st.Rate
	}
	return &ratecounter.Counter{}
}

// nsPerSecond converts whole seconds to nanoseconds.
const nsPerSecond = 1_000_000_000

// refund gives one op's cost back at now. Refunding never lets an id out
// of its box: a boxed id's answer is the box's, with Allowed still saying
// whether anything was given back.
func refund(now int64, op *Op, cost int64, st State) Outcome {
	o := refundBucket(now, op, cost, st)
	o.New.BoxExpires = st.BoxExpires
	if op.Box != "" && st.BoxExpires > now {
		retry := st.BoxExpires - now
		o.Remaining, o.RetryIn, o.ResetIn, o.Penalized = 0, retry, max(retry, o.ResetIn), true
	}
	return o
}

// refundBucket gives cost back to an op's bucket at now.
func refundBucket(now int64, op *Op, cost int64, st State) Outcome {
	switch {
	case op.Algorithm == Concurrency:
		return leaseAction(now, op, st)
	case op.Algorithm == RateCounter:
		c := counterOf(st)
		s := ratecounter.Second(now)
		taken := min(cost, c.At(s))
		hits := c.Window(s, op.Rate.Window) - taken
		newest, ok := s, c.At(s) > taken
		if !ok {
			newest, ok = c.Newest(s-1, op.Rate.Window-1)
		}
		d := rateDecision(now, op.Rate, hits, newest, ok, 0)
		d.Allowed = taken > 0
		return Outcome{Decision: d, Write: taken > 0}
	case op.Algorithm.Windowed():
		o := windowOutcome(window.Refund(Millis(now), op.Window, cost, st.Window))
		o.Write = o.Allowed
		return o
	case op.Algorithm == Calendar:
		ms := Millis(now)
		p := op.Periods.At(ms)
		o := calendarOutcome(calendar.Refund(ms, op.Calendar, p, cost, st.Calendar), p)
		o.Write = o.Allowed
		return o
	}
	d := gcra.Refund(now, st.TAT, op.EmissionInterval, op.BurstOffset, cost)
	return Outcome{
		Decision: Decision{Allowed: d.Allowed, Remaining: d.Remaining, RetryIn: d.RetryIn, ResetIn: d.ResetIn},
		New:      State{TAT: d.NewTAT},
		Write:    d.Allowed,
	}
}

func windowOutcome(d window.Decision) Outcome {
	return Outcome{
		Decision: Decision{Allowed: d.Allowed, Remaining: d.Remaining, RetryIn: d.RetryIn * nsPerMs, ResetIn: d.ResetIn * nsPerMs},
		New:      State{TAT: gcra.Missing, Window: d.Counter},
	}
}

func calendarOutcome(d calendar.Decision, p calendar.Period) Outcome {
	return Outcome{
		Decision: Decision{Allowed: d.Allowed, Remaining: d.Remaining, RetryIn: d.RetryIn * nsPerMs, ResetIn: d.ResetIn * nsPerMs, Period: p},
		New:      State{TAT: gcra.Missing, Calendar: d.Counter},
	}
}

// moves reports whether an allowed spend's new state differs from what
// was stored: a cost-0 spend changes nothing and needs no write.
func moves(now int64, op *Op, st State, o *Outcome) bool {
	if op.Algorithm.Counted() || op.Algorithm == Concurrency {
		return op.Cost > 0
	}
	return o.New.TAT > max(now, st.TAT)
}

// SpendBatch decides a batch of spends at now, given each op's stored
// state, and fills outcomes (len(ops), same order).
//
// The batch is allowed when every counting op is allowed. A denied batch
// writes no GCRA or window bucket; in an allowed batch, CheckAndSpend and
// SpendOnly ops that are themselves allowed and actually change their
// state are written. Two writes happen whatever the batch's fate: a
// rate-counter op's hits (every mode but CheckOnly), and a box entry (an
// id boxed by its op's denial or by its rate going above the limit).
// SpendBatch returns whether the batch was allowed.
func SpendBatch(now int64, ops []Op, states []State, outcomes []Outcome) bool {
	allowed := true
	for i := range ops {
		outcomes[i] = spend(now, &ops[i], states[i])
		if ops[i].Mode.Counts() && !outcomes[i].Allowed {
			allowed = false
		}
	}
	if !allowed {
		unlease(ops, outcomes)
		return false
	}
	for i := range ops {
		if ops[i].Algorithm == RateCounter {
			continue
		}
		o := &outcomes[i]
		o.Write = ops[i].Mode != CheckOnly && o.Allowed && moves(now, &ops[i], states[i], o)
	}
	unlease(ops, outcomes)
	return true
}

// RefundBatch gives back each op's cost at now, given each op's stored
// state, and fills outcomes (len(ops), same order). CheckOnly ops refund
// nothing. An op is written only when something was actually given back;
// no box entry is ever written.
func RefundBatch(now int64, ops []Op, states []State, outcomes []Outcome) {
	for i := range ops {
		cost := ops[i].Cost
		if ops[i].Mode == CheckOnly {
			cost = 0
		}
		outcomes[i] = refund(now, &ops[i], cost, states[i])
	}
}

// Busy reports whether a reset of st at now would give anything back: a
// GCRA bucket that is not full, a window, calendar or rate counter that
// still counts, or an id in the op's box.
func Busy(now int64, op *Op, st State) bool {
	if op.Box != "" && st.BoxExpires > now {
		return true
	}
	switch {
	case op.Algorithm == Concurrency:
		return concurrency.Busy(Millis(now), LeasesOf(st))
	case op.Algorithm == RateCounter:
		return st.Rate != nil && !st.Rate.Empty(ratecounter.Second(now))
	case op.Algorithm.Windowed():
		return window.Busy(Millis(now), op.Window, st.Window)
	case op.Algorithm == Calendar:
		ms := Millis(now)
		return calendar.Busy(op.Calendar, op.Periods.At(ms), st.Calendar)
	}
	return st.TAT > now
}
