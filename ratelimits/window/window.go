// Package window holds the sliding-window and fixed-window algorithms as
// pure functions on integer milliseconds.
//
// A window limit allows Count hits per window of Period milliseconds.
// Windows are aligned to the unix epoch: the window holding now starts at
// now - now mod Period. A fixed window's rate is the hits of the current
// window; a sliding window's rate also counts the previous window's hits,
// weighted by how much of that window still overlaps the last Period:
//
//	rate·Period = cur·Period + prev·(Period − elapsed)
//
// Everything is exact integer arithmetic (no float weights), so every
// source, the Redis script included, gives the same answer to the
// millisecond. Like the gcra package, nothing here does I/O, reads a clock
// or allocates. docs/semantics.md states the rules in prose.
package window

import "math"

// MaxProduct is the largest Count × Period (in milliseconds) a window limit
// may have: 2^53 − 1, so that every product the arithmetic forms stays
// exact in a double too, as the Redis script computes it.
const MaxProduct = 1<<53 - 1

// Counter is what a source stores for one window limit's subscriber: the
// hits of the window starting at Start and of the window before it. Period
// is part of a window's identity: hits counted under another period are
// never read (after a reload that changed it). The zero Counter is a
// subscriber with no hits.
type Counter struct {
	Period int64 // the window's length in ms; 0 when nothing is stored
	Start  int64 // unix ms when the window Cur counts began
	Cur    int64 // hits of [Start, Start+Period)
	Prev   int64 // hits of [Start−Period, Start)
}

// At returns the counts that matter at nowMs for a limit of period ms: the
// start of the current window, its hits and the previous window's hits.
// Windows older than the previous one never count.
//
// A counter of the next window was written by a process whose clock is
// ahead of this one's (hosts' clocks differ by milliseconds): its Prev is
// this window's hits, and the window before this one is no longer known,
// so it reads as 0. A counter further ahead counts nothing at nowMs (and
// a spend replaces it, see after).
func (c Counter) At(nowMs, period int64) (start, cur, prev int64) {
	start = nowMs - mod(nowMs, period)
	if c.Period != period {
		return start, 0, 0
	}
	switch c.Start {
	case start:
		return start, c.Cur, c.Prev
	case start - period:
		return start, 0, c.Cur
	case start + period:
		return start, c.Prev, 0
	}
	return start, 0, 0
}

// after returns the counter to store for the window starting at start
// once it holds cur hits and the window before it held. A counter of the
// next window (written by a process whose clock is ahead) stays where it
// is, changed only in its count of this window, so that the next window's
// hits are not lost. Any other counter is replaced by one of this window,
// also one further ahead: its clock is off by more than a period, or was
// set back, and this window's own hits, which it does not know, must
// still count. The window before is kept also for a fixed window, which
// does not count it, so that a process whose clock is behind reads its
// own window's hits from a counter of the next.
func (c Counter) after(start, period, cur, held int64) Counter {
	if c.Period == period && c.Start == start+period {
		c.Prev = cur
		return c
	}
	return Counter{Period: period, Start: start, Cur: cur, Prev: held}
}

// Expires returns the unix ms from which c counts nothing in any
// decision, so a source may forget it: two periods after its start while
// the current window holds hits, one period after it while only the
// previous one does, and at once when neither does.
func (c Counter) Expires() int64 {
	switch {
	case c.Cur > 0:
		return c.Start + 2*c.Period
	case c.Prev > 0:
		return c.Start + c.Period
	}
	return c.Start
}

// Limit is a window limit reduced to what a decision needs. Period is in
// milliseconds. A Limit is valid when Count >= 1, Period >= 1 and
// Count × Period <= MaxProduct; callers guarantee it.
type Limit struct {
	Count  int64
	Period int64
	Fixed  bool // a fixed window; otherwise sliding
}

// Decision is the outcome of one window computation for one subscriber,
// durations in milliseconds. Counter is the state after the operation;
// whether it is stored is up to the caller (a check never stores, a denied
// spend changes nothing).
type Decision struct {
	Allowed   bool
	Remaining int64
	RetryIn   int64
	ResetIn   int64
	Counter   Counter
}

