package sourcetest

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// sec is one second in nanoseconds; the ERL arithmetic counts in whole
// seconds.
const sec = int64(time.Second)

// erlBase is base moved to 100 ms after a whole minute, so that ten-second
// marks and minute boundaries fall where the tests say.
const erlBase = base - base%(60*sec) + 100*int64(time.Millisecond)

// rateOp is an op of a rate-counter limit of rate hits per second over
// window seconds, boxing for box (exactly, from now: the sources do not
// round, the Limiter does) in its own box.
func rateOp(key string, window, rate, cost int64, mode bucket.Mode, now, box int64) bucket.Op {
	return bucket.Op{
		Key: key, Algorithm: bucket.RateCounter, Rate: ratecounter.Limit{Window: window, Rate: rate},
		Cost: cost, Mode: mode, Box: key, BoxUntil: now + box, Capacity: 1000,
	}
}

// boxed returns op with a penalty box of box ns from now.
func boxed(op bucket.Op, now, box int64) bucket.Op {
	op.Box, op.BoxUntil, op.Capacity = op.Key, now+box, 1000
	return op
}

// RunERL runs the rate-counter and penalty-box part of the suite alone
// (Run includes it): for a source that implements no other part, such as
// the vectors' model source.
func RunERL(t *testing.T, newSource Factory) {
	t.Run("RateCounterLimit", func(t *testing.T) { testRateCounterLimit(t, newSource) })
	t.Run("RateHitsCountInDeniedBatch", func(t *testing.T) { testRateHitsInDeniedBatch(t, newSource) })
	t.Run("PenaltyOnGCRA", func(t *testing.T) { testPenaltyOnGCRA(t, newSource) })
	t.Run("PenaltyOnWindowInBatch", func(t *testing.T) { testPenaltyOnWindow(t, newSource) })
	t.Run("Calls", func(t *testing.T) { testCalls(t, newSource) })
	t.Run("CallExpiry", func(t *testing.T) { testCallExpiry(t, newSource) })
	t.Run("ERLMatchesModel", func(t *testing.T) { testERLMatchesModel(t, newSource) })
	t.Run("NoOvershootCall", func(t *testing.T) { testNoOvershootCall(t, newSource) })
	t.Run("ClockBack", func(t *testing.T) { testClockBack(t, newSource) })
	t.Run("BoxListing", func(t *testing.T) { testBoxListing(t, newSource) })
}

func testRateCounterLimit(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	k := key(t, "192.0.2.1")
	now := erlBase + 3*sec
	op := func(cost int64, mode bucket.Mode) bucket.Op { return rateOp(k, 10, 10, cost, mode, now, 120*sec) }
	// 50 then 40 of 100 per ten seconds: allowed, 10 left, reset when the
	// newest second leaves the window (9.9 s).
	p.spend(now, op(50, bucket.CheckAndSpend))
	got := p.spend(now, op(40, bucket.CheckAndSpend))[0]
	if want := (bucket.Decision{Allowed: true, Remaining: 10, ResetIn: 9_900_000_000, Hits: 90}); got.Decision != want {
		t.Fatalf("spend 40 after 50: %+v, want %+v", got.Decision, want)
	}
	// A check of 11 would go above: it answers boxed but boxes nobody.
	if got := p.spend(now, op(11, bucket.CheckOnly))[0]; !got.Penalized || got.Allowed || got.RetryIn != 120*sec {
		t.Fatalf("check 11: %+v, want penalized for 120s", got.Decision)
	}
	if got := p.spend(now, op(10, bucket.CheckAndSpend))[0]; !got.Allowed || got.Remaining != 0 {
		t.Fatalf("spend 10 (to exactly the limit): %+v, want allowed with 0 left", got.Decision)
	}
	// The 101st hit goes above: boxed; a cost-0 spend stays boxed, never
	// shortening the expiry.
	if got := p.spend(now, op(1, bucket.CheckAndSpend))[0]; got.Allowed || !got.Penalized || got.RetryIn != 120*sec {
		t.Fatalf("spend the 101st hit: %+v, want boxed for 120s", got.Decision)
	}
	later := now + 59*sec
	if got := p.spend(later, rateOp(k, 10, 10, 0, bucket.CheckAndSpend, later, 120*sec))[0]; got.Allowed || got.RetryIn != 61*sec {
		t.Fatalf("cost 0 while boxed: %+v, want boxed for 61s more", got.Decision)
	}
	// Refund gives back hits of the current second only and lets nobody out.
	p.spend(later, rateOp(k, 10, 10, 1, bucket.CheckAndSpend, later, 120*sec))
	if got := p.refund(later, rateOp(k, 10, 10, 5, bucket.CheckAndSpend, later, 120*sec))[0]; !got.Allowed || !got.Penalized || got.Remaining != 0 {
		t.Fatalf("refund while boxed: %+v, want allowed (1 given back) and still penalized", got.Decision)
	}
	// Reset takes the entry out of the box and empties its counter.
	if n := p.reset(later, op(0, bucket.CheckAndSpend)); n != 1 {
		t.Fatalf("reset counted %d, want 1", n)
	}
	if got := p.spend(later, op(0, bucket.CheckOnly))[0]; !got.Allowed || got.Remaining != 100 {
		t.Fatalf("after reset: %+v, want allowed with 100 left", got.Decision)
	}
}

