package sourcetest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/calendar"
)

// Calendar limits in zones with daylight saving time, and without.
var (
	parisDay     = mustCalendar(5, calendar.Day, "Europe/Paris")
	utcDay       = mustCalendar(5, calendar.Day, "UTC")
	londonDay    = mustCalendar(5, calendar.Day, "Europe/London")
	utcWeek      = mustCalendar(5, calendar.Week, "UTC")
	newYorkMonth = mustCalendar(100, calendar.Month, "America/New_York")
	kolkataWeek  = mustCalendar(calendar.MaxCount, calendar.Week, "Asia/Kolkata")
	hundredParis = mustCalendar(100, calendar.Year, "Europe/Paris")
)

// climit is a calendar limit as a configuration gives it.
type climit struct {
	count int64
	cal   *calendar.Calendar
}

func mustCalendar(count int64, u calendar.Unit, zone string) climit {
	c, err := calendar.New(u, zone)
	if err != nil {
		panic(err)
	}
	return climit{count: count, cal: c}
}

func (l climit) op(key string, cost int64, mode bucket.Mode) bucket.Op {
	return bucket.Op{Key: key, Algorithm: bucket.Calendar, Calendar: calendar.Limit{Count: l.count, Tag: l.cal.Tag()}, Periods: l.cal, Cost: cost, Mode: mode}
}

// calendarLimit makes ops of a calendar limit (alt changes nothing).
func calendarLimit(l climit) func(string, int64, bucket.Mode, bool) bucket.Op {
	return func(key string, cost int64, mode bucket.Mode, _ bool) bucket.Op { return l.op(key, cost, mode) }
}

// stateKey is where a Model keeps op's state: a calendar op's counter
// under a key naming its period at now (its calendar's tag and the
// period's start), since a counter is identified by its period word,
// zone and start; any other op's under its key.
func stateKey(now int64, op *bucket.Op) string {
	if op.Algorithm != bucket.Calendar {
		return op.Key
	}
	return fmt.Sprintf("%s@%d@%d", op.Key, op.Calendar.Tag, op.Periods.At(floorDiv(now, int64(time.Millisecond))).Start)
}

// at is the unix ns of an RFC 3339 instant, plus ns more.
func at(t *testing.T, s string, ns int64) int64 {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UnixNano() + ns
}

// runCalendars registers the calendar tests of the suite.
func runCalendars(t *testing.T, newSource Factory) {
	t.Run("CalendarAcrossDST", func(t *testing.T) { testCalendarAcrossDST(t, newSource) })
	t.Run("CalendarRefundAndReset", func(t *testing.T) { testCalendarRefundAndReset(t, newSource) })
	t.Run("CalendarIdentity", func(t *testing.T) { testCalendarIdentity(t, newSource) })
	t.Run("CalendarMixedBatch", func(t *testing.T) { testCalendarMixedBatch(t, newSource) })
	t.Run("NoOvershootCalendar", func(t *testing.T) {
		testNoOvershootOps(t, newSource, []bucket.Op{hundredParis.op(key(t, "c"), 1, bucket.CheckAndSpend)})
	})
	t.Run("NoOvershootCalendarMixedBatch", func(t *testing.T) {
		testNoOvershootOps(t, newSource, []bucket.Op{
			hundredPerH.op(key(t, "g"), 1, bucket.CheckAndSpend),
			hundredParis.op(key(t, "c"), 1, bucket.CheckAndSpend),
			hundredPerHourFix.op(key(t, "f"), 1, bucket.CheckAndSpend),
		})
	})
	t.Run("OnceReplaysCalendar", func(t *testing.T) { testOnceReplaysCalendar(t, newSource) })
}

