package sourcetest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// Window limits, with periods in milliseconds and whole seconds, as a
// configuration gives them.
var (
	tenPerMinute      = wlimit{count: 10, period: 60_000}
	tenPerMinuteFixed = wlimit{count: 10, period: 60_000, fixed: true}
	tenPerHalfMinute  = wlimit{count: 10, period: 30_000}
	fivePerSecond     = wlimit{count: 5, period: 1_000}
	threePerSecFixed  = wlimit{count: 3, period: 1_000, fixed: true}
	hundredPerHourWin = wlimit{count: 100, period: 3_600_000}
	hundredPerHourFix = wlimit{count: 100, period: 3_600_000, fixed: true}
	// leapYear is the longest period a limit may have (8784h), with the
	// largest count it allows: count × period is just under 2^53, so every
	// product the arithmetic forms must be exact.
	leapYear = wlimit{count: window.MaxProduct / 31_622_400_000, period: 31_622_400_000}
)

type wlimit struct {
	count, period int64
	fixed         bool
}

func (l wlimit) op(key string, cost int64, mode bucket.Mode) bucket.Op {
	alg := bucket.SlidingWindow
	if l.fixed {
		alg = bucket.FixedWindow
	}
	return bucket.Op{Key: key, Algorithm: alg, Window: window.Limit{Count: l.count, Period: l.period, Fixed: l.fixed}, Cost: cost, Mode: mode}
}

// ms is the unix time in ns of a unix time in ms plus ns more.
func ms(t int64, ns int64) int64 { return t*1_000_000 + ns }

// windowAfter returns the start (unix ms) of the first window of period
// ms that starts after base: a boundary for the tests to work around.
func windowAfter(period int64) int64 {
	b := base / 1_000_000
	return b - b%period + period
}

// Reset deletes the ops' keys as a source must, and returns how many of
// them still counted something at now (bucket.Busy).
func (m Model) Reset(now int64, ops []bucket.Op) int {
	n := 0
	for i := range ops {
		key := stateKey(now, &ops[i])
		st, ok := m[key]
		if !ok {
			st = bucket.Empty
		}
		if ops[i].Box != "" {
			st.BoxExpires = m[boxPrefix+ops[i].Box].BoxExpires
			delete(m, boxPrefix+ops[i].Box)
		}
		if bucket.Busy(now, &ops[i], st) {
			n++
		}
		delete(m, key)
	}
	return n
}

// pair drives a source and the model alike, and fails a test on the first
// outcome in which they differ.
type pair struct {
	t     *testing.T
	src   ratelimits.Source
	model Model
}

func newPair(t *testing.T, newSource Factory) *pair {
	return &pair{t: t, src: open(t, newSource), model: Model{}}
}

func (p *pair) spend(now int64, ops ...bucket.Op) []bucket.Outcome {
	p.t.Helper()
	return p.compare("spend", now, ops, spend(p.t, p.src, now, ops...), p.model.Apply(now, ops, false))
}

func (p *pair) refund(now int64, ops ...bucket.Op) []bucket.Outcome {
	p.t.Helper()
	return p.compare("refund", now, ops, refund(p.t, p.src, now, ops...), p.model.Apply(now, ops, true))
}

func (p *pair) reset(now int64, ops ...bucket.Op) int {
	p.t.Helper()
	got, err := p.src.Reset(context.Background(), now, ops)
	if err != nil {
		p.t.Fatalf("Reset: %v", err)
	}
	if want := p.model.Reset(now, ops); got != want {
		p.t.Fatalf("Reset at %d of %+v: %d counting, the model says %d", now, ops, got, want)
	}
	return got
}

func (p *pair) compare(what string, now int64, ops []bucket.Op, got, want []bucket.Outcome) []bucket.Outcome {
	p.t.Helper()
	for i := range ops {
		if got[i] != want[i] {
			p.t.Fatalf("%s at %d, op %d %+v:\n got %+v\nwant %+v", what, now, i, ops[i], got[i], want[i])
		}
	}
	return got
}

// left reads what a window key has left with a cost-0 check, compared with
// the model.
func (p *pair) left(now int64, l wlimit, key string) int64 {
	p.t.Helper()
	return p.spend(now, l.op(key, 0, bucket.CheckOnly))[0].Remaining
}

