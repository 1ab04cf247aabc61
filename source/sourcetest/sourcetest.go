// Package sourcetest is the conformance suite every bucket source passes:
// the memory source, one Redis and a Redis Cluster run the same tests, so a
// new source (or a new algorithm next to GCRA) is added by passing them.
// Every algorithm is covered: GCRA buckets, sliding and fixed windows,
// calendar quotas, and batches that mix them, compared outcome by outcome with Model.
//
// The suite drives sources directly with explicit times, so no clock and no
// sleep is involved: "now" is just a number the test chooses.
package sourcetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/calendar"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// Factory returns a new, empty source for one test. The suite closes it.
type Factory func(t *testing.T) ratelimits.Source

// base is the suite's "now": a realistic unix time in nanoseconds, well past
// 2^53, so a source that loses precision in floating point fails.
const base int64 = 1_790_000_000_123_456_789

// A few limits, as emission interval and burst offset in nanoseconds.
var (
	tenPerSecond = limit{ei: int64(100 * time.Millisecond), burst: 10}
	threePerSec  = limit{ei: int64(time.Second) / 3, burst: 3}
	hundredPerH  = limit{ei: int64(36 * time.Second), burst: 100}
	// decade has a burst offset of ten years: sums of it and a unix time
	// need all 63 bits.
	decade = limit{ei: int64(365 * 24 * time.Hour), burst: 10}
)

type limit struct{ ei, burst int64 }

func (l limit) op(key string, cost int64, mode bucket.Mode) bucket.Op {
	return bucket.Op{Key: key, EmissionInterval: l.ei, BurstOffset: l.ei * l.burst, Cost: cost, Mode: mode}
}

// Run runs the whole suite against sources made by newSource.
func Run(t *testing.T, newSource Factory) {
	t.Run("SpendThenDenied", func(t *testing.T) { testSpendThenDenied(t, newSource) })
	t.Run("DeniedBatchWritesNothing", func(t *testing.T) { testDeniedBatchWritesNothing(t, newSource) })
	t.Run("Modes", func(t *testing.T) { testModes(t, newSource) })
	t.Run("Refund", func(t *testing.T) { testRefund(t, newSource) })
	t.Run("Reset", func(t *testing.T) { testReset(t, newSource) })
	t.Run("FullBucketsReadAsMissing", func(t *testing.T) { testFullBuckets(t, newSource) })
	t.Run("MatchesModel", func(t *testing.T) { testMatchesModel(t, newSource) })
	t.Run("NoOvershootOneBucket", func(t *testing.T) { testNoOvershoot(t, newSource, 1) })
	t.Run("NoOvershootBatch", func(t *testing.T) { testNoOvershoot(t, newSource, 3) })
	runOnce(t, newSource)
	runWindows(t, newSource)
	runCalendars(t, newSource)
	RunERL(t, newSource)
}

