package calendar

// MaxCount is the largest count a calendar limit may have: 2^53 − 1, so
// that every count is exact in a double too, as the Redis script reads it.
const MaxCount = 1<<53 - 1

// Counter is what a source stores for one calendar limit's subscriber:
// the hits Used in the period [Start, End) of the calendar Tag
// (Calendar.Tag). Tag and Start identify the period: a counter of another
// calendar, or of another period of this one, counts nothing. The zero
// Counter is a subscriber with no hits.
type Counter struct {
	Tag   int64
	Start int64 // unix ms
	End   int64 // unix ms, when the counter stops counting
	Used  int64
}

// Limit is a calendar limit reduced to what a decision needs: Count hits
// per period of the calendar Tag. Callers guarantee 1 <= Count <= MaxCount.
type Limit struct {
	Count int64
	Tag   int64
}

// Decision is the outcome of one calendar computation for one subscriber,
// durations in milliseconds. Counter is the state after the operation;
// whether it is stored is up to the caller (a check never stores, a
// denied spend changes nothing).
type Decision struct {
	Allowed   bool
	Remaining int64
	RetryIn   int64
	ResetIn   int64
	Counter   Counter
}

// used returns the hits c counts in period p of l's calendar.
func (c Counter) used(l Limit, p Period) int64 {
	if c.Tag != l.Tag || c.Start != p.Start {
		return 0
	}
	return c.Used
}

// Spend decides whether cost hits fit at nowMs in period p (which holds
// nowMs), given the stored counter. The caller guarantees 0 <= cost <=
// l.Count. An allowed spend's Counter holds the cost added; a denied one's
// is c as seen in p, so storing it changes nothing.
func Spend(nowMs int64, l Limit, p Period, cost int64, c Counter) Decision {
	used := c.used(l, p)
	left := p.End - nowMs
	if used > l.Count-cost {
		return Decision{
			Allowed:   false,
			Remaining: max(0, l.Count-used),
			RetryIn:   left,
			ResetIn:   resetIn(used, left),
			Counter:   Counter{Tag: l.Tag, Start: p.Start, End: p.End, Used: used},
		}
	}
	used += cost
	d := Decision{
		Allowed:   true,
		Remaining: l.Count - used,
		ResetIn:   resetIn(used, left),
		Counter:   Counter{Tag: l.Tag, Start: p.Start, End: p.End, Used: used},
	}
	if d.Remaining < cost {
		d.RetryIn = left
	}
	return d
}

// Refund gives cost hits back to the counter of period p at nowMs. When
// it holds no hits, nothing is given back (Allowed false) and the Counter
// is c as seen in p. Allowed reports whether the count changed.
func Refund(nowMs int64, l Limit, p Period, cost int64, c Counter) Decision {
	used := c.used(l, p)
	after := max(used-cost, 0)
	return Decision{
		Allowed:   after != used,
		Remaining: max(0, l.Count-after),
		ResetIn:   resetIn(after, p.End-nowMs),
		Counter:   Counter{Tag: l.Tag, Start: p.Start, End: p.End, Used: after},
	}
}

// Busy reports whether c counts any hit in period p of l's calendar: a
// reset of it gives the subscriber something back.
func Busy(l Limit, p Period, c Counter) bool { return c.used(l, p) > 0 }

// resetIn is how long until the count is 0 with no other hit: the end of
// the period while it holds hits.
func resetIn(used, left int64) int64 {
	if used > 0 {
		return left
	}
	return 0
}