// runWindows registers the window tests of the suite.
func runWindows(t *testing.T, newSource Factory) {
	for _, l := range []wlimit{tenPerMinute, tenPerMinuteFixed} {
		name := map[bool]string{false: "Sliding", true: "Fixed"}[l.fixed]
		t.Run("WindowSpendAtBoundaries"+name, func(t *testing.T) { testWindowSpendAtBoundaries(t, newSource, l) })
		t.Run("WindowRefundAtBoundaries"+name, func(t *testing.T) { testWindowRefundAtBoundaries(t, newSource, l) })
		t.Run("WindowResetAtBoundaries"+name, func(t *testing.T) { testWindowResetAtBoundaries(t, newSource, l) })
	}
	t.Run("SlidingWeights", func(t *testing.T) { testSlidingWeights(t, newSource) })
	t.Run("FixedWindows", func(t *testing.T) { testFixedWindows(t, newSource) })
	t.Run("MixedBatch", func(t *testing.T) { testMixedBatch(t, newSource) })
	t.Run("WindowPeriodChange", func(t *testing.T) { testWindowPeriodChange(t, newSource) })
	t.Run("NoOvershootWindow", func(t *testing.T) {
		testNoOvershootOps(t, newSource, []bucket.Op{hundredPerHourWin.op(key(t, "s"), 1, bucket.CheckAndSpend)})
	})
	t.Run("NoOvershootMixedBatch", func(t *testing.T) {
		testNoOvershootOps(t, newSource, []bucket.Op{
			hundredPerH.op(key(t, "g"), 1, bucket.CheckAndSpend),
			hundredPerHourWin.op(key(t, "s"), 1, bucket.CheckAndSpend),
			hundredPerHourFix.op(key(t, "f"), 1, bucket.CheckAndSpend),
		})
	})
	t.Run("OnceReplaysWindows", func(t *testing.T) { testOnceReplaysWindows(t, newSource) })
	t.Run("OnceReplaysAWindowDenial", func(t *testing.T) { testOnceReplaysWindowDenial(t, newSource) })
	t.Run("OnceRefundWindow", func(t *testing.T) { testOnceRefundWindow(t, newSource) })
}

// testWindowSpendAtBoundaries fills a window in its last nanosecond and
// spends again around the next boundaries, a millisecond before and after
// each. A sliding window still weighs the full window just after the
// boundary and frees one hit per tenth of the period; a fixed one starts
// afresh at the boundary.
func testWindowSpendAtBoundaries(t *testing.T, newSource Factory, l wlimit) {
	p := newPair(t, newSource)
	k := key(t, "a")
	w := windowAfter(l.period)
	if got := p.spend(ms(w+10_000, 0), l.op(k, 4, bucket.CheckAndSpend))[0]; !got.Allowed || got.Remaining != 6 {
		t.Fatalf("4 of 10: %+v, want allowed with 6 left", got)
	}
	last := ms(w+l.period-1, 999_999) // the window's last nanosecond
	if got := p.spend(last, l.op(k, 6, bucket.CheckAndSpend))[0]; !got.Allowed || got.Remaining != 0 {
		t.Fatalf("6 more in the last ns: %+v, want allowed with 0 left", got)
	}
	if got := p.spend(last, l.op(k, 1, bucket.CheckAndSpend))[0]; got.Allowed {
		t.Fatalf("an 11th hit: %+v, want denied", got)
	}
	next := w + l.period
	got := p.spend(ms(next, 0), l.op(k, 1, bucket.CheckOnly))[0]
	if got.Allowed == !l.fixed {
		t.Fatalf("a hit at the boundary: %+v; a sliding window must deny it, a fixed one allow it", got)
	}
	if !l.fixed {
		// 10·(P − e) + P <= 10·P from e = P/10 = 6 s on.
		if got := p.spend(ms(next+5_999, 999_999), l.op(k, 1, bucket.CheckOnly))[0]; got.Allowed || got.RetryIn != int64(time.Millisecond) {
			t.Fatalf("a ns before 6 s into the next window: %+v, want denied, retry in 1 ms", got)
		}
		if got := p.spend(ms(next+6_000, 0), l.op(k, 1, bucket.CheckOnly))[0]; !got.Allowed {
			t.Fatalf("6 s into the next window: %+v, want allowed", got)
		}
	}
	// In the last ms of the next window, the full window still weighs 1 ms
	// of 60,000 for a sliding window: 10 hits do not fit, 9 do.
	p.spend(ms(next+l.period-1, 0), l.op(k, 10, bucket.CheckOnly))
	p.spend(ms(next+l.period-1, 0), l.op(k, 9, bucket.CheckOnly))
	// Two periods after the full one began, it counts no more.
	if got := p.spend(ms(next+l.period, 0), l.op(k, 10, bucket.CheckAndSpend))[0]; !got.Allowed || got.Remaining != 0 {
		t.Fatalf("10 hits two windows on: %+v, want allowed", got)
	}
	p.spend(ms(next+l.period+1, 0), l.op(k, 1, bucket.CheckAndSpend))
}