func testRateHitsInDeniedBatch(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	g, r := key(t, "gcra"), key(t, "rate")
	now := erlBase
	p.spend(now, tenPerSecond.op(g, 10, bucket.CheckAndSpend))
	// The GCRA op denies the batch; the rate op's hits count anyway, in
	// check-and-spend and spend-only alike.
	for _, mode := range []bucket.Mode{bucket.CheckAndSpend, bucket.SpendOnly} {
		out := p.spend(now, tenPerSecond.op(g, 1, bucket.CheckAndSpend), rateOp(r, 1, 10, 4, mode, now, 60*sec))
		if out[0].Allowed || !out[1].Allowed {
			t.Fatalf("mode %v: %+v, want the GCRA op denied and the rate op allowed", mode, out)
		}
	}
	if got := p.spend(now, rateOp(r, 1, 10, 0, bucket.CheckOnly, now, 60*sec))[0]; got.Remaining != 2 {
		t.Fatalf("after two denied batches of 4 hits: %d left, want 2", got.Remaining)
	}
	// A check-only rate op counts nothing.
	p.spend(now, rateOp(r, 1, 10, 2, bucket.CheckOnly, now, 60*sec))
	if got := p.spend(now, rateOp(r, 1, 10, 0, bucket.CheckOnly, now, 60*sec))[0]; got.Remaining != 2 {
		t.Fatalf("after a check-only op: %d left, want 2", got.Remaining)
	}
}

func testPenaltyOnGCRA(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	k := key(t, "eve")
	now := erlBase
	op := func(at, cost int64, mode bucket.Mode) bucket.Op {
		return boxed(threePerSec.op(k, cost, mode), at, 900*sec)
	}
	p.spend(now, op(now, 3, bucket.CheckAndSpend))
	// A check of the denied spend answers boxed and boxes nobody.
	if got := p.spend(now, op(now, 1, bucket.CheckOnly))[0]; got.Allowed || !got.Penalized || got.RetryIn != 900*sec {
		t.Fatalf("check 1: %+v, want penalized for 900s", got.Decision)
	}
	if got := p.spend(now, op(now, 0, bucket.CheckOnly))[0]; !got.Allowed || got.Penalized {
		t.Fatalf("check 0 after the check: %+v, want allowed, not penalized", got.Decision)
	}
	// The denied spend boxes the id for 15 minutes, exactly.
	if got := p.spend(now, op(now, 1, bucket.CheckAndSpend))[0]; got.Allowed || !got.Penalized || got.RetryIn != 900*sec || got.ResetIn != 900*sec {
		t.Fatalf("denied spend: %+v, want boxed for 900s", got.Decision)
	}
	// Later, with the bucket full again, the box still denies, untouched.
	at := now + 300*sec
	if got := p.spend(at, op(at, 1, bucket.CheckAndSpend))[0]; got.Allowed || got.RetryIn != 600*sec {
		t.Fatalf("spend while boxed: %+v, want boxed for 600s more", got.Decision)
	}
	if got := p.refund(at, op(at, 1, bucket.CheckAndSpend))[0]; got.Allowed || !got.Penalized || got.RetryIn != 600*sec {
		t.Fatalf("refund while boxed: %+v, want nothing given back, still boxed", got.Decision)
	}
	// A spend-only op never boxes: a second id, emptied and spent past it.
	k2 := key(t, "spend-only")
	p.spend(now, boxed(threePerSec.op(k2, 3, bucket.CheckAndSpend), now, 900*sec))
	if got := p.spend(now, boxed(threePerSec.op(k2, 1, bucket.SpendOnly), now, 900*sec))[0]; got.Penalized {
		t.Fatalf("spend-only past the burst: %+v, want no box", got.Decision)
	}
	// At the expiry the id is out; reset also lets it out at once.
	end := now + 900*sec
	if got := p.spend(end, op(end, 1, bucket.CheckAndSpend))[0]; !got.Allowed || got.Penalized || got.Remaining != 2 {
		t.Fatalf("at the box's expiry: %+v, want allowed with 2 left", got.Decision)
	}
	p.spend(end, op(end, 2, bucket.CheckAndSpend))
	p.spend(end, op(end, 1, bucket.CheckAndSpend))
	if n := p.reset(end, op(end, 0, bucket.CheckAndSpend)); n != 1 {
		t.Fatalf("reset counted %d, want 1", n)
	}
	if got := p.spend(end, op(end, 1, bucket.CheckAndSpend))[0]; !got.Allowed || got.Penalized {
		t.Fatalf("after reset: %+v, want allowed", got.Decision)
	}
}

