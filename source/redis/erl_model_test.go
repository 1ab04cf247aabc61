package redis_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/source/redis"
	"github.com/limiter-dev/limiter/source/sourcetest"
)

// erlLimit makes the op of one limit of the randomized test, at now.
type erlLimit struct {
	enum string
	op   func(key string, cost int64, now int64) bucket.Op
	max  int64 // the largest cost drawn
}

// erlLimits mix rate counters of every window, GCRA and window limits
// with a penalty box, and GCRA and window limits without one.
var erlLimits = []erlLimit{
	{"130", func(k string, c, now int64) bucket.Op { return rateOp(k, 10, 3, c, now+secs(120)) }, 12},
	{"131", func(k string, c, now int64) bucket.Op { return rateOp(k, 1, 2, c, now+secs(60)) }, 4},
	{"132", func(k string, c, now int64) bucket.Op { return rateOp(k, 60, 1, c, now+secs(600)) }, 20},
	{"140", func(k string, c, now int64) bucket.Op {
		return withBox(bucket.Op{Key: k, EmissionInterval: int64(100 * time.Millisecond), BurstOffset: int64(time.Second), Cost: c}, now+secs(30))
	}, 10},
	{"141", func(k string, c, now int64) bucket.Op { return withBox(windowOp(k, false, 5, 1000, c), now+secs(5)) }, 5},
	{"142", func(k string, c, now int64) bucket.Op { return withBox(windowOp(k, true, 4, 2000, c), now+secs(3)) }, 4},
	{"150", func(k string, c, now int64) bucket.Op {
		return bucket.Op{Key: k, EmissionInterval: int64(200 * time.Millisecond), BurstOffset: int64(time.Second), Cost: c}
	}, 5},
	{"151", func(k string, c, now int64) bucket.Op { return windowOp(k, true, 5, 1000, c) }, 5},
}

// erlIDs are the ids of the randomized test: on a cluster, their keys
// fall into several slots, so batches of several ids are split by slot.
var erlIDs = []string{"alice", "bob", "carol", "2001:db8::7"}

// TestBoxesAndRatesMatchModel drives the source and the reference model
// with the same random batches (spends, checks, refunds, resets) mixing
// rate counters, limits with a penalty box and limits without one, in
// every mode, and random ERL calls on the same counters and boxes, and
// demands identical outcomes, on every backend. Denied batches are common,
// so the writes a denied batch makes (hits, box entries) are exercised,
// and so, on a cluster, are batches denied in a later slot.
func TestBoxesAndRatesMatchModel(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			opts.ExpiryMargin = 24 * time.Hour // the test's clock runs far ahead of Redis's
			src := newSource(t, opts)
			seen := testBoxesAndRates(t, src, 1200)
			t.Logf("outcomes seen: %+v", seen)
		})
	}
}

func testBoxesAndRates(t *testing.T, src *redis.Source, steps int) (seen struct{ boxedDenied, hitsDenied, penalized int }) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 5))
	model := sourcetest.Model{}
	at := now
	// seen counts the outcomes the test is for: box entries and hits
	// written by denied batches, and GCRA or window ops answered by their
	// box.
	for step := range steps {
		at += rng.Int64N(int64(300 * time.Millisecond))
		switch rng.IntN(40) {
		case 0:
			at += secs(30)
		case 1:
			at += secs(70)
		}
		if rng.IntN(8) == 0 {
			c := randomCall(rng, at)
			var got, want bucket.CallResult
			if err := src.Call(ctx, at, &c, &got); err != nil {
				t.Fatalf("step %d: Call: %v", step, err)
			}
			model.Call(at, &c, &want)
			s := ratecounter.Second(at)
			for i := range c.Counters {
				if !sameCounts(got.Counters[i], want.Counters[i], s) || got.Above[i] != want.Above[i] {
					t.Fatalf("step %d: call %+v at %d: counter %d %+v above %v, model %+v above %v",
						step, c, at, i, got.Counters[i], got.Above[i], want.Counters[i], want.Above[i])
				}
			}
			if got.Expires != want.Expires || got.Removed != want.Removed {
				t.Fatalf("step %d: call %+v: expires %d removed %v, model %d %v", step, c, got.Expires, got.Removed, want.Expires, want.Removed)
			}
			continue
		}
		n := 1 + rng.IntN(3)
		ops := make([]bucket.Op, 0, n)
		taken := map[string]bool{}
		for len(ops) < n {
			l := erlLimits[rng.IntN(len(erlLimits))]
			key := l.enum + ":" + erlIDs[rng.IntN(len(erlIDs))]
			if taken[key] {
				continue
			}
			taken[key] = true
			ops = append(ops, withMode(l.op(key, rng.Int64N(l.max+1), at), bucket.Mode(rng.IntN(3))))
		}
		if rng.IntN(30) == 0 {
			got, err := src.Reset(ctx, at, ops)
			if err != nil {
				t.Fatalf("step %d: Reset: %v", step, err)
			}
			if want := model.Reset(at, ops); got != want {
				t.Fatalf("step %d: Reset of %+v counted %d, the model %d", step, ops, got, want)
			}
			continue
		}
		isRefund := rng.IntN(5) == 0
		got := make([]bucket.Outcome, len(ops))
		var err error
		if isRefund {
			err = src.Refund(ctx, at, ops, got)
		} else {
			err = src.Spend(ctx, at, ops, got)
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		want := model.Apply(at, ops, isRefund)
		denied := false
		for i := range ops {
			if normal(got[i], at) != normal(want[i], at) {
				t.Fatalf("step %d (refund=%v) op %d %+v at %d:\n got %+v\nwant %+v", step, isRefund, i, ops[i], at, got[i], want[i])
			}
			denied = denied || (ops[i].Mode.Counts() && !got[i].Allowed)
		}
		for i, o := range got {
			switch {
			case isRefund:
			case o.WriteBox && denied:
				seen.boxedDenied++
			case o.Write && denied && ops[i].Algorithm == bucket.RateCounter:
				seen.hitsDenied++
			case o.Penalized && ops[i].Algorithm != bucket.RateCounter:
				seen.penalized++
			}
		}
	}
	// The random batches reach every case that matters.
	if seen.boxedDenied < 20 || seen.hitsDenied < 20 || seen.penalized < 20 {
		t.Errorf("too few interesting outcomes: %+v", seen)
	}
	// What is stored is what the model holds.
	s := ratecounter.Second(at)
	for _, l := range erlLimits[:3] {
		for _, id := range erlIDs {
			key := l.enum + ":" + id
			got := lookup(t, src, at, key, key)
			var want bucket.CallResult
			model.Call(at, &bucket.Call{Counters: []bucket.CounterCheck{{Key: key}}, Box: key, Action: bucket.BoxRead}, &want)
			if !sameCounts(got.Counters[0], want.Counters[0], s) || got.Expires != want.Expires {
				t.Errorf("%s at the end: %+v, model %+v", key, got, want)
			}
		}
	}
	return seen
}

