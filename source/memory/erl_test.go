package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/ratelimits/window"
	"github.com/limiter-dev/limiter/source/memory"
	"github.com/limiter-dev/limiter/source/sourcetest"
)

const (
	sec    = int64(time.Second)
	minute = int64(time.Minute)
)

// rateOp is a transaction of a rate-counter limit of 10 hits a second
// over 10 seconds (100 hits), boxing for penalty from at, in a box of
// capacity entries.
func rateOp(key string, cost int64, at int64, capacity int) bucket.Op {
	return bucket.Op{
		Key: key, Algorithm: bucket.RateCounter, Rate: ratecounter.Limit{Window: 10, Rate: 10},
		Cost: cost, Box: key, BoxUntil: at + 10*minute, Capacity: capacity,
	}
}

// penalised gives op (a GCRA or window op) a box that holds a denied id
// for penalty from at.
func penalised(op bucket.Op, at, penalty int64) bucket.Op {
	op.Box, op.BoxUntil, op.Capacity = op.Key, at+penalty, 100
	return op
}

// checkRate is a check_rate call: delta hits on counter key, limit hits
// per second over window seconds, boxing key's entry in box until until.
func checkRate(key string, delta, window, limit int64, box string, until int64, capacity int) *bucket.Call {
	return &bucket.Call{
		Counters:    []bucket.CounterCheck{{Key: key, Delta: delta, Limit: ratecounter.Limit{Window: window, Rate: limit}, Capacity: capacity}},
		Box:         box,
		Action:      bucket.BoxWhenAbove,
		Until:       until,
		BoxCapacity: capacity,
	}
}

// increment is ratecounter.increment: delta hits, no limit, no box.
func increment(key string, delta int64, capacity int) *bucket.Call {
	return &bucket.Call{Counters: []bucket.CounterCheck{{Key: key, Delta: delta, Capacity: capacity}}}
}

// boxCall acts on box entry key alone.
func boxCall(key string, action bucket.BoxAction, until int64, capacity int) *bucket.Call {
	return &bucket.Call{Box: key, Action: action, Until: until, BoxCapacity: capacity}
}

func call(t testing.TB, src *memory.Source, at int64, c *bucket.Call) bucket.CallResult {
	t.Helper()
	var res bucket.CallResult
	if err := src.Call(context.Background(), at, c, &res); err != nil {
		t.Fatalf("Call: %v", err)
	}
	return res
}