func testPenaltyOnWindow(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	w, g := key(t, "window"), key(t, "gcra")
	now := erlBase
	win := func(cost int64) bucket.Op { return boxed(tenPerMinute.op(w, cost, bucket.CheckAndSpend), now, 90*sec) }
	p.spend(now, win(10))
	// The window denies and boxes its id although the batch is denied; the
	// GCRA op of the batch is not written.
	out := p.spend(now, win(1), tenPerSecond.op(g, 1, bucket.CheckAndSpend))
	if out[0].Allowed || !out[0].Penalized || !out[1].Allowed {
		t.Fatalf("batch: %+v, want the window op boxed, the GCRA op allowed", out)
	}
	if got := remaining(t, p.src, now, tenPerSecond, g); got != 10 {
		t.Fatalf("GCRA bucket after the denied batch: %d left, want 10", got)
	}
	if got := p.spend(now, win(0))[0]; !got.Penalized || got.RetryIn != 90*sec {
		t.Fatalf("window after the batch: %+v, want boxed for 90s", got.Decision)
	}
}

// call applies c on the source and on the model, and fails on a
// difference.
func (p *pair) call(now int64, c bucket.Call) bucket.CallResult {
	p.t.Helper()
	var got, want bucket.CallResult
	if err := p.src.Call(context.Background(), now, &c, &got); err != nil {
		p.t.Fatalf("Call: %v", err)
	}
	p.model.Call(now, &c, &want)
	if !sameCall(now, &c, &got, &want) {
		p.t.Fatalf("Call at %d of %+v:\n got %+v\nwant %+v", now, c, got, want)
	}
	return got
}

// sameCall reports whether two results of c at now answer alike: the same
// Above, Expires and Removed, and counters that read the same rates and
// buckets. A counter is compared by what it reads, not by its ring: one
// with no hit in its last minute may come back as kept or as forgotten.
func sameCall(now int64, c *bucket.Call, got, want *bucket.CallResult) bool {
	if got.Above != want.Above || got.Expires != want.Expires || got.Removed != want.Removed {
		return false
	}
	s := ratecounter.Second(now)
	for i := range c.Counters {
		g, w := &got.Counters[i], &want.Counters[i]
		for _, n := range []int64{1, 10, 60} {
			if g.Window(s, n) != w.Window(s, n) {
				return false
			}
		}
		for n := int64(10); n <= 60; n += 10 {
			if g.Bucket(s, n) != w.Bucket(s, n) {
				return false
			}
		}
	}
	return true
}

func checkRate(counter, box string, delta, window, limit, until int64) bucket.Call {
	return bucket.Call{
		Counters: []bucket.CounterCheck{{Key: counter, Delta: delta, Limit: ratecounter.Limit{Window: window, Rate: limit}, Capacity: 1000}},
		Box:      box, Action: bucket.BoxWhenAbove, Until: until, BoxCapacity: 1000,
	}
}

func boxCall(box string, action bucket.BoxAction, until int64) bucket.Call {
	return bucket.Call{Box: box, Action: action, Until: until, BoxCapacity: 1000}
}

