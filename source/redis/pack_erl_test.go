package redis

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
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
	// One round trip for the calls, and two after it for the box log of
	// the entry the rate sync stored (logBoxes: the entry, then the log's
	// lifetime).
	if n := rt.trips.Load() - before; n != 3 {
		t.Errorf("%d queued calls took %d round trips, want 1 and the box log's 2", len(calls), n)
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

// A folded rate batch (a check_rate in key format v1) that the script's
// fast path leaves to the general path is decided there as the fast path
// decides it: in packs where a folded GCRA batch on a key holding no TAT
// (which the fast path does not read) comes first, every reply to a
// series of check_rates, box entries included, is the one the same series
// gets on fresh keys in packs the fast path decides whole; and a series
// before 1970, which only the general path decides, answers what a source
// in key format v2, whose batches are never folded, answers. Both
// packings (M and P) are sent.
func TestFoldedRateBatchesInTheGeneralPath(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src, _ := coalesceSource(t, srv)
	ctx := context.Background()
	junk := src.Key("9:junk")
	if _, err := redistest.Do(srv.Addr(), "SET", junk, "not a number"); err != nil {
		t.Fatal(err)
	}
	v2, err := New(Options{Addrs: []string{srv.Addr()}, Namespace: "v2:", Groups: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	call := func(op bucket.Op, now int64) *queued {
		keys, boxes, err := src.keys([]bucket.Op{op}, now)
		if err != nil {
			t.Fatal(err)
		}
		return &queued{ctx: ctx, call: &scriptCall{op: opSpend, now: now, keys: keys, boxes: boxes, ops: []bucket.Op{op}}, done: make(chan struct{})}
	}
	rate := func(key string, now int64) *queued {
		op := boxedRate(key, 40)
		op.BoxUntil = now + int64(time.Minute)
		q := call(op, now)
		if !q.call.foldedRate() {
			t.Fatal("a check_rate is not folded")
		}
		return q
	}
	// replies sends calls as one pipeline (one packed call) and returns
	// each one's reply items; a call whose batch failed has none.
	replies := func(p *pipe, calls ...*queued) [][]any {
		p.send(calls)
		var out [][]any
		for _, c := range calls {
			<-c.done
			items, ok := c.reply.([]any)
			if c.err == nil && (!ok || len(items) != 2) {
				t.Fatalf("reply %#v; want two items", c.reply)
			}
			out = append(out, items)
		}
		return out
	}
	const before1970 = -3_000_000_000_123_456_789
	for _, packing := range []packing{packKeys, packInline} {
		p := testPipe(src, packing)
		for i := range 4 {
			now := coalesceNow + int64(i)*int64(time.Second)/4
			fast := replies(p, rate(fmt.Sprintf("1:fast%d", packing), now))[0]
			junked := call(testOp("9:junk", 1), now)
			both := replies(p, junked, rate(fmt.Sprintf("1:general%d", packing), now))
			if junked.err == nil || !strings.Contains(junked.err.Error(), "does not hold a TAT") {
				t.Fatalf("a GCRA spend of a key holding no TAT answered %#v, %v; want its error", junked.reply, junked.err)
			}
			if !reflect.DeepEqual(both[1], fast) {
				t.Errorf("packing %d, check_rate %d: the general path answers %q, the fast path %q", packing, i, both[1], fast)
			}
			then := before1970 + int64(i)*int64(time.Second)/4
			old := replies(p, rate(fmt.Sprintf("1:old%d", packing), then))[0]
			op := boxedRate(fmt.Sprintf("1:old%d", packing), 40)
			op.BoxUntil = then + int64(time.Minute)
			keys, boxes, err := v2.keys([]bucket.Op{op}, then)
			if err != nil {
				t.Fatal(err)
			}
			want, err := v2.eval(ctx, &scriptCall{op: opSpend, now: then, keys: keys, boxes: boxes, ops: []bucket.Op{op}})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(old, want) {
				t.Errorf("packing %d, check_rate %d before 1970: %q, key format v2 %q", packing, i, old, want)
			}
		}
		if fast := replies(p, rate(fmt.Sprintf("1:fast%d", packing), coalesceNow+int64(time.Second)))[0]; fast[0] != int64(0) {
			t.Errorf("packing %d: a fifth check_rate of 40 hits on a limit of 100 over 10 s answered %q, want denied", packing, fast)
		}
	}
}