// testWindowRefundAtBoundaries: a refund gives hits back to the current
// window only, never to the previous one, and never creates a counter.
func testWindowRefundAtBoundaries(t *testing.T, newSource Factory, l wlimit) {
	p := newPair(t, newSource)
	a, missing := key(t, "a"), key(t, "missing")
	w := windowAfter(l.period)
	if got := p.refund(ms(w+1_000, 0), l.op(missing, 3, bucket.CheckAndSpend))[0]; got.Allowed || got.Write || got.Remaining != 10 {
		t.Fatalf("refund of a missing counter: %+v, want nothing given back, 10 left", got)
	}
	p.left(ms(w+1_000, 0), l, missing)
	p.spend(ms(w+30_000, 0), l.op(a, 5, bucket.CheckAndSpend))
	if got := p.refund(ms(w+l.period-1, 999_999), l.op(a, 2, bucket.CheckOnly))[0]; got.Allowed || got.Write {
		t.Fatalf("a check-only refund: %+v, want nothing given back", got)
	}
	if got := p.refund(ms(w+l.period-1, 999_999), l.op(a, 2, bucket.CheckAndSpend))[0]; !got.Allowed || got.Remaining != 7 {
		t.Fatalf("refund of 2 of 5 in the last ns: %+v, want allowed with 7 left", got)
	}
	// At the boundary the current window is empty: nothing to give back,
	// and the previous window's 3 hits stay (a sliding window weighs them).
	if got := p.refund(ms(w+l.period, 0), l.op(a, 1, bucket.CheckAndSpend))[0]; got.Allowed || got.Write {
		t.Fatalf("refund at the boundary: %+v, want nothing given back", got)
	}
	p.left(ms(w+l.period, 0), l, a)
	p.left(ms(w+l.period+1, 0), l, a)
	// A refund of more than was spent empties the current window.
	p.spend(ms(w+l.period+1, 0), l.op(a, 2, bucket.CheckAndSpend))
	if got := p.refund(ms(w+l.period+1, 0), l.op(a, 9, bucket.CheckAndSpend))[0]; !got.Allowed {
		t.Fatalf("refund past empty: %+v, want allowed", got)
	}
	p.left(ms(w+l.period+1, 0), l, a)
	p.left(ms(w+2*l.period-1, 0), l, a)
	p.left(ms(w+2*l.period, 0), l, a)
}

// testWindowResetAtBoundaries: a reset counts a counter while a decision
// still reads its hits, a millisecond before and after each boundary.
func testWindowResetAtBoundaries(t *testing.T, newSource Factory, l wlimit) {
	p := newPair(t, newSource)
	w := windowAfter(l.period)
	for i, at := range []int64{
		w + l.period - 1,   // the current window: counts
		w + l.period,       // the next window: a sliding window still weighs it
		w + l.period + 1,   //
		w + 2*l.period - 1, // weighs 1 ms of it
		w + 2*l.period,     // counts for nothing
	} {
		k := key(t, fmt.Sprint(i))
		p.spend(ms(w+5_000, 0), l.op(k, 3, bucket.CheckAndSpend))
		want := map[bool]int{true: 1}[at < w+l.period || (!l.fixed && at < w+2*l.period)]
		if n := p.reset(ms(at, 0), l.op(k, 0, 0), l.op(key(t, "never"), 0, 0)); n != want {
			t.Fatalf("reset %d ms after the window began: %d counted, want %d", at-w, n, want)
		}
		if r := p.left(ms(at, 0), l, k); r != 10 {
			t.Fatalf("after the reset: %d left, want 10", r)
		}
	}
}

