package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/source/syncpush"

	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// boxedRate is an op of a rate counter of 10 hits per second over 10 s,
// whose box keeps an id for a minute.
func boxedRate(key string, cost int64) bucket.Op {
	return bucket.Op{Key: key, Algorithm: bucket.RateCounter, Rate: ratecounter.Limit{Window: 10, Rate: 10}, Cost: cost,
		Box: key, BoxUntil: coalesceNow + int64(time.Minute)}
}

// boxedOp is testOp with a penalty box of a minute.
func boxedOp(key string, cost int64) bucket.Op {
	op := testOp(key, cost)
	op.Box, op.BoxUntil = key, coalesceNow+int64(time.Minute)
	return op
}

// Batches with rate counters and boxes packed into one script call beside
// others each get their own answer: their values (the box entry's name
// and expiry before an op's own) are skipped right when a batch fails, a
// failing batch writes nothing, and an ERL call and a rate sync in the
// same pipeline, which are not packed, answer too.
func TestCoalescedBoxedBatchesKeepTheirReplies(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src, rt := coalesceSource(t, srv)
	ctx := context.Background()
	junk := src.format.entryName("9:junk")
	if _, err := redistest.Do(srv.Addr(), "SET", junk, "not a number"); err != nil {
		t.Fatal(err)
	}
	for _, op := range []bucket.Op{boxedRate("1:r", 5), boxedOp("2:g", 99), boxedRate("1:d", 4)} {
		if err := src.Spend(ctx, coalesceNow, []bucket.Op{op}, make([]bucket.Outcome, 1)); err != nil {
			t.Fatal(err)
		}
	}
	rt.trips.Store(0)
	rt.batches.Store(0)
	resume := blockFlushers(t, srv, src, rt)
	answer := func(out []bucket.Outcome, err error) (any, error) {
		var r []string
		for _, o := range out {
			r = append(r, fmt.Sprintf("%v/%d/%v", o.Allowed, o.Remaining, o.Penalized))
		}
		return r, err
	}
	failed := func(err error) (any, error) {
		if err == nil {
			return nil, errors.New("succeeded")
		}
		return "failed", nil
	}
	calls := []struct {
		name string
		run  func() (any, error)
		want string
	}{
		{"rate", func() (any, error) {
			out := make([]bucket.Outcome, 1)
			return answer(out, src.Spend(ctx, coalesceNow, []bucket.Op{boxedRate("1:r", 3)}, out))
		}, "[true/92/false]"},
		{"failing boxed", func() (any, error) {
			return failed(src.Spend(ctx, coalesceNow, []bucket.Op{boxedRate("1:f", 4), boxedOp("9:junk", 1)}, make([]bucket.Outcome, 2)))
		}, "failed"},
		{"boxed GCRA denied", func() (any, error) {
			out := make([]bucket.Outcome, 2)
			return answer(out, src.Spend(ctx, coalesceNow, []bucket.Op{boxedOp("2:g", 2), testOp("3:plain", 1)}, out))
		}, "[false/0/true true/99/false]"},
		{"failing refund", func() (any, error) {
			return failed(src.Refund(ctx, coalesceNow, []bucket.Op{boxedRate("1:r", 1), boxedOp("9:junk", 1)}, make([]bucket.Outcome, 2)))
		}, "failed"},
		{"failing reset", func() (any, error) {
			_, err := src.Reset(ctx, coalesceNow, []bucket.Op{boxedRate("1:d", 0), boxedOp("9:junk", 0)})
			return failed(err)
		}, "failed"},
		{"reset", func() (any, error) {
			return src.Reset(ctx, coalesceNow, []bucket.Op{boxedRate("1:none", 0), boxedOp("2:none", 0)})
		}, "0"},
		{"refund", func() (any, error) {
			out := make([]bucket.Outcome, 1)
			return answer(out, src.Refund(ctx, coalesceNow, []bucket.Op{boxedRate("1:r2", 1)}, out))
		}, "[false/100/false]"},
		{"call", func() (any, error) {
			c := bucket.Call{Counters: []bucket.CounterCheck{{Key: "1:c", Delta: 2}}, Box: "1:c", Action: bucket.BoxReplace, Until: coalesceNow + 1}
			var res bucket.CallResult
			err := src.Call(ctx, coalesceNow, &c, &res)
			return fmt.Sprint(res.Counters[0].At(ratecounter.Second(coalesceNow)), res.Expires == coalesceNow+1), err
		}, "2 true"},
		{"rate sync", func() (any, error) {
			p := []syncpush.Rate{{Key: "1:s", Box: "1:s", BoxExpires: coalesceNow + 5}}
			p[0].Hits.Add(ratecounter.Second(coalesceNow), 7)
			err := src.SyncRates(ctx, coalesceNow, p)
			return fmt.Sprint(p[0].Total.At(ratecounter.Second(coalesceNow)), p[0].TotalBox == coalesceNow+5), err
		}, "7 true"},
		{"one key after", func() (any, error) {
			out := make([]bucket.Outcome, 1)
			return answer(out, src.Spend(ctx, coalesceNow, []bucket.Op{testOp("4:z", 1)}, out))
		}, "[true/99/false]"},
	}
	got := make([]string, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			v, err := c.run()
			got[i] = fmt.Sprint(v)
			if err != nil {
				got[i] = "error: " + err.Error()
			}
		})
	}
	waitFor(t, "all calls are queued", func() bool { q, _ := src.single.state(); return q == len(calls) })
	before := rt.trips.Load()
	resume()
	wg.Wait()
	for i, c := range calls {
		if got[i] != c.want {
			t.Errorf("%s: %s, want %s", c.name, got[i], c.want)
		}
	}
	if n := rt.trips.Load() - before; n != 1 {
		t.Errorf("%d queued calls took %d round trips, want 1", len(calls), n)
	}
	// The failing batches wrote nothing: no hits, the refund took none, the
	// reset deleted nothing.
	out := make([]bucket.Outcome, 1)
	for key, left := range map[string]int64{"1:f": 100, "1:r": 92, "1:d": 96} {
		if err := src.Spend(ctx, coalesceNow, []bucket.Op{boxedRate(key, 0)}, out); err != nil || out[0].Remaining != left {
			t.Errorf("%s after the failing batches: %+v, %v; want %d left", key, out[0], err, left)
		}
	}
}