func batch(t testing.TB, src *memory.Source, at int64, isRefund bool, ops ...bucket.Op) []bucket.Outcome {
	t.Helper()
	out := make([]bucket.Outcome, len(ops))
	f := src.Spend
	if isRefund {
		f = src.Refund
	}
	if err := f(context.Background(), at, ops, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// hits60 reads key's counter (a lookup: no hit added) and returns its hits
// of the last 60 seconds.
func hits60(t testing.TB, src *memory.Source, at int64, key string) int64 {
	t.Helper()
	res := call(t, src, at, increment(key, 0, 0))
	return res.Counters[0].Window(ratecounter.Second(at), 60)
}

// boxed returns the expiry of key's box entry, 0 when it is not in the box.
func boxed(t testing.TB, src *memory.Source, at int64, key string) int64 {
	t.Helper()
	return call(t, src, at, boxCall(key, bucket.BoxRead, 0, 0)).Expires
}

func TestDefaultCapacityIsTheLimits(t *testing.T) {
	if memory.DefaultCapacity != ratelimits.DefaultCapacity {
		t.Fatalf("memory.DefaultCapacity = %d, ratelimits.DefaultCapacity = %d", memory.DefaultCapacity, ratelimits.DefaultCapacity)
	}
}

// The source against sourcetest's model, with batches that mix rate
// counters with GCRA and window limits that have boxes or not, refunds,
// resets, and every kind of ERL call on the same counters and boxes,
// at times that move on by fractions of a second and sometimes past a
// minute, so counters empty and box entries expire (the source forgets
// them, the model reads them as missing). Outcomes and call results must
// be identical. The keys here are short, held in the tables' slots, where
// the shared suite's carry the test's name; the counters of several names
// share calls, and a capacity of DefaultCapacity evicts nothing.
func TestERLMatchesModel(t *testing.T) {
	src := memory.New(0)
	model := sourcetest.Model{}
	rng := rand.New(rand.NewPCG(8, 13))
	names := []string{"130", "131", "7"}
	const ids = 4
	at := now
	for step := range 20_000 {
		at += rng.Int64N(700 * int64(time.Millisecond))
		if rng.IntN(200) == 0 {
			at += rng.Int64N(15 * minute)
		}
		ops := make([]bucket.Op, 0, 3)
		used := map[string]bool{}
		for range 1 + rng.IntN(3) {
			n, id := rng.IntN(len(names)), rng.IntN(ids)
			key := fmt.Sprintf("%s:%d", names[n], id)
			if used[key] {
				continue
			}
			used[key] = true
			var op bucket.Op
			switch names[n] {
			case "130", "131":
				op = rateOp(key, rng.Int64N(40), at, 0)
				op.BoxUntil = ratelimits.BoxUntil(at, time.Duration(1+rng.IntN(3))*time.Minute)
			default:
				// A key keeps its algorithm, as a bucket key keeps its limit.
				op = slidingHourly(key, rng.Int64N(60))
				if id%2 == 0 {
					op = hourly(key, rng.Int64N(60))
				}
				op = penalised(op, at, sec+rng.Int64N(3*minute))
			}
			op.Mode = bucket.Mode(rng.IntN(3))
			ops = append(ops, op)
		}
		switch r := rng.IntN(20); {
		case r == 0:
			got, err := src.Reset(context.Background(), at, ops)
			if want := model.Reset(at, ops); err != nil || got != want {
				t.Fatalf("step %d: Reset counted %d (%v), the model %d", step, got, err, want)
			}
		case r < 8:
			c := randomCall(rng, at, names[:2], ids)
			got := call(t, src, at, c)
			var want bucket.CallResult
			model.Call(at, c, &want)
			if got != want {
				t.Fatalf("step %d: %+v:\n got %+v\nwant %+v", step, c, got, want)
			}
		default:
			isRefund := rng.IntN(4) == 0
			got := batch(t, src, at, isRefund, ops...)
			want := model.Apply(at, ops, isRefund)
			for i := range ops {
				if got[i] != want[i] {
					t.Fatalf("step %d (refund %v) op %d %+v:\n got %+v\nwant %+v", step, isRefund, i, ops[i], got[i], want[i])
				}
			}
		}
	}
}

// randomCall is one of the ERL calls on the counters and boxes of names.
func randomCall(rng *rand.Rand, at int64, names []string, ids int) *bucket.Call {
	id := rng.IntN(ids)
	key := func(n int) string { return fmt.Sprintf("%s:%d", names[n], id) }
	until := ratelimits.BoxUntil(at, time.Duration(1+rng.IntN(3))*time.Minute)
	windows := []int64{1, 10, 60}
	check := func(n int) bucket.CounterCheck {
		return bucket.CounterCheck{Key: key(n), Delta: rng.Int64N(30), Limit: ratecounter.Limit{Window: windows[rng.IntN(3)], Rate: 10}}
	}
	switch rng.IntN(6) {
	case 0: // check_rates, the box of either counter
		n := rng.IntN(2)
		return &bucket.Call{Counters: []bucket.CounterCheck{check(n), check(1 - n)}, Box: key(rng.IntN(2)), Action: bucket.BoxWhenAbove, Until: until}
	case 1: // increment or lookup
		return &bucket.Call{Counters: []bucket.CounterCheck{{Key: key(rng.IntN(2)), Delta: rng.Int64N(2) * rng.Int64N(30)}}}
	case 2: // a box alone
		actions := []bucket.BoxAction{bucket.BoxRead, bucket.BoxReplace, bucket.BoxRemove, bucket.BoxExtend}
		return &bucket.Call{Box: key(rng.IntN(2)), Action: actions[rng.IntN(len(actions))], Until: until}
	default: // check_rate
		return &bucket.Call{Counters: []bucket.CounterCheck{check(rng.IntN(2))}, Box: key(rng.IntN(2)), Action: bucket.BoxWhenAbove, Until: until}
	}
}

// A counter at its capacity evicts the entry least recently incremented,
// whether the increments came from calls or from spends of the limit;
// lookups, refunds and checks do not count as increments.
func TestRateCounterEvictsLeastRecentlyIncremented(t *testing.T) {
	src := memory.New(0)
	const capacity = 3
	call(t, src, now, increment("130:a", 1, capacity))
	call(t, src, now, increment("130:b", 1, capacity))
	batch(t, src, now, false, rateOp("130:c", 1, now, capacity))
	// a is incremented again; b is only read, refunded and checked.
	batch(t, src, now+sec, false, rateOp("130:a", 1, now, capacity))
	hits60(t, src, now+sec, "130:b")
	check := rateOp("130:b", 1, now, capacity)
	check.Mode = bucket.CheckOnly
	batch(t, src, now+sec, false, check)
	call(t, src, now+sec, increment("130:b", 1, capacity))
	batch(t, src, now+sec, true, rateOp("130:b", 1, now, capacity)) // takes back the hit of now+sec
	// From the most recent: b (incremented at now+1s, then refunded), a,
	// c: d evicts c.
	call(t, src, now+2*sec, increment("130:d", 1, capacity))
	want := map[string]int64{"130:a": 2, "130:b": 1, "130:c": 0, "130:d": 1}
	for k, w := range want {
		if got := hits60(t, src, now+2*sec, k); got != w {
			t.Errorf("%s: %d hits, want %d", k, got, w)
		}
	}
	if st := src.ERLStats(); st.Counters != capacity || st.CounterEvictions != 1 {
		t.Fatalf("%+v, want %d counters and 1 eviction", st, capacity)
	}
	// Another name has a capacity of its own.
	for i := range 5 {
		call(t, src, now+2*sec, increment(fmt.Sprintf("131:%d", i), 1, 10))
	}
	if st := src.ERLStats(); st.Counters != capacity+5 {
		t.Fatalf("%d counters, want %d: names are bounded apart", st.Counters, capacity+5)
	}
}

// A box at its capacity evicts the entry with the smallest remaining
// time, however the entries were boxed, and never one of another name.
func TestBoxEvictsSmallestRemainingTime(t *testing.T) {
	src := memory.New(0)
	const capacity = 3
	call(t, src, now, boxCall("130:a", bucket.BoxReplace, now+3*minute, capacity))
	call(t, src, now, boxCall("130:b", bucket.BoxReplace, now+5*minute, capacity))
	call(t, src, now, boxCall("7:x", bucket.BoxReplace, now+minute, capacity))
	// c is boxed by its rate going above the limit, for 2 minutes.
	if res := call(t, src, now, checkRate("130:c", 101, 10, 10, "130:c", now+2*minute, capacity)); res.Expires != now+2*minute {
		t.Fatalf("check_rate above the limit: %+v", res)
	}
	// b is shortened to 1 minute: now the smallest remaining time.
	call(t, src, now+sec, boxCall("130:b", bucket.BoxReplace, now+minute, capacity))
	call(t, src, now+2*sec, boxCall("130:d", bucket.BoxReplace, now+4*minute, capacity))
	want := map[string]int64{"130:a": now + 3*minute, "130:b": 0, "130:c": now + 2*minute, "130:d": now + 4*minute, "7:x": now + minute}
	for k, w := range want {
		if got := boxed(t, src, now+2*sec, k); got != w {
			t.Errorf("%s: in the box until %d, want %d", k, got, w)
		}
	}
	// A GCRA limit's denial boxes into the same bounded box: c goes.
	op := penalised(hourly("130:e", 101), now, 10*minute)
	op.Capacity = capacity
	if out := batch(t, src, now+3*sec, false, op); out[0].Allowed || !out[0].WriteBox {
		t.Fatalf("denied penalised spend: %+v", out[0])
	}
	if got := boxed(t, src, now+3*sec, "130:c"); got != 0 {
		t.Fatalf("c still boxed until %d after e took its place", got)
	}
	if st := src.ERLStats(); st.Boxes != capacity+1 || st.BoxEvictions != 2 {
		t.Fatalf("%+v, want %d box entries and 2 evictions", st, capacity+1)
	}
}

// A counter's hits count for 60 seconds: at 59 seconds after its newest
// hit it still holds it, at 60 it is forgotten, when read and when an
// insert sweeps it.
func TestRateCounterExpiresAfterAMinute(t *testing.T) {
	src := memory.New(0)
	for i := range 10 {
		call(t, src, now, increment(fmt.Sprintf("130:%d", i), 2, 0))
	}
	if got := hits60(t, src, now+59*sec, "130:0"); got != 2 {
		t.Fatalf("59 s on: %d hits, want 2", got)
	}
	if got := hits60(t, src, now+60*sec, "130:0"); got != 0 {
		t.Fatalf("60 s on: %d hits, want 0", got)
	}
	if st := src.ERLStats(); st.Counters != 9 {
		t.Fatalf("after reading one expired counter, %d held, want 9", st.Counters)
	}
	call(t, src, now+60*sec, increment("130:new", 1, 0))
	if st := src.ERLStats(); st.Counters != 1 {
		t.Fatalf("after an insert swept the expired counters, %d held, want 1", st.Counters)
	}
	// A refund that takes a counter's only hits removes it.
	batch(t, src, now+61*sec, false, rateOp("130:r", 3, now, 0))
	batch(t, src, now+61*sec, true, rateOp("130:r", 5, now, 0))
	if st := src.ERLStats(); st.Counters != 1 {
		t.Fatalf("after a refund emptied a counter, %d held, want 1", st.Counters)
	}
}

// A box entry is in the box until its expiry, exclusive: then it is
// forgotten, when read and when an insert sweeps it.
func TestBoxEntryExpires(t *testing.T) {
	src := memory.New(0)
	until := now + 2*minute
	for i := range 10 {
		call(t, src, now, boxCall(fmt.Sprintf("130:%d", i), bucket.BoxReplace, until, 0))
	}
	if got := boxed(t, src, until-1, "130:0"); got != until {
		t.Fatalf("1 ns before the expiry: boxed until %d, want %d", got, until)
	}
	if got := boxed(t, src, until, "130:0"); got != 0 {
		t.Fatalf("at the expiry: boxed until %d, want out", got)
	}
	if st := src.ERLStats(); st.Boxes != 9 {
		t.Fatalf("after reading one expired entry, %d held, want 9", st.Boxes)
	}
	call(t, src, until, boxCall("130:new", bucket.BoxReplace, until+minute, 0))
	if st := src.ERLStats(); st.Boxes != 1 {
		t.Fatalf("after an insert swept the expired entries, %d held, want 1", st.Boxes)
	}
	// An expiry not after now takes an entry out.
	call(t, src, until, boxCall("130:new", bucket.BoxReplace, until, 0))
	if st := src.ERLStats(); st.Boxes != 0 {
		t.Fatalf("after a replace with a past expiry, %d held, want 0", st.Boxes)
	}
}

// A batch that something else denies still counts its rate ops' hits and
// boxes the ids its ops box: a rate counter going above its limit, and a
// penalised limit denying. Check-only ops write nothing.
func TestDeniedBatchStillCountsHitsAndBoxes(t *testing.T) {
	src := memory.New(0)
	above := rateOp("130:above", 101, now, 0)
	counted := rateOp("130:counted", 7, now, 0)
	checked := rateOp("130:checked", 200, now, 0)
	checked.Mode = bucket.CheckOnly
	denied := penalised(hourly("7:denied", 101), now, 5*minute)
	plain := hourly("3:plain", 1)
	out := batch(t, src, now, false, above, counted, checked, denied, plain)
	if out[0].Allowed || !out[0].Penalized || !out[0].Write || !out[0].WriteBox {
		t.Fatalf("rate op above its limit: %+v", out[0])
	}
	if !out[1].Allowed || !out[1].Write {
		t.Fatalf("rate op within its limit: %+v", out[1])
	}
	if out[2].Allowed || out[2].Write || out[2].WriteBox {
		t.Fatalf("check-only rate op above its limit: %+v", out[2])
	}
	if out[3].Allowed || !out[3].WriteBox || out[3].Write || out[4].Write {
		t.Fatalf("penalised and plain ops of the denied batch: %+v, %+v", out[3], out[4])
	}
	for k, w := range map[string]int64{"130:above": 101, "130:counted": 7, "130:checked": 0} {
		if got := hits60(t, src, now, k); got != w {
			t.Errorf("%s: %d hits, want %d", k, got, w)
		}
	}
	for k, w := range map[string]int64{"130:above": above.BoxUntil, "130:counted": 0, "130:checked": 0, "7:denied": denied.BoxUntil} {
		if got := boxed(t, src, now, k); got != w {
			t.Errorf("%s: boxed until %d, want %d", k, got, w)
		}
	}
	if got := remainingOf(t, src, plain); got != 100 {
		t.Errorf("plain GCRA op of the denied batch was written: %d remaining", got)
	}
}

func remainingOf(t *testing.T, src *memory.Source, op bucket.Op) int64 {
	t.Helper()
	op.Cost, op.Mode = 0, bucket.CheckOnly
	return batch(t, src, now, false, op)[0].Remaining
}

// A reset deletes a rate counter and its box entry, and a penalised
// limit's bucket and box entry, and counts each op that gave anything
// back.
func TestResetDeletesCountersAndBoxes(t *testing.T) {
	src := memory.New(0)
	rate := rateOp("130:a", 150, now, 0)
	boxedOnly := rateOp("130:b", 0, now, 0)
	gcraOp := penalised(hourly("7:a", 101), now, 5*minute)
	fresh := rateOp("130:never", 0, now, 0)
	batch(t, src, now, false, rate, gcraOp)
	call(t, src, now, boxCall("130:b", bucket.BoxReplace, now+minute, 0))
	n, err := src.Reset(context.Background(), now+sec, []bucket.Op{rate, boxedOnly, gcraOp, fresh})
	if err != nil || n != 3 {
		t.Fatalf("Reset counted %d (%v), want 3", n, err)
	}
	if st := src.ERLStats(); st.Counters != 0 || st.Boxes != 0 {
		t.Fatalf("after the reset: %+v, want nothing held", st)
	}
	if n, _ := src.Reset(context.Background(), now+sec, []bucket.Op{rate, boxedOnly, gcraOp}); n != 0 {
		t.Fatalf("a second reset counted %d, want 0", n)
	}
	if out := batch(t, src, now+sec, false, rateOp("130:a", 1, now, 0)); !out[0].Allowed || out[0].Remaining != 99 {
		t.Fatalf("after the reset: %+v, want allowed with 99 remaining", out[0])
	}
}

// An idempotency record never holds a rate counter (the Limiter refuses
// such keys), but a source handed one decides, records and replays
// without failing.
func TestSpendOnceWithRateOpsDoesNotFail(t *testing.T) {
	src := memory.New(0)
	rec := once.Record{Key: "k", Fingerprint: "f", Expires: now + minute}
	ops := []bucket.Op{rateOp("130:a", 5, now, 0), penalised(hourly("7:a", 1), now, minute)}
	out := make([]bucket.Outcome, len(ops))
	for i, wantReplay := range []bool{false, true} {
		replayed, err := src.SpendOnce(context.Background(), now, rec, ops, out)
		if err != nil || replayed != wantReplay || !out[0].Allowed || !out[1].Allowed {
			t.Fatalf("call %d: replayed %v, %v, %+v", i, replayed, err, out)
		}
	}
	if got := hits60(t, src, now, "130:a"); got != 5 {
		t.Fatalf("%d hits, want 5 (counted once)", got)
	}
}

// Window ops with boxes, to keep the window import honest in this file's
// helpers: a denied sliding window boxes its id.
func TestPenalisedWindowBoxes(t *testing.T) {
	src := memory.New(0)
	op := penalised(bucket.Op{Key: "7:w", Algorithm: bucket.SlidingWindow, Window: window.Limit{Count: 2, Period: 60_000}, Cost: 3}, now, 30*sec)
	out := batch(t, src, now, false, op)
	if out[0].Allowed || !out[0].Penalized || out[0].RetryIn != 30*sec {
		t.Fatalf("denied window op: %+v", out[0])
	}
	op.Cost = 1
	if out := batch(t, src, now+29*sec, false, op); out[0].Allowed || !out[0].Penalized {
		t.Fatalf("within the penalty: %+v", out[0])
	}
	if out := batch(t, src, now+30*sec, false, op); !out[0].Allowed || out[0].Penalized {
		t.Fatalf("after the penalty: %+v", out[0])
	}
}
