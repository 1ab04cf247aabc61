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
	}
	return start, 0, 0
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
	if l.Fixed {
		prev = 0
	}
	capacity := l.Count * l.Period
	rate := l.rate(nowMs-start, cur, prev)
	need := cost * l.Period
	if rate > capacity-need {
		return Decision{
			Allowed:   false,
			Remaining: max(0, (capacity-rate)/l.Period),
			RetryIn:   l.earliest(nowMs, start, cur, prev, cost, 1),
			ResetIn:   l.resetIn(nowMs, start, cur, prev),
			Counter:   Counter{Period: l.Period, Start: start, Cur: cur, Prev: prev},
		}
	}
	cur += cost
	rate += need
	remaining := (capacity - rate) / l.Period
	var retryIn int64
	if remaining < cost {
		retryIn = l.earliest(nowMs, start, cur, prev, cost, 0)
	}
	return Decision{
		Allowed:   true,
		Remaining: remaining,
		RetryIn:   retryIn,
		ResetIn:   l.resetIn(nowMs, start, cur, prev),
		Counter:   Counter{Period: l.Period, Start: start, Cur: cur, Prev: prev},
	}
}

// Refund gives cost hits back to the current window at nowMs. Only the
// current window is ever changed: when it holds no hits, nothing is given
// back (Allowed false) and the Counter is c as seen at nowMs. Allowed
// reports whether the current window's count changed.
func Refund(nowMs int64, l Limit, cost int64, c Counter) Decision {
	start, cur, prev := c.At(nowMs, l.Period)
	if l.Fixed {
		prev = 0
	}
	before := cur
	cur = max(cur-cost, 0)
	rate := l.rate(nowMs-start, cur, prev)
	return Decision{
		Allowed:   cur != before,
		Remaining: max(0, (l.Count*l.Period-rate)/l.Period),
		ResetIn:   l.resetIn(nowMs, start, cur, prev),
		Counter:   Counter{Period: l.Period, Start: start, Cur: cur, Prev: prev},
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

// resetIn is how long until the rate is 0 with no other hit.
func (l Limit) resetIn(nowMs, start, cur, prev int64) int64 {
	switch {
	case cur > 0 && !l.Fixed:
		return start + 2*l.Period - nowMs
	case cur > 0:
		return start + l.Period - nowMs
	case prev > 0 && !l.Fixed:
		return start + l.Period - nowMs
	}
	return 0
}

// earliest returns the least d >= minD (ms) such that a spend of cost would
// be allowed at nowMs + d, with no hit but those counted. The rate never
// grows with time alone, so once allowed it stays allowed; the answer is
// the first allowed instant of the current window, else of the next one,
// else the start of the one after, when the rate is 0 and cost <= Count
// fits.
func (l Limit) earliest(nowMs, start, cur, prev, cost, minD int64) int64 {
	at := func(t int64) int64 { return max(minD, t-nowMs) }
	// The current window: cur·P + prev·(P − e) <= (Count − cost)·P needs
	// cur + cost <= Count and prev·(P − e) <= free·P with free = Count −
	// cur − cost, that is e >= P − floor(free·P / prev).
	if cur <= l.Count-cost {
		free := (l.Count - cur - cost) * l.Period
		if prev == 0 {
			return at(nowMs)
		}
		if e := l.Period - free/prev; e < l.Period {
			return at(start + e)
		}
	}
	// The next window: cur becomes its previous one.
	next := start + l.Period
	if l.Fixed || cur == 0 {
		return at(next)
	}
	free := (l.Count - cost) * l.Period
	if e := l.Period - free/cur; e < l.Period {
		// e < 0: the old hits fit at the next window's very start.
		return at(next + max(e, 0))
	}
	return at(next + l.Period)
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
