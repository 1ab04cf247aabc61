// Package calendar holds the calendar-quota algorithm: a count of hits per
// calendar day, ISO week, month or year of an IANA time zone, reset when
// the zone's calendar turns to the next period.
//
// Finding the period is the only part that needs the zone database: Find
// gives the period holding an instant, in whole unix milliseconds, and a
// Calendar keeps the current one so that a decision inside it costs no
// zone lookup. The decision itself (Spend, Refund) is integer arithmetic
// on the count and the period's bounds. Nothing here reads a clock or does
// I/O. docs/semantics.md states the rules in prose.
package calendar

import "time"

// Unit is the length of a calendar period, as a word of the calendar.
type Unit uint8

// The four units. Week is the ISO week, which starts on Monday.
const (
	Day Unit = iota + 1
	Week
	Month
	Year
)

// Units lists the words ParseUnit accepts, for messages.
const Units = "day, week, month or year"

// ParseUnit reads a unit as spelt in config files.
func ParseUnit(s string) (Unit, bool) {
	switch s {
	case "day":
		return Day, true
	case "week":
		return Week, true
	case "month":
		return Month, true
	case "year":
		return Year, true
	}
	return 0, false
}

// String returns the unit's word.
func (u Unit) String() string {
	switch u {
	case Day:
		return "day"
	case Week:
		return "week"
	case Month:
		return "month"
	case Year:
		return "year"
	}
	return "unknown"
}

// Period is one calendar period: [Start, End) in unix milliseconds.
type Period struct {
	Start, End int64
}

// Contains reports whether nowMs is inside p.
func (p Period) Contains(nowMs int64) bool { return p.Start <= nowMs && nowMs < p.End }

// Find returns the period of unit u in loc that holds nowMs.
//
// A period's start is the first instant whose local date is the period's
// first day: local midnight, or where the zone skips midnight the first
// instant after the gap, or where midnight happens twice the earlier one.
// Its end is the start of the next period. An instant whose local date
// went back across midnight (clocks set back over it) belongs to the
// period that began at the first midnight: periods never overlap.
func Find(u Unit, loc *time.Location, nowMs int64) Period {
	y, m, d := time.UnixMilli(nowMs).In(loc).Date()
	first := firstDay(u, date(y, m, d))
	for {
		next := nextFirstDay(u, first)
		p := Period{Start: firstInstant(loc, first), End: firstInstant(loc, next)}
		if nowMs < p.End {
			return p
		}
		first = next
	}
}

// date normalises a calendar date (months and days out of range roll
// over), as midnight UTC, which calendar arithmetic uses for dates.
func date(y int, m time.Month, d int) time.Time {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// firstDay is the first day of the period of unit u that holds day.
func firstDay(u Unit, day time.Time) time.Time {
	y, m, d := day.Date()
	switch u {
	case Week:
		// Monday is 1 in time.Weekday, Sunday 0: days since Monday.
		return date(y, m, d-(int(day.Weekday())+6)%7)
	case Month:
		return date(y, m, 1)
	case Year:
		return date(y, time.January, 1)
	}
	return day
}

// nextFirstDay is the first day of the period after the one starting on first.
func nextFirstDay(u Unit, first time.Time) time.Time {
	y, m, d := first.Date()
	switch u {
	case Week:
		return date(y, m, d+7)
	case Month:
		return date(y, m+1, 1)
	case Year:
		return date(y+1, time.January, 1)
	}
	return date(y, m, d+1)
}

// searchSpan is how far from midnight UTC of a date the instants where
// that date begins somewhere can lie: every zone's offset is within it,
// with room for a skipped day (as Pacific/Apia skipped 30 December 2011).
const searchSpan = 50 * time.Hour

// firstInstant returns, in unix ms, the first instant whose local date in
// loc is day or later. Within each span of constant offset the local date
// only grows, so the first such instant of the span is the later of its
// start and the instant its offset puts at local midnight of day; the
// answer is the earliest of those over the spans around day, that is the
// first span that reaches day. Where day begins with a gap, that is the
// first instant after it; where its midnight happens twice, the earlier
// one; where the zone skips day altogether, the first instant of the day
// after.
func firstInstant(loc *time.Location, day time.Time) int64 {
	wall := day.Unix() // local midnight of day, read as if it were UTC
	from, to := day.Add(-searchSpan).Unix(), day.Add(searchSpan).Unix()
	for t := from; t < to; {
		offset := offsetAt(loc, t)
		first := max(wall-int64(offset), t)
		end, ok := nextChange(loc, t, to)
		if !ok || first < end {
			return first * 1000
		}
		t = end
	}
	// No zone is more than searchSpan from UTC; unreachable with real
	// zone data, and local midnight read as UTC is the nearest answer.
	return wall * 1000
}

// offsetAt is loc's offset from UTC at unix second t, in seconds.
func offsetAt(loc *time.Location, t int64) int {
	_, offset := time.Unix(t, 0).In(loc).Zone()
	return offset
}

// nextChange returns the first unix second after t at which loc's offset
// may change, and false when it never changes before to. It asks
// time.Time.ZoneBounds; past the end of a zone's table, where Go computes
// the changes from the zone's rule year by year, ZoneBounds can report an
// end that is not after t (late in December), and the change is then
// found by stepping an hour at a time and halving the last hour.
func nextChange(loc *time.Location, t, to int64) (int64, bool) {
	_, end := time.Unix(t, 0).In(loc).ZoneBounds()
	switch {
	case end.IsZero():
		return 0, false
	case end.Unix() > t:
		return end.Unix(), true
	}
	offset := offsetAt(loc, t)
	for lo := t; lo < to; lo += 3600 {
		hi := lo + 3600
		if offsetAt(loc, hi) == offset {
			continue
		}
		// The offset changes in (lo, hi].
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if offsetAt(loc, mid) == offset {
				lo = mid
			} else {
				hi = mid
			}
		}
		return hi, true
	}
	return 0, false
}