// randomCall is an ERL call on the test's counters and boxes: a
// check_rate or check_rates, an increment, a lookup, or a box call, of
// one id (now and then the box of another, which on a cluster may be in
// another slot).
func randomCall(rng *rand.Rand, at int64) bucket.Call {
	id := erlIDs[rng.IntN(len(erlIDs))]
	boxID := id
	if rng.IntN(6) == 0 {
		boxID = erlIDs[rng.IntN(len(erlIDs))]
	}
	box := []string{"130", "131", "140", "141"}[rng.IntN(4)] + ":" + boxID
	until := at + secs(60*(1+rng.Int64N(3)))
	counter := func(enum string) bucket.CounterCheck {
		return bucket.CounterCheck{Key: enum + ":" + id, Delta: rng.Int64N(6),
			Limit: ratecounter.Limit{Window: []int64{1, 10, 60}[rng.IntN(3)], Rate: 1 + rng.Int64N(3)}}
	}
	switch rng.IntN(6) {
	case 0: // check_rates
		return bucket.Call{Counters: []bucket.CounterCheck{counter("130"), counter("132")}, Box: box, Action: bucket.BoxWhenAbove, Until: until}
	case 1: // increment
		c := counter("131")
		c.Limit = ratecounter.Limit{}
		return bucket.Call{Counters: []bucket.CounterCheck{c}}
	case 2: // lookup
		c := counter("130")
		c.Delta, c.Limit = 0, ratecounter.Limit{}
		return bucket.Call{Counters: []bucket.CounterCheck{c}}
	case 3: // box add, has, remove
		action := []bucket.BoxAction{bucket.BoxReplace, bucket.BoxRead, bucket.BoxRemove, bucket.BoxExtend}[rng.IntN(4)]
		return bucket.Call{Box: box, Action: action, Until: until}
	}
	return bucket.Call{Counters: []bucket.CounterCheck{counter([]string{"130", "131", "132"}[rng.IntN(3)])}, Box: box, Action: bucket.BoxWhenAbove, Until: until}
}

// A call naming the same counter twice or three counters, a delta, a
// window or a box action out of range is refused before anything is sent.
func TestCallRefusesInvalidCalls(t *testing.T) {
	src := newSource(t, standalone(t))
	bad := []bucket.Call{
		{Counters: []bucket.CounterCheck{{Key: "130:a"}, {Key: "130:a"}}},
		{Counters: []bucket.CounterCheck{{Key: "130:a", Delta: -1}}},
		{Counters: []bucket.CounterCheck{{Key: "130:a", Limit: ratecounter.Limit{Window: 7, Rate: 1}}}},
		{Counters: []bucket.CounterCheck{{Key: "130:a"}, {Key: "131:a"}, {Key: "132:a"}}},
		{Box: "130:a", Action: bucket.BoxExtend + 1},
	}
	for _, c := range bad {
		var res bucket.CallResult
		if err := src.Call(context.Background(), now, &c, &res); err == nil {
			t.Errorf("Call %+v: no error", c)
		} else if !isInvalid(err) {
			t.Errorf("Call %+v: %v, want ErrInvalidOp and ErrNotApplied", c, err)
		}
	}
}

// isInvalid reports an error that refuses an op before anything was sent.
func isInvalid(err error) bool {
	return errors.Is(err, redis.ErrInvalidOp) && errors.Is(err, once.ErrNotApplied)
}