// testSlidingWeights: the previous window's hits weigh by how much of it
// the last period still overlaps, to the millisecond.
func testSlidingWeights(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	k := key(t, "a")
	w := windowAfter(tenPerMinute.period)
	next := w + 60_000
	p.spend(ms(w+1_000, 0), tenPerMinute.op(k, 7, bucket.CheckAndSpend))
	for _, c := range []struct{ e, left int64 }{
		{0, 3},      // 10 − 7
		{1, 3},      // 10 − 7·59,999/60,000
		{30_000, 6}, // 10 − 3.5
		{51_428, 8}, // 10 − 7·8,572/60,000 = 9.0000…: just under
		{51_429, 9}, // just over
		{59_999, 9}, // 10 − 7/60,000
	} {
		if r := p.left(ms(next+c.e, 0), tenPerMinute, k); r != c.left {
			t.Fatalf("%d ms into the next window: %d left, want %d", c.e, r, c.left)
		}
	}
	// At the boundary, 4 hits fit once 7·(P − e) <= 6·P: e >= 8,572 ms.
	if got := p.spend(ms(next, 0), tenPerMinute.op(k, 4, bucket.CheckAndSpend))[0]; got.Allowed || got.RetryIn != 8_572*int64(time.Millisecond) {
		t.Fatalf("4 hits at the boundary: %+v, want denied, retry in 8,572 ms", got)
	}
	p.spend(ms(next+8_571, 0), tenPerMinute.op(k, 4, bucket.CheckOnly))
	p.spend(ms(next+8_572, 0), tenPerMinute.op(k, 4, bucket.CheckAndSpend))
	p.spend(ms(next+8_572, 0), tenPerMinute.op(k, 3, bucket.CheckAndSpend))
	p.spend(ms(next+30_000, 500), tenPerMinute.op(k, 1, bucket.CheckAndSpend))
	// Two windows on, the first window's hits count no more. (Times only
	// go forward in each test: a source may forget what has expired.)
	if r := p.left(ms(next+60_000, 0), tenPerMinute, k); r != 5 {
		t.Fatalf("two windows on: %d left, want 5 (the 5 hits of the window before, at full weight)", r)
	}
	p.spend(ms(next+60_000+30_000, 0), tenPerMinute.op(k, 2, bucket.CheckAndSpend))
}

// testFixedWindows: a fixed window counts its own hits only, and frees
// them all at its end.
func testFixedWindows(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	k := key(t, "a")
	w := windowAfter(tenPerMinuteFixed.period)
	p.spend(ms(w, 0), tenPerMinuteFixed.op(k, 10, bucket.CheckAndSpend))
	if got := p.spend(ms(w+59_999, 0), tenPerMinuteFixed.op(k, 1, bucket.CheckAndSpend))[0]; got.Allowed || got.RetryIn != int64(time.Millisecond) || got.ResetIn != int64(time.Millisecond) {
		t.Fatalf("a hit in the last ms of a full window: %+v, want denied, retry and reset in 1 ms", got)
	}
	if got := p.spend(ms(w+60_000, 0), tenPerMinuteFixed.op(k, 10, bucket.CheckAndSpend))[0]; !got.Allowed {
		t.Fatalf("10 hits in the next window: %+v, want allowed", got)
	}
	p.spend(ms(w+60_000+59_999, 999_999), tenPerMinuteFixed.op(k, 1, bucket.CheckAndSpend))
	p.spend(ms(w+120_000, 0), tenPerMinuteFixed.op(k, 3, bucket.CheckAndSpend))
	p.spend(ms(w+120_001, 0), threePerSecFixed.op(key(t, "b"), 3, bucket.CheckAndSpend))
	p.spend(ms(w+120_999, 0), threePerSecFixed.op(key(t, "b"), 1, bucket.CheckAndSpend))
	p.spend(ms(w+121_000, 0), threePerSecFixed.op(key(t, "b"), 3, bucket.CheckAndSpend))
}

