// Package bucket decides batches of operations that mix algorithms, for
// the sources that store them.
//
// A bucket is whatever a source stores under one key: a GCRA bucket's
// TAT, or a window limit's counter. An Op names the key, its algorithm and
// that algorithm's numbers; SpendBatch and RefundBatch apply the batch
// rules (modes, the all-or-nothing write) and leave each op's arithmetic to
// its algorithm's package (gcra, window). A source reads the states of a
// batch's keys, calls one of them, and stores the new states the outcomes
// ask it to, all in one atomic step. Nothing here does I/O or allocates.
package bucket

import (
	"github.com/limiter-dev/limiter/ratelimits/gcra"
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
	}
	return 0, false
}

// Windowed reports whether a counts hits in windows.
func (a Algorithm) Windowed() bool { return a == SlidingWindow || a == FixedWindow }

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
// algorithm and its numbers, the cost and the mode. A source needs nothing
// else to decide and store a batch.
type Op struct {
	Key       string
	Algorithm Algorithm
	// EmissionInterval and BurstOffset are a GCRA limit's, in ns.
	EmissionInterval int64
	BurstOffset      int64
	// Window is a window limit's (Algorithm SlidingWindow or FixedWindow).
	Window window.Limit
	Cost   int64
	Mode   Mode
}

// State is what a source stores under one key: TAT for a GCRA op
// (gcra.Missing, or any time not after now, when the bucket is full),
// Counter for a window op (the zero Counter when nothing is stored). The
// zero State is an empty bucket of either kind.
type State struct {
	TAT    int64
	Window window.Counter
}

// Empty is the state of a key nothing is stored under.
var Empty = State{TAT: gcra.Missing}

// Decision is one op's answer, durations in nanoseconds.
type Decision struct {
	Allowed   bool
	Remaining int64
	RetryIn   int64
	ResetIn   int64
}

// Outcome is one op's decision in a batch, the state it leaves, and
// whether that state must be stored. A stored GCRA state whose TAT is not
// after now, or a window counter whose Expires is not after now, describes
// an empty bucket, so a source may delete it instead.
type Outcome struct {
	Decision
	New   State
	Write bool
}

// msPerNs converts the window package's milliseconds to nanoseconds.
const nsPerMs = 1_000_000

// nowMs is now (unix ns) in whole milliseconds, rounded down, the window
// arithmetic's resolution.
func nowMs(now int64) int64 {
	ms := now / nsPerMs
	if now%nsPerMs < 0 {
		ms--
	}
	return ms
}

// spend decides one op at now from its stored state.
func spend(now int64, op *Op, st State) Outcome {
	if op.Algorithm.Windowed() {
		d := window.Spend(nowMs(now), op.Window, op.Cost, st.Window)
		return windowOutcome(d)
	}
	d := gcra.Spend(now, st.TAT, op.EmissionInterval, op.BurstOffset, op.Cost)
	return Outcome{
		Decision: Decision{Allowed: d.Allowed, Remaining: d.Remaining, RetryIn: d.RetryIn, ResetIn: d.ResetIn},
		New:      State{TAT: d.NewTAT},
	}
}

// refund gives one op's cost back at now.
func refund(now int64, op *Op, cost int64, st State) Outcome {
	if op.Algorithm.Windowed() {
		o := windowOutcome(window.Refund(nowMs(now), op.Window, cost, st.Window))
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

// moves reports whether an allowed spend's new state differs from what
// was stored: a cost-0 spend changes nothing and needs no write.
func moves(now int64, op *Op, st State, o *Outcome) bool {
	if op.Algorithm.Windowed() {
		return op.Cost > 0
	}
	return o.New.TAT > max(now, st.TAT)
}

// SpendBatch decides a batch of spends at now, given each op's stored
// state, and fills outcomes (len(ops), same order).
//
// The batch is allowed when every counting op is allowed; a denied batch
// writes nothing at all. In an allowed batch, CheckAndSpend and SpendOnly ops
// that are themselves allowed and actually change their state are written.
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
		return false
	}
	for i := range ops {
		o := &outcomes[i]
		o.Write = ops[i].Mode != CheckOnly && o.Allowed && moves(now, &ops[i], states[i], o)
	}
	return true
}

// RefundBatch gives back each op's cost at now, given each op's stored
// state, and fills outcomes (len(ops), same order). CheckOnly ops refund
// nothing. An op is written only when something was actually given back.
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
// GCRA bucket that is not full, a window counter that still counts.
func Busy(now int64, op *Op, st State) bool {
	if op.Algorithm.Windowed() {
		return window.Busy(nowMs(now), op.Window, st.Window)
	}
	return st.TAT > now
}