func open(t *testing.T, newSource Factory) ratelimits.Source {
	t.Helper()
	src := newSource(t)
	t.Cleanup(func() {
		if err := src.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return src
}

func spend(t *testing.T, src ratelimits.Source, now int64, ops ...bucket.Op) []bucket.Outcome {
	t.Helper()
	out := make([]bucket.Outcome, len(ops))
	if err := src.Spend(context.Background(), now, ops, out); err != nil {
		t.Fatalf("Spend: %v", err)
	}
	return out
}

func refund(t *testing.T, src ratelimits.Source, now int64, ops ...bucket.Op) []bucket.Outcome {
	t.Helper()
	out := make([]bucket.Outcome, len(ops))
	if err := src.Refund(context.Background(), now, ops, out); err != nil {
		t.Fatalf("Refund: %v", err)
	}
	return out
}

// remaining reads a bucket with a cost-0 check.
func remaining(t *testing.T, src ratelimits.Source, now int64, l limit, key string) int64 {
	t.Helper()
	return spend(t, src, now, l.op(key, 0, bucket.CheckOnly))[0].Remaining
}

func key(t *testing.T, name string) string {
	// Test names keep keys of different tests apart on a shared server.
	return fmt.Sprintf("t:%s:%s", t.Name(), name)
}

func testSpendThenDenied(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	k := key(t, "a")
	// Ten tokens at once empty the bucket; the eleventh is denied, and the
	// denial says when one token is back.
	if got := spend(t, src, base, tenPerSecond.op(k, 10, bucket.CheckAndSpend))[0]; !got.Allowed || got.Remaining != 0 {
		t.Fatalf("spend 10 of 10: %+v, want allowed with 0 remaining", got)
	}
	got := spend(t, src, base, tenPerSecond.op(k, 1, bucket.CheckAndSpend))[0]
	if got.Allowed || got.RetryIn != tenPerSecond.ei {
		t.Fatalf("spend 1 more: %+v, want denied, retry in %d", got, tenPerSecond.ei)
	}
	// One emission interval later exactly one token is back.
	if got := spend(t, src, base+tenPerSecond.ei, tenPerSecond.op(k, 1, bucket.CheckAndSpend))[0]; !got.Allowed || got.Remaining != 0 {
		t.Fatalf("spend after one interval: %+v, want allowed with 0 remaining", got)
	}
}

func testDeniedBatchWritesNothing(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	a, b := key(t, "a"), key(t, "b")
	spend(t, src, base, threePerSec.op(b, 3, bucket.CheckAndSpend))
	// a could pay, b cannot: the whole batch is denied and a keeps its tokens.
	out := spend(t, src, base, tenPerSecond.op(a, 5, bucket.CheckAndSpend), threePerSec.op(b, 1, bucket.CheckAndSpend))
	if !out[0].Allowed || out[1].Allowed {
		t.Fatalf("batch outcomes %+v, want a allowed and b denied", out)
	}
	if out[0].Write || out[1].Write {
		t.Fatalf("denied batch marked writes: %+v", out)
	}
	if r := remaining(t, src, base, tenPerSecond, a); r != 10 {
		t.Fatalf("a after a denied batch: %d remaining, want 10 (nothing written)", r)
	}
}

func testModes(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	a, b := key(t, "a"), key(t, "b")
	// check-only counts but never writes.
	spend(t, src, base, tenPerSecond.op(a, 4, bucket.CheckOnly), tenPerSecond.op(b, 1, bucket.CheckAndSpend))
	if r := remaining(t, src, base, tenPerSecond, a); r != 10 {
		t.Fatalf("check-only wrote: %d remaining, want 10", r)
	}
	if r := remaining(t, src, base, tenPerSecond, b); r != 9 {
		t.Fatalf("check-and-spend beside check-only: %d remaining, want 9", r)
	}
	// A denied spend-only does not deny the batch and is not written; the
	// allowed rest of the batch is.
	spend(t, src, base, threePerSec.op(a, 3, bucket.CheckAndSpend))
	out := spend(t, src, base, threePerSec.op(a, 1, bucket.SpendOnly), tenPerSecond.op(b, 1, bucket.CheckAndSpend))
	if out[0].Allowed || out[0].Write || !out[1].Allowed || !out[1].Write {
		t.Fatalf("spend-only denied beside allowed: %+v", out)
	}
	if r := remaining(t, src, base, tenPerSecond, b); r != 8 {
		t.Fatalf("b after batch with denied spend-only: %d remaining, want 8", r)
	}
	// An allowed spend-only in a denied batch is not written either.
	c := key(t, "c")
	out = spend(t, src, base, tenPerSecond.op(c, 1, bucket.SpendOnly), threePerSec.op(a, 1, bucket.CheckAndSpend))
	if !out[0].Allowed || out[1].Allowed {
		t.Fatalf("spend-only in denied batch: %+v", out)
	}
	if r := remaining(t, src, base, tenPerSecond, c); r != 10 {
		t.Fatalf("spend-only written in a denied batch: %d remaining, want 10", r)
	}
}

func testRefund(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	a, missing := key(t, "a"), key(t, "missing")
	// A refund never creates a bucket.
	if got := refund(t, src, base, tenPerSecond.op(missing, 3, bucket.CheckAndSpend))[0]; got.Allowed || got.Remaining != 10 {
		t.Fatalf("refund of a missing bucket: %+v, want not allowed, 10 remaining", got)
	}
	if r := remaining(t, src, base, tenPerSecond, missing); r != 10 {
		t.Fatalf("missing bucket after refund: %d remaining", r)
	}
	spend(t, src, base, tenPerSecond.op(a, 6, bucket.CheckAndSpend))
	// Refunding more than was spent never makes the bucket more than full.
	if got := refund(t, src, base, tenPerSecond.op(a, 2, bucket.CheckAndSpend))[0]; !got.Allowed || got.Remaining != 6 {
		t.Fatalf("refund 2 of 6 spent: %+v, want allowed with 6 remaining", got)
	}
	if got := refund(t, src, base, tenPerSecond.op(a, 2, bucket.CheckOnly))[0]; got.Allowed {
		t.Fatalf("check-only refund gave something back: %+v", got)
	}
	if got := refund(t, src, base, tenPerSecond.op(a, 9, bucket.CheckAndSpend))[0]; !got.Allowed || got.Remaining != 10 || got.ResetIn != 0 {
		t.Fatalf("refund past full: %+v, want allowed, 10 remaining, reset 0", got)
	}
	if r := remaining(t, src, base, tenPerSecond, a); r != 10 {
		t.Fatalf("after refund to full: %d remaining", r)
	}
}

func testReset(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	a, b, c := key(t, "a"), key(t, "b"), key(t, "c")
	spend(t, src, base, tenPerSecond.op(a, 5, bucket.CheckAndSpend), threePerSec.op(b, 1, bucket.CheckAndSpend))
	n, err := src.Reset(context.Background(), base, []bucket.Op{tenPerSecond.op(a, 0, 0), threePerSec.op(b, 0, 0), tenPerSecond.op(c, 0, 0)})
	if err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if n != 2 {
		t.Fatalf("Reset counted %d buckets, want 2 (c was never spent)", n)
	}
	if r := remaining(t, src, base, tenPerSecond, a); r != 10 {
		t.Fatalf("a after reset: %d remaining, want 10", r)
	}
	// A bucket that has refilled by itself counts as full, not as reset.
	spend(t, src, base, tenPerSecond.op(a, 1, bucket.CheckAndSpend))
	n, err = src.Reset(context.Background(), base+int64(time.Hour), []bucket.Op{tenPerSecond.op(a, 0, 0)})
	if err != nil || n != 0 {
		t.Fatalf("Reset of a refilled bucket: %d, %v; want 0, nil", n, err)
	}
}

func testFullBuckets(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	a := key(t, "a")
	spend(t, src, base, tenPerSecond.op(a, 10, bucket.CheckAndSpend))
	// After a full refill, the bucket behaves exactly as a missing one.
	later := base + tenPerSecond.ei*tenPerSecond.burst
	got := spend(t, src, later, tenPerSecond.op(a, 1, bucket.CheckAndSpend))[0]
	w := gcra.Spend(later, gcra.Missing, tenPerSecond.ei, tenPerSecond.ei*tenPerSecond.burst, 1)
	want := bucket.Decision{Allowed: w.Allowed, Remaining: w.Remaining, RetryIn: w.RetryIn, ResetIn: w.ResetIn}
	if got.Decision != want {
		t.Fatalf("spend on refilled bucket: %+v, want %+v", got.Decision, want)
	}
	got = refund(t, src, later+2*tenPerSecond.ei, tenPerSecond.op(a, 1, bucket.CheckAndSpend))[0]
	if got.Allowed || got.Remaining != 10 {
		t.Fatalf("refund on refilled bucket: %+v, want nothing given back", got)
	}
}

// testMatchesModel drives the source and a reference model (the bucket
// functions over a Go map) with the same random operations at random
// times, on GCRA buckets and sliding and fixed windows in batches that mix
// them, with resets, and demands identical outcomes to the nanosecond.
// Times often fall a millisecond either side of a second's boundary, where
// short windows turn; a window key now and then changes period, as a
// reload may make it.
func testMatchesModel(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	rng := rand.New(rand.NewPCG(7, 11))
	limits := []func(key string, cost int64, mode bucket.Mode, alt bool) bucket.Op{
		gcraLimit(tenPerSecond), gcraLimit(threePerSec), gcraLimit(hundredPerH), gcraLimit(decade),
		windowLimit(fivePerSecond), windowLimit(threePerSecFixed), windowLimit(tenPerMinute),
		windowLimit(tenPerMinuteFixed), windowLimit(leapYear),
		calendarLimit(parisDay), calendarLimit(newYorkMonth), calendarLimit(kolkataWeek),
	}
	keys := make([]string, 2*len(limits))
	for i := range keys {
		keys[i] = key(t, fmt.Sprint(i))
	}
	model := Model{}
	now := base
	const steps = 1500
	for step := range steps {
		now += rng.Int64N(int64(400 * time.Millisecond))
		switch rng.IntN(50) {
		case 0:
			now += int64(200 * 24 * time.Hour) // let even the long limits refill partly
		case 1, 2, 3, 4, 5:
			// A millisecond before, at or after the next second, at any
			// nanosecond of that millisecond.
			second := (now/int64(time.Second) + 1) * int64(time.Second)
			now = max(now, second+(rng.Int64N(3)-1)*int64(time.Millisecond)+rng.Int64N(int64(time.Millisecond)))
		}
		n := 1 + rng.IntN(3)
		perm := rng.Perm(len(keys))[:n]
		ops := make([]bucket.Op, n)
		for i, k := range perm {
			// A key keeps its limit, as a bucket key keeps its limit name.
			l := limits[k%len(limits)]
			ops[i] = l(keys[k], -1, bucket.Mode(rng.IntN(3)), rng.IntN(8) == 0)
			ops[i].Cost = rng.Int64N(maxCost(ops[i]) + 1)
		}
		if rng.IntN(40) == 0 {
			got, err := src.Reset(context.Background(), now, ops)
			if err != nil {
				t.Fatalf("Reset: %v", err)
			}
			if want := model.Reset(now, ops); got != want {
				t.Fatalf("step %d: Reset of %+v at %d counted %d, the model %d", step, ops, now, got, want)
			}
			continue
		}
		isRefund := rng.IntN(4) == 0
		var got []bucket.Outcome
		if isRefund {
			got = refund(t, src, now, ops...)
		} else {
			got = spend(t, src, now, ops...)
		}
		want := model.Apply(now, ops, isRefund)
		for i := range ops {
			if got[i] != want[i] {
				t.Fatalf("step %d (refund=%v) op %d %+v at %d:\n got %+v\nwant %+v", step, isRefund, i, ops[i], now, got[i], want[i])
			}
		}
	}
}

// gcraLimit makes ops of a GCRA limit (alt changes nothing).
func gcraLimit(l limit) func(string, int64, bucket.Mode, bool) bucket.Op {
	return func(key string, cost int64, mode bucket.Mode, _ bool) bucket.Op { return l.op(key, cost, mode) }
}

// windowLimit makes ops of a window limit; with alt, of the same limit
// with half its period (whole seconds still), as after a reload.
func windowLimit(l wlimit) func(string, int64, bucket.Mode, bool) bucket.Op {
	return func(key string, cost int64, mode bucket.Mode, alt bool) bucket.Op {
		if alt && l.period >= 2_000 {
			l.period = l.period / 2_000 * 1_000
		}
		return l.op(key, cost, mode)
	}
}

// maxCost is the largest cost an op's limit allows.
func maxCost(op bucket.Op) int64 {
	switch {
	case op.Algorithm.Windowed():
		return op.Window.Count
	case op.Algorithm == bucket.Calendar:
		return op.Calendar.Count
	}
	return op.BurstOffset / op.EmissionInterval
}

// Model is the reference every source is compared with: a Go map of
// states, the bucket batch functions, and the rule that a TAT not after
// now is a missing bucket (a window counter past its windows reads as
// empty by itself). A rate counter is stored as its own copy; a box entry
// under its key behind boxPrefix, apart from buckets. It bounds nothing:
// capacity is each source's own.
type Model map[string]bucket.State

// boxPrefix keeps a Model's box entries apart from its buckets.
const boxPrefix = "\x00box:"

// read returns the state op reads: its bucket and, when it has a box, its
// box entry. A rate counter is a copy, which the caller may change.
func (m Model) read(now int64, op *bucket.Op) bucket.State {
	st, ok := m[stateKey(now, op)]
	if !ok || (op.Algorithm == bucket.GCRA && st.TAT <= now) {
		st = bucket.Empty
	}
	if op.Algorithm.Windowed() && st.Window.Expires() <= floorDiv(now, int64(time.Millisecond)) {
		// A counter that counts nothing any more: a source may have
		// forgotten it, and a decision that echoes the state read (a
		// boxed one) must not tell.
		st.Window = window.Counter{}
	}
	if op.Algorithm == bucket.Calendar && st.Calendar.End <= floorDiv(now, int64(time.Millisecond)) {
		st.Calendar = calendar.Counter{} // its period is over
	}
	st.BoxExpires = 0
	if op.Algorithm == bucket.Concurrency {
		st = liveLeases(now, st)
	}
	if st.Rate != nil {
		c := *st.Rate
		st.Rate = &c
		if c.Empty(ratecounter.Second(now)) {
			st.Rate = nil
		}
	}
	if op.Box != "" {
		st.BoxExpires = m.box(now, op.Box)
	}
	return st
}

// floorDiv is a / b rounded down, also below 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// box returns the expiry of box entry key, 0 when it is not in the box at
// now: an entry past its expiry is as good as missing, and a source may
// have forgotten it.
func (m Model) box(now int64, key string) int64 {
	if e := m[boxPrefix+key].BoxExpires; e > now {
		return e
	}
	return 0
}

// Apply decides a batch as a source must, and stores what it writes.
func (m Model) Apply(now int64, ops []bucket.Op, isRefund bool) []bucket.Outcome {
	states := make([]bucket.State, len(ops))
	for i := range ops {
		states[i] = m.read(now, &ops[i])
	}
	out := make([]bucket.Outcome, len(ops))
	if isRefund {
		bucket.RefundBatch(now, ops, states, out)
	} else {
		bucket.SpendBatch(now, ops, states, out)
	}
	s := ratecounter.Second(now)
	for i, o := range out {
		op := &ops[i]
		switch {
		case o.Write && op.Algorithm == bucket.RateCounter:
			c := states[i].Rate
			if c == nil {
				c = &ratecounter.Counter{}
			}
			cost := op.Cost
			if op.Mode == bucket.CheckOnly {
				cost = 0
			}
			if isRefund {
				c.Remove(s, cost)
			} else {
				c.Add(s, cost)
			}
			m[op.Key] = bucket.State{TAT: gcra.Missing, Rate: c}
		case o.Write:
			m[stateKey(now, op)] = bucket.State{TAT: o.New.TAT, Window: o.New.Window, Calendar: o.New.Calendar, Leases: o.New.Leases}
		}
		if o.WriteBox {
			m[boxPrefix+op.Box] = bucket.State{BoxExpires: o.New.BoxExpires}
		}
	}
	return out
}

// Call applies an ERL call as a source must (bucket.ApplyCall), and stores
// what it writes.
func (m Model) Call(now int64, call *bucket.Call, res *bucket.CallResult) {
	counters := make([]ratecounter.Counter, len(call.Counters))
	for i, cc := range call.Counters {
		// A counter with no hit in its last minute is as good as missing,
		// and a source may have forgotten it.
		if st, ok := m[cc.Key]; ok && st.Rate != nil && !st.Rate.Empty(ratecounter.Second(now)) {
			counters[i] = *st.Rate
		}
	}
	box := int64(0)
	if call.Box != "" {
		box = m.box(now, call.Box)
	}
	newBox, writeBox := bucket.ApplyCall(now, call, counters, box, res)
	for i, cc := range call.Counters {
		if cc.Delta > 0 {
			c := counters[i]
			m[cc.Key] = bucket.State{TAT: gcra.Missing, Rate: &c}
		}
	}
	if writeBox {
		m[boxPrefix+call.Box] = bucket.State{BoxExpires: newBox}
	}
}

// testNoOvershoot has many goroutines spend cost 1 at the same instant on
// a bucket of burst 100 (or on batches of width buckets): exactly 100
// spends may succeed, however the source interleaves them.
func testNoOvershoot(t *testing.T, newSource Factory, width int) {
	ops := make([]bucket.Op, width)
	for i := range ops {
		ops[i] = hundredPerH.op(key(t, fmt.Sprint(i)), 1, bucket.CheckAndSpend)
	}
	testNoOvershootOps(t, newSource, ops)
}

// testNoOvershootOps has many goroutines spend ops (each of a limit of 100
// in an hour, at cost 1) at the same instant: exactly 100 batches may be
// allowed, however the source interleaves them.
func testNoOvershootOps(t *testing.T, newSource Factory, ops []bucket.Op) {
	src := open(t, newSource)
	const workers, perWorker = 64, 5
	var allowed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]bucket.Outcome, len(ops))
			for range perWorker {
				if err := src.Spend(context.Background(), base, ops, out); err != nil {
					errs <- err
					return
				}
				batchAllowed := true
				for _, o := range out {
					batchAllowed = batchAllowed && o.Allowed
				}
				if batchAllowed {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Spend: %v", err)
	}
	if got := allowed.Load(); got != 100 {
		t.Fatalf("%d concurrent batches allowed, want exactly 100", got)
	}
	for _, op := range ops {
		op.Cost, op.Mode = 0, bucket.CheckOnly
		if r := spend(t, src, base, op)[0].Remaining; r != 0 {
			t.Fatalf("%s has %d left after the race, want 0", op.Key, r)
		}
	}
}