// testMixedBatch: a batch of a GCRA bucket, a sliding and a fixed window is
// one decision: one denial, of any of them, writes nothing at all.
func testMixedBatch(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	g, s, f := key(t, "g"), key(t, "s"), key(t, "f")
	w := windowAfter(60_000)
	at := ms(w+1_000, 0)
	batch := func(mode bucket.Mode, gc, sc, fc int64) []bucket.Op {
		return []bucket.Op{
			hundredPerH.op(g, gc, mode),
			tenPerMinute.op(s, sc, mode),
			tenPerMinuteFixed.op(f, fc, mode),
		}
	}
	check := func(at int64, wantG, wantS, wantF int64) {
		t.Helper()
		out := p.spend(at, batch(bucket.CheckOnly, 0, 0, 0)...)
		if out[0].Remaining != wantG || out[1].Remaining != wantS || out[2].Remaining != wantF {
			t.Fatalf("left: %d, %d, %d; want %d, %d, %d", out[0].Remaining, out[1].Remaining, out[2].Remaining, wantG, wantS, wantF)
		}
	}
	out := p.spend(at, batch(bucket.CheckAndSpend, 3, 4, 5)...)
	for i, o := range out {
		if !o.Allowed || !o.Write {
			t.Fatalf("op %d of a fresh batch: %+v, want allowed and written", i, o)
		}
	}
	check(at, 97, 6, 5)
	// Each of the three in turn cannot pay: nothing is written.
	for i, ops := range [][]bucket.Op{batch(bucket.CheckAndSpend, 98, 1, 1), batch(bucket.CheckAndSpend, 1, 7, 1), batch(bucket.CheckAndSpend, 1, 1, 6)} {
		out := p.spend(at, ops...)
		for j, o := range out {
			if o.Write || o.Allowed != (i != j) {
				t.Fatalf("batch %d, op %d: %+v; want only op %d denied and nothing written", i, j, o, i)
			}
		}
		check(at, 97, 6, 5)
	}
	// Modes across algorithms: a denied spend-only window does not deny
	// the batch; a check-only bucket is not written.
	p.spend(at, hundredPerH.op(g, 50, bucket.CheckOnly), tenPerMinute.op(s, 6, bucket.CheckAndSpend), tenPerMinuteFixed.op(f, 6, bucket.SpendOnly))
	check(at, 97, 0, 5)
	// A full sliding window denies the batch in the next window too, until
	// a tenth of it has passed.
	next := ms(w+60_000, 0)
	for _, o := range p.spend(next, batch(bucket.CheckAndSpend, 1, 1, 1)...) {
		if o.Write {
			t.Fatalf("a batch with a full sliding window wrote: %+v", o)
		}
	}
	later := ms(w+66_000, 0)
	for _, o := range p.spend(later, batch(bucket.CheckAndSpend, 1, 1, 1)...) {
		if !o.Allowed || !o.Write {
			t.Fatalf("a batch 6 s into the next window: %+v, want allowed and written", o)
		}
	}
	// Refunds across algorithms, the windows' past empty; the second has
	// no window hits left to give back.
	p.refund(later, batch(bucket.CheckAndSpend, 2, 1, 9)...)
	p.refund(later, batch(bucket.CheckAndSpend, 2, 1, 9)...)
	p.spend(later, batch(bucket.CheckOnly, 0, 0, 0)...)
}

// testWindowPeriodChange: a key's counter belongs to its period. Hits
// counted under one period are not read under another, and a spend under
// the other replaces them.
func testWindowPeriodChange(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	k := key(t, "a")
	at := ms(windowAfter(60_000)+1_000, 0)
	p.spend(at, tenPerMinute.op(k, 10, bucket.CheckAndSpend))
	if got := p.spend(at, tenPerHalfMinute.op(k, 1, bucket.CheckOnly))[0]; !got.Allowed || got.Remaining != 9 {
		t.Fatalf("a check under another period: %+v, want allowed with 9 left (nothing counted)", got)
	}
	p.spend(at, tenPerHalfMinute.op(k, 4, bucket.CheckAndSpend))
	if r := p.left(at, tenPerMinute, k); r != 10 {
		t.Fatalf("back under the first period: %d left, want 10 (its counter was replaced)", r)
	}
	p.spend(at, tenPerMinute.op(k, 2, bucket.CheckAndSpend))
	if r := p.left(at, tenPerHalfMinute, k); r != 10 {
		t.Fatalf("under the second period again: %d left, want 10", r)
	}
	p.left(ms(windowAfter(60_000)+60_001, 0), tenPerMinute, k)
}