func testCalls(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	c1, c2, b := key(t, "c1"), key(t, "c2"), key(t, "box")
	now := erlBase + 20*sec
	until := now + 600*sec
	// 99 then 1 hit: 10 per second over 10 s, not above; the 101st is.
	if r := p.call(now, checkRate(c1, b, 99, 10, 10, until)); r.Above[0] || r.Expires != 0 {
		t.Fatalf("99 hits: %+v, want not above, not boxed", r)
	}
	p.call(now, checkRate(c1, b, 1, 10, 10, until))
	if r := p.call(now, checkRate(c1, b, 1, 10, 10, until)); !r.Above[0] || r.Expires != until || r.Counters[0].Window(ratecounter.Second(now), 10) != 101 {
		t.Fatalf("the 101st hit: %+v, want above, boxed until %d", r, until)
	}
	// Automatic boxing never shortens; add replaces, also with a shorter
	// expiry; remove takes out, once.
	if r := p.call(now, checkRate(c1, b, 0, 10, 10, now+60*sec)); r.Expires != until {
		t.Fatalf("boxing again, shorter: expires %d, want %d kept", r.Expires, until)
	}
	if r := p.call(now, boxCall(b, bucket.BoxReplace, now+60*sec)); r.Expires != now+60*sec {
		t.Fatalf("add with a shorter ttl: expires %d, want %d", r.Expires, now+60*sec)
	}
	if r := p.call(now, boxCall(b, bucket.BoxRead, 0)); r.Expires != now+60*sec {
		t.Fatalf("has: expires %d, want %d", r.Expires, now+60*sec)
	}
	if r := p.call(now, boxCall(b, bucket.BoxRemove, 0)); !r.Removed {
		t.Fatalf("remove: %+v, want removed", r)
	}
	if r := p.call(now, boxCall(b, bucket.BoxRemove, 0)); r.Removed || r.Expires != 0 {
		t.Fatalf("remove again: %+v, want nothing removed", r)
	}
	// check_rates: two counters, one box, boxed once when either is above.
	two := bucket.Call{
		Counters: []bucket.CounterCheck{
			{Key: c2, Delta: 21, Limit: ratecounter.Limit{Window: 1, Rate: 20}, Capacity: 1000},
			{Key: c1, Delta: 1, Limit: ratecounter.Limit{Window: 60, Rate: 10}, Capacity: 1000},
		},
		Box: b, Action: bucket.BoxWhenAbove, Until: until, BoxCapacity: 1000,
	}
	if r := p.call(now, two); !r.Above[0] || r.Above[1] || r.Expires != until {
		t.Fatalf("check_rates: %+v, want the first above, boxed", r)
	}
	// An increment and a lookup (delta 0, no limit, no box).
	inc := bucket.Call{Counters: []bucket.CounterCheck{{Key: c2, Delta: 5, Capacity: 1000}}}
	if r := p.call(now+sec, inc); r.Counters[0].Bucket(ratecounter.Second(now+sec), 60) != 26 {
		t.Fatalf("increment: bucket.60s %d, want 26", r.Counters[0].Bucket(ratecounter.Second(now+sec), 60))
	}
	// Extend boxes whatever the counters say, never shortening.
	if r := p.call(now, boxCall(key(t, "other"), bucket.BoxExtend, until)); r.Expires != until {
		t.Fatalf("extend: expires %d, want %d", r.Expires, until)
	}
}

func testCallExpiry(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	c, b := key(t, "c"), key(t, "b")
	now := erlBase
	p.call(now, checkRate(c, b, 11, 1, 10, now+120*sec))
	// 59 s after its newest hit a counter still holds it; 60 s after, no
	// longer, and reads as empty.
	if r := p.call(now+59*sec, checkRate(c, "", 0, 60, 10, 0)); r.Counters[0].Window(ratecounter.Second(now+59*sec), 60) != 11 {
		t.Fatalf("59 s later: %+v, want 11 hits over 60 s", r.Counters[0])
	}
	if r := p.call(now+60*sec, checkRate(c, "", 0, 60, 10, 0)); r.Counters[0].Window(ratecounter.Second(now+60*sec), 60) != 0 {
		t.Fatalf("60 s later: %+v, want no hits", r.Counters[0])
	}
	// In the box until its expiry, out at it.
	if r := p.call(now+120*sec-1, boxCall(b, bucket.BoxRead, 0)); r.Expires != now+120*sec {
		t.Fatalf("just before the expiry: %+v, want boxed", r)
	}
	if r := p.call(now+120*sec, boxCall(b, bucket.BoxRead, 0)); r.Expires != 0 {
		t.Fatalf("at the expiry: %+v, want out of the box", r)
	}
}