// testCalendarAcrossDST fills Paris's 23-hour day in its last nanosecond
// and spends again at the next midnight, a millisecond either side: the
// day ends at 22:00 UTC, when the hits stop counting.
func testCalendarAcrossDST(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	k := key(t, "a")
	first := p.spend(at(t, "2026-03-28T23:00:00Z", 0), parisDay.op(k, 2, bucket.CheckAndSpend))[0]
	wantEnd := at(t, "2026-03-29T22:00:00Z", 0) / 1e6
	if !first.Allowed || first.Remaining != 3 || first.Period.End != wantEnd || first.ResetIn != 23*int64(time.Hour) {
		t.Fatalf("the first spend of the day: %+v, want 3 left and a reset at 22:00 UTC, 23h on", first)
	}
	last := at(t, "2026-03-29T21:59:59.999Z", 999_999)
	if got := p.spend(last, parisDay.op(k, 3, bucket.CheckAndSpend))[0]; !got.Allowed || got.Remaining != 0 || got.RetryIn != int64(time.Millisecond) {
		t.Fatalf("filling the day in its last ns: %+v, want allowed, 0 left, retry in 1ms", got)
	}
	if got := p.spend(last, parisDay.op(k, 1, bucket.CheckAndSpend))[0]; got.Allowed {
		t.Fatalf("one more: %+v, want denied", got)
	}
	if got := p.spend(at(t, "2026-03-29T22:00:00Z", 0), parisDay.op(k, 5, bucket.CheckAndSpend))[0]; !got.Allowed || got.ResetIn != 24*int64(time.Hour) {
		t.Fatalf("the whole count at the next midnight: %+v, want allowed, reset in 24h", got)
	}
	p.spend(at(t, "2026-03-30T21:59:59.999Z", 0), parisDay.op(k, 1, bucket.CheckAndSpend))
	p.spend(at(t, "2026-03-30T22:00:00.001Z", 0), parisDay.op(k, 0, bucket.CheckOnly))
	// The 25-hour day of October.
	p.spend(at(t, "2026-10-24T22:00:00Z", 0), parisDay.op(k, 5, bucket.CheckAndSpend))
	if got := p.spend(at(t, "2026-10-25T22:59:59.999Z", 0), parisDay.op(k, 1, bucket.CheckOnly))[0]; got.Allowed || got.RetryIn != int64(time.Millisecond) {
		t.Fatalf("in the 25th hour: %+v, want denied for 1ms more", got)
	}
}

// testCalendarRefundAndReset: a refund gives back to the current period
// only, and never creates a counter; a reset deletes it.
func testCalendarRefundAndReset(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	k := key(t, "a")
	day := at(t, "2026-05-04T10:00:00Z", 0)
	if got := p.refund(day, utcDay.op(k, 2, bucket.CheckAndSpend))[0]; got.Allowed || got.Write {
		t.Fatalf("a refund of nothing: %+v, want not allowed, nothing written", got)
	}
	p.spend(day, utcDay.op(k, 4, bucket.CheckAndSpend))
	if got := p.refund(day, utcDay.op(k, 3, bucket.CheckAndSpend))[0]; !got.Allowed || got.Remaining != 4 {
		t.Fatalf("a refund of 3 of 4: %+v, want 4 left", got)
	}
	p.refund(day, utcDay.op(k, 5, bucket.CheckAndSpend))
	p.spend(day, utcDay.op(k, 5, bucket.CheckAndSpend))
	next := at(t, "2026-05-05T00:00:00Z", 0)
	if got := p.refund(next, utcDay.op(k, 1, bucket.CheckAndSpend))[0]; got.Allowed {
		t.Fatalf("a refund the next day: %+v, want nothing given back to yesterday", got)
	}
	p.spend(next, utcDay.op(k, 1, bucket.CheckAndSpend))
	if n := p.reset(next, utcDay.op(k, 0, bucket.CheckAndSpend)); n != 1 {
		t.Fatalf("reset counted %d, want 1", n)
	}
	if n := p.reset(next, utcDay.op(k, 0, bucket.CheckAndSpend)); n != 0 {
		t.Fatalf("a second reset counted %d, want 0", n)
	}
	p.spend(next, utcDay.op(k, 0, bucket.CheckOnly))
}