// testOnceReplaysWindows: a batch of every algorithm spent under a record
// in the last ns of a window, repeated in the next window, is answered
// with the first outcomes and spends nothing more.
func testOnceReplaysWindows(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	w := windowAfter(60_000)
	ops := []bucket.Op{
		threePerSec.op(key(t, "g"), 2, bucket.CheckAndSpend),
		tenPerMinute.op(key(t, "s"), 3, bucket.CheckAndSpend),
		tenPerMinuteFixed.op(key(t, "f"), 4, bucket.CheckAndSpend),
	}
	at := ms(w+59_999, 999_999)
	rec := record(t, "r", "fp-1", at)
	first, replayed := spendOnce(t, p.src, at, rec, ops...)
	p.compare("first SpendOnce", at, ops, first, p.model.Apply(at, ops, false))
	if replayed {
		t.Fatal("the first call was replayed")
	}
	later := ms(w+60_000, 1)
	again, replayed := spendOnce(t, p.src, later, rec, ops...)
	if !replayed || !reflect.DeepEqual(again, first) {
		t.Fatalf("repeat in the next window: %+v replayed=%v, want the first outcomes %+v, replayed", again, replayed, first)
	}
	for _, op := range ops {
		op.Cost, op.Mode = 0, bucket.CheckOnly
		p.spend(later, op)
	}
}

// testOnceReplaysWindowDenial: a denied window spend is recorded too, and
// its repeat is denied even once the window has passed.
func testOnceReplaysWindowDenial(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	k := key(t, "a")
	w := windowAfter(60_000)
	p.spend(ms(w+1_000, 0), tenPerMinute.op(k, 10, bucket.CheckAndSpend))
	rec := record(t, "r", "fp-1", ms(w+1_000, 0))
	op := tenPerMinute.op(k, 1, bucket.CheckAndSpend)
	first, _ := spendOnce(t, p.src, ms(w+1_000, 0), rec, op)
	p.compare("first SpendOnce", ms(w+1_000, 0), []bucket.Op{op}, first, p.model.Apply(ms(w+1_000, 0), []bucket.Op{op}, false))
	if first[0].Allowed {
		t.Fatalf("a hit on a full window: %+v, want denied", first)
	}
	empty := ms(w+120_000, 0)
	again, replayed := spendOnce(t, p.src, empty, rec, op)
	if !replayed || !reflect.DeepEqual(again, first) {
		t.Fatalf("repeat once the window passed: %+v replayed=%v, want the first denial %+v", again, replayed, first)
	}
	if r := p.left(empty, tenPerMinute, k); r != 10 {
		t.Fatalf("after the repeat: %d left, want 10 (nothing spent)", r)
	}
}

// testOnceRefundWindow: a window refund under a record gives back once.
func testOnceRefundWindow(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	k := key(t, "a")
	w := windowAfter(60_000)
	p.spend(ms(w+1_000, 0), tenPerMinute.op(k, 6, bucket.CheckAndSpend))
	rec := record(t, "r", "refund-fp", ms(w+2_000, 0))
	op := tenPerMinute.op(k, 4, bucket.CheckAndSpend)
	want := p.model.Apply(ms(w+2_000, 0), []bucket.Op{op}, true)
	for i, wantReplayed := range []bool{false, true} {
		out := make([]bucket.Outcome, 1)
		replayed, err := p.src.RefundOnce(context.Background(), ms(w+2_000, 0), rec, []bucket.Op{op}, out)
		if err != nil || replayed != wantReplayed || out[0] != want[0] || out[0].Remaining != 8 {
			t.Fatalf("refund %d: %+v replayed=%v err=%v, want %+v (8 left), replayed=%v", i, out, replayed, err, want[0], wantReplayed)
		}
	}
	if r := p.left(ms(w+2_000, 0), tenPerMinute, k); r != 8 {
		t.Fatalf("after a refund and its repeat: %d left, want 8 (given back once)", r)
	}
}