// testERLMatchesModel drives a source and the model with random batches
// of rate-counter ops and GCRA and window ops with boxes, random ERL calls
// and resets over a few keys and minutes, and fails on the first
// difference.
func testERLMatchesModel(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	rng := rand.New(rand.NewPCG(7, 15))
	keys := []string{key(t, "a"), key(t, "b"), key(t, "c")}
	now := erlBase
	// randOp returns an op of a random algorithm on k's key of that
	// algorithm: a key keeps one algorithm, as a bucket key keeps its
	// limit (a source keeps each algorithm's states apart, and the model
	// one state per key).
	randOp := func(k string) bucket.Op {
		mode := bucket.Mode(rng.IntN(3))
		var op bucket.Op
		switch rng.IntN(3) {
		case 0:
			op = rateOp(k, []int64{1, 10, 60}[rng.IntN(3)], 10, rng.Int64N(25), mode, now, int64(rng.IntN(4)+1)*60*sec)
		case 1:
			op = boxed(threePerSec.op(k, rng.Int64N(4), mode), now, int64(rng.IntN(20)+1)*sec)
		default:
			op = boxed(tenPerMinute.op(k, rng.Int64N(4), mode), now, int64(rng.IntN(20)+1)*sec)
		}
		op.Key += ":" + op.Algorithm.String()
		op.Box = op.Key
		if op.Algorithm != bucket.RateCounter && mode != bucket.CheckAndSpend && rng.IntN(4) == 0 {
			// A shadow limit's op: it reads its box and boxes nobody.
			op.BoxUntil = 0
		}
		return op
	}
	algorithms := []string{"rate-counter", "gcra", "sliding-window"}
	for step := range 1500 {
		now += rng.Int64N(3 * sec)
		k := keys[rng.IntN(len(keys))] + ":" + string(rune('0'+step%3))
		switch rng.IntN(10) {
		case 0:
			p.reset(now, randOp(k))
		case 1, 2:
			p.refund(now, randOp(k))
		case 3, 4:
			until := now + int64(rng.IntN(3)+1)*60*sec
			// The counter of k's rate-counter ops, and the box of any of
			// k's ops.
			box := k + ":" + algorithms[rng.IntN(len(algorithms))]
			p.call(now, checkRate(k+":rate-counter", box, rng.Int64N(30), []int64{1, 10, 60}[rng.IntN(3)], 10, until))
		case 5:
			box := k + ":" + algorithms[rng.IntN(len(algorithms))]
			p.call(now, boxCall(box, bucket.BoxAction(rng.IntN(5)+1), now+int64(rng.IntN(120))*sec))
		default:
			a := randOp(k)
			b := randOp(keys[(step+1)%len(keys)] + ":x")
			p.spend(now, a, b)
		}
	}
}

// testNoOvershootCall has many goroutines add one hit each to one entry at
// the same instant, checking 10 per second over 60 s: exactly 600 hits are
// counted, none goes above, and the 601st boxes the entry.
func testNoOvershootCall(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	c, b := key(t, "c"), key(t, "b")
	now := erlBase
	var wg sync.WaitGroup
	errs := make(chan error, 600)
	var mu sync.Mutex
	above := 0
	for range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				call := checkRate(c, b, 1, 60, 10, now+60*sec)
				var res bucket.CallResult
				if err := src.Call(context.Background(), now, &call, &res); err != nil {
					errs <- err
					return
				}
				if res.Above[0] || res.Expires != 0 {
					mu.Lock()
					above++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Call: %v", err)
	}
	if above != 0 {
		t.Fatalf("%d of 600 hits went above 600 per minute", above)
	}
	call := checkRate(c, b, 1, 60, 10, now+60*sec)
	var res bucket.CallResult
	if err := src.Call(context.Background(), now, &call, &res); err != nil {
		t.Fatal(err)
	}
	if n := res.Counters[0].Window(ratecounter.Second(now), 60); n != 601 || !res.Above[0] || res.Expires != now+60*sec {
		t.Fatalf("the 601st hit: %d hits, %+v; want 601, above and boxed", n, res)
	}
}

// testClockBack moves the clock back more than a minute, as a test's fake
// clock may: the entry's later hits no longer count, and its new ones do,
// on every source alike.
func testClockBack(t *testing.T, newSource Factory) {
	p := newPair(t, newSource)
	c, b := key(t, "c"), key(t, "b")
	later := erlBase + 120*sec
	p.call(later, checkRate(c, b, 5, 60, 10, later+60*sec))
	if r := p.call(erlBase, checkRate(c, b, 700, 10, 10, erlBase+60*sec)); !r.Above[0] || r.Counters[0].Window(ratecounter.Second(erlBase), 10) != 700 {
		t.Fatalf("700 hits two minutes back: %+v, want them counted, above", r)
	}
}