// Spend decides whether cost hits fit at nowMs, given the stored counter.
// The caller guarantees 0 <= cost <= l.Count. An allowed spend's Counter
// holds the cost added to the current window; a denied one's is c as seen
// at nowMs, so storing it changes nothing.
func Spend(nowMs int64, l Limit, cost int64, c Counter) Decision {
	start, cur, prev := c.At(nowMs, l.Period)
	held := prev
	if l.Fixed {
		prev = 0
	}
	capacity := l.Count * l.Period
	rate := l.rate(nowMs-start, cur, prev)
	need := cost * l.Period
	if rate > capacity-need {
		kept := c.after(start, l.Period, cur, held)
		return Decision{
			Allowed:   false,
			Remaining: max(0, (capacity-rate)/l.Period),
			RetryIn:   l.earliest(nowMs, kept, cost, 1),
			ResetIn:   l.resetIn(nowMs, kept),
			Counter:   kept,
		}
	}
	cur += cost
	rate += need
	remaining := (capacity - rate) / l.Period
	next := c.after(start, l.Period, cur, held)
	var retryIn int64
	if remaining < cost {
		retryIn = l.earliest(nowMs, next, cost, 0)
	}
	return Decision{
		Allowed:   true,
		Remaining: remaining,
		RetryIn:   retryIn,
		ResetIn:   l.resetIn(nowMs, next),
		Counter:   next,
	}
}

// Refund gives cost hits back to the current window at nowMs. Only the
// current window is ever changed: when it holds no hits, nothing is given
// back (Allowed false) and the Counter is c as seen at nowMs. Allowed
// reports whether the current window's count changed.
func Refund(nowMs int64, l Limit, cost int64, c Counter) Decision {
	start, cur, prev := c.At(nowMs, l.Period)
	held := prev
	if l.Fixed {
		prev = 0
	}
	before := cur
	cur = max(cur-cost, 0)
	rate := l.rate(nowMs-start, cur, prev)
	next := c.after(start, l.Period, cur, held)
	return Decision{
		Allowed:   cur != before,
		Remaining: max(0, (l.Count*l.Period-rate)/l.Period),
		ResetIn:   l.resetIn(nowMs, next),
		Counter:   next,
	}
}

// Busy reports whether c still counts anything at nowMs for l: a reset of
// it gives the subscriber something back.
func Busy(nowMs int64, l Limit, c Counter) bool {
	start, cur, prev := c.At(nowMs, l.Period)
	return cur > 0 || (!l.Fixed && prev > 0 && nowMs-start < l.Period)
}

// rate is the window rate times Period at elapsed ms into the current
// window. Counts may exceed Count (a lowered override, or processes that
// count locally and overshoot between syncs); the products saturate rather
// than wrap, which keeps every comparison with Count × Period right.
func (l Limit) rate(elapsed, cur, prev int64) int64 {
	return addSat(mulSat(cur, l.Period), mulSat(prev, l.Period-elapsed))
}

// resetIn is how long from nowMs until c, a counter of l's period, counts
// nothing with no other hit: until the end of the last window whose hits
// count (for a sliding window, the window after the last one with hits).
func (l Limit) resetIn(nowMs int64, c Counter) int64 {
	if c.Period != l.Period || mod(c.Start, l.Period) != 0 || (c.Cur == 0 && c.Prev == 0) {
		return 0 // At reads nothing from it at any time
	}
	end := c.Expires()
	if l.Fixed {
		end -= l.Period
	}
	return max(0, end-nowMs)
}

// earliest returns the least d >= minD (ms) such that a spend of cost
// would be allowed at nowMs + d, with c stored and no other hit. The rate
// never grows with time within a window, so the answer is the first
// allowed instant of the window holding nowMs + minD, else of the next
// one, and so on: a window whose counts c does not know (0 and 0) allows
// at its start, since cost <= Count, so at most the windows c spans (one
// ahead of its own, when it was written by a process whose clock is
// ahead) and two more are looked at.
func (l Limit) earliest(nowMs int64, c Counter, cost, minD int64) int64 {
	if cost > l.Count {
		// Never allowed; callers do not ask (a penalty box's wait comes
		// first). The loop below would not end.
		return max(minD, l.resetIn(nowMs, c))
	}
	from := nowMs + minD
	s := from - mod(from, l.Period)
	for ; ; s += l.Period {
		_, cur, prev := c.At(s, l.Period)
		if l.Fixed {
			prev = 0
		}
		if cur > l.Count-cost {
			continue
		}
		// cur·P + prev·(P − e) <= (Count − cost)·P holds for every e >=
		// P − floor(free / prev), free = (Count − cur − cost)·P.
		e := max(from-s, 0)
		if prev > 0 {
			e = max(e, l.Period-(l.Count-cur-cost)*l.Period/prev)
		}
		if e < l.Period {
			return s + e - nowMs
		}
	}
}

// mod is n mod m for m > 0, never negative, so windows before 1970 are
// aligned the same way.
func mod(n, m int64) int64 {
	r := n % m
	if r < 0 {
		r += m
	}
	return r
}

// mulSat returns a·b for a, b >= 0, saturating at the largest int64.
func mulSat(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// addSat returns a+b for a, b >= 0, saturating at the largest int64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
