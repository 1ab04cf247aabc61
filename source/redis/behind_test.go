package redis_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/source/sourcetest"
)

// Processes of one deployment pass their own clocks, so a rate counter
// may take hits from a process whose clock is behind the one that wrote
// its newest second: the hits go to that earlier second, the seconds
// between it and the oldest the counter held are counted as zeros, and a
// second a minute or more behind starts the counter afresh, as
// ratecounter.Counter.Add does. Each way the script adds hits (a one-key
// spend, in format v1 on its fast path; an ERL call; a spend of two
// counters, on its general path) is held to the model at every distance
// behind up to beyond a minute, and so is what is stored.
func TestRateCountersTakeHitsFromABehindClock(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			src := newSource(t, b.opts(t))
			for _, behind := range []int64{1, 2, 3, 30, 57, 58, 59, 60, 61, 90} {
				key := fmt.Sprintf("130:behind%d", behind)
				other := fmt.Sprintf("131:behind%d", behind)
				model := sourcetest.Model{}
				spend := func(at int64, ops ...bucket.Op) {
					t.Helper()
					got := make([]bucket.Outcome, len(ops))
					if err := src.Spend(ctx, at, ops, got); err != nil {
						t.Fatalf("%d s behind: spend: %v", behind, err)
					}
					want := model.Apply(at, ops, false)
					for i := range ops {
						if normal(got[i], at) != normal(want[i], at) {
							t.Fatalf("%d s behind: spend %+v at %d:\n got %+v\nwant %+v", behind, ops[i], at, got[i], want[i])
						}
					}
				}
				increment := func(at, delta int64) {
					t.Helper()
					c := bucket.Call{Counters: []bucket.CounterCheck{{Key: key, Delta: delta}}}
					got := call(t, src, at, c)
					var want bucket.CallResult
					model.Call(at, &c, &want)
					if !sameCounts(got.Counters[0], want.Counters[0], ratecounter.Second(at)) {
						t.Fatalf("%d s behind: increment at %d: %+v, model %+v", behind, at, got.Counters[0], want.Counters[0])
					}
				}
				until := now + secs(600)
				late := now - secs(behind)
				// Hits at the newest second, and at the second before it, so
				// that the counter holds two seconds before the late ones.
				spend(now-secs(1), rateOp(key, 60, 1000, 3, until))
				spend(now, rateOp(key, 60, 1000, 4, until))
				spend(late, rateOp(key, 60, 1000, 2, until))
				increment(late, 5)
				spend(late-secs(1), rateOp(key, 60, 1000, 6, until), rateOp(other, 60, 1000, 1, until))
				increment(now, 7)
				for _, at := range []int64{now, late, late - secs(1)} {
					got := lookup(t, src, at, key, key)
					var want bucket.CallResult
					model.Call(at, &bucket.Call{Counters: []bucket.CounterCheck{{Key: key}}, Box: key, Action: bucket.BoxRead}, &want)
					if !sameCounts(got.Counters[0], want.Counters[0], ratecounter.Second(at)) {
						t.Errorf("%d s behind: stored at %d: %+v, model %+v", behind, at, got.Counters[0], want.Counters[0])
					}
				}
			}
		})
	}
}