// testCalendarIdentity: a counter belongs to its period word, zone and
// start. A day in UTC and one in London begin and end together in winter,
// and a UTC week begins with its Monday: none of them reads another's,
// and each is still there when a reload goes back to it within its
// period.
func testCalendarIdentity(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	k := key(t, "a")
	monday := at(t, "2026-01-05T09:00:00Z", 0)
	p.spend(monday, utcDay.op(k, 5, bucket.CheckAndSpend))
	for _, l := range []climit{londonDay, utcWeek} {
		if got := p.spend(monday, l.op(k, 1, bucket.CheckOnly))[0]; !got.Allowed || got.Remaining != 4 {
			t.Fatalf("%s in %s after a full UTC day: %+v, want 4 left (nothing counted)", l.cal.Unit(), l.cal.Zone(), got)
		}
	}
	p.spend(monday, londonDay.op(k, 2, bucket.CheckAndSpend))
	if got := p.spend(monday, londonDay.op(k, 0, bucket.CheckOnly))[0]; got.Remaining != 3 {
		t.Fatalf("the London day after its spend: %+v, want 3 left", got)
	}
	if got := p.spend(monday, utcDay.op(k, 0, bucket.CheckOnly))[0]; got.Remaining != 0 {
		t.Fatalf("the UTC day again, after the London one: %+v, want its 5 hits still counted", got)
	}
	// A key that was a calendar counter reads as an empty window.
	p.spend(monday, tenPerMinuteFixed.op(k, 3, bucket.CheckAndSpend))
	p.spend(monday, tenPerMinuteFixed.op(k, 0, bucket.CheckOnly))
}

// testCalendarMixedBatch: a batch of a GCRA bucket, a window and a
// calendar limit is one decision: the calendar's denial writes nothing.
func testCalendarMixedBatch(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	g, f, c := key(t, "g"), key(t, "f"), key(t, "c")
	now := at(t, "2026-06-15T12:00:00.5Z", 0)
	batch := func(mode bucket.Mode, gc, fc, cc int64) []bucket.Op {
		return []bucket.Op{hundredPerH.op(g, gc, mode), tenPerMinuteFixed.op(f, fc, mode), utcDay.op(c, cc, mode)}
	}
	for i, o := range p.spend(now, batch(bucket.CheckAndSpend, 1, 1, 4)...) {
		if !o.Allowed || !o.Write {
			t.Fatalf("op %d of a fresh batch: %+v, want allowed and written", i, o)
		}
	}
	for i, o := range p.spend(now, batch(bucket.CheckAndSpend, 1, 1, 2)...) {
		if o.Write || o.Allowed != (i != 2) {
			t.Fatalf("op %d of a batch the calendar denies: %+v", i, o)
		}
	}
	p.spend(now, batch(bucket.SpendOnly, 1, 1, 2)...)
	p.spend(now, batch(bucket.CheckOnly, 0, 0, 0)...)
	p.refund(now, batch(bucket.CheckAndSpend, 1, 9, 5)...)
	p.spend(now, batch(bucket.CheckOnly, 0, 0, 0)...)
}

// testOnceReplaysCalendar: a calendar spend recorded in the last ns of a
// month, repeated in the next month, is answered with the first outcome
// (the first month's period) and spends nothing more.
func testOnceReplaysCalendar(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	k := key(t, "a")
	ops := []bucket.Op{newYorkMonth.op(k, 60, bucket.CheckAndSpend), threePerSec.op(key(t, "g"), 1, bucket.CheckAndSpend)}
	last := at(t, "2026-12-01T04:59:59.999Z", 999_999)
	rec := record(t, "r", "fp-1", last)
	first, replayed := spendOnce(t, p.src, last, rec, ops...)
	p.compare("first SpendOnce", last, ops, first, p.model.Apply(last, ops, false))
	if replayed || first[0].Period.End != at(t, "2026-12-01T05:00:00Z", 0)/1e6 {
		t.Fatalf("first call: %+v replayed=%v, want November's period", first, replayed)
	}
	later := at(t, "2026-12-01T05:00:00Z", 1)
	again, replayed := spendOnce(t, p.src, later, rec, ops...)
	if !replayed || !reflect.DeepEqual(again, first) {
		t.Fatalf("repeat in the next month: %+v replayed=%v, want the first outcomes %+v", again, replayed, first)
	}
	if got := p.spend(later, newYorkMonth.op(k, 0, bucket.CheckOnly))[0]; got.Remaining != 100 {
		t.Fatalf("December after the repeat: %+v, want 100 left", got)
	}
	out := make([]bucket.Outcome, 1)
	if _, err := p.src.RefundOnce(context.Background(), later, record(t, "r2", "fp-2", later), []bucket.Op{newYorkMonth.op(k, 1, bucket.CheckAndSpend)}, out); err != nil || out[0].Allowed {
		t.Fatalf("a refund in December of November's hits: %+v, %v; want nothing given back", out[0], err)
	}
}
