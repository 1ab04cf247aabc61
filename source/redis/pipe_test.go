package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/source/syncpush"

	"github.com/jmhodges/clock"
	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// These tests look inside the coalescer (its queue, and every pipeline the
// client sends), so they live in package redis. Redis is real throughout;
// a paused server (SIGSTOP) holds pipelines in flight, so that later calls
// queue up deterministically, without sleeping.

const coalesceNow int64 = 1_790_000_000_123_456_789

// roundTrips counts the round trips a client makes with script calls
// (a pipeline, or a call sent alone by its caller) and the batches they
// carry. Every batch in these tests has one key, so a command's key count
// is its number of batches, packed or not.
type roundTrips struct {
	trips, batches, loads atomic.Int64
	scripts               atomic.Int64 // script commands
	alone                 atomic.Int64 // script commands sent outside a pipeline
}

func (r *roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }

// count records the batches of one script command.
func (r *roundTrips) count(c goredis.Cmder) {
	if args := c.Args(); len(args) > 2 && (c.Name() == "evalsha" || c.Name() == "eval") {
		r.scripts.Add(1)
		if n, ok := args[2].(int); ok {
			r.batches.Add(int64(n))
		}
	}
}

func (r *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		switch args := cmd.Args(); {
		case cmd.Name() == "evalsha" || cmd.Name() == "eval":
			r.trips.Add(1)
			r.alone.Add(1)
			r.count(cmd)
		case cmd.Name() == "script" && len(args) > 1 && fmt.Sprint(args[1]) == "load":
			r.loads.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		r.trips.Add(1)
		for _, c := range cmds {
			r.count(c)
		}
		return next(ctx, cmds)
	}
}

// coalesceSource opens a source on srv whose read timeout outlasts a
// paused server, with a hook counting its round trips.
func coalesceSource(t *testing.T, srv *redistest.Server) (*Source, *roundTrips) {
	t.Helper()
	src, err := New(Options{
		Addrs:     []string{srv.Addr()},
		Namespace: "coalesce:",
		// Pipelines must wait out a paused server rather than time out.
		DialTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	// Load the script and open a connection before counting.
	if err := src.Spend(context.Background(), coalesceNow, []bucket.Op{testOp("warm", 1)}, make([]bucket.Outcome, 1)); err != nil {
		t.Fatal(err)
	}
	rt := &roundTrips{}
	src.client.(*goredis.Client).AddHook(rt)
	return src, rt
}

// testOp is an op on a bucket of burst 100 refilling over an hour.
func testOp(key string, cost int64) bucket.Op {
	ei := int64(36 * time.Second)
	return bucket.Op{Key: key, EmissionInterval: ei, BurstOffset: 100 * ei, Cost: cost}
}

// testPipe is a pipe to src's standalone Redis that packs as packing says.
func testPipe(src *Source, packing packing) *pipe {
	return &pipe{node: src.client.(*goredis.Client), script: src.script, wire: src.wire, packing: packing, timeout: time.Second}
}

// spendCall is a queued one-key spend (or check, as op says) of op at
// coalesceNow.
func spendCall(ctx context.Context, src *Source, op operation, spend bucket.Op) *queued {
	c := &scriptCall{op: op, now: coalesceNow, keys: []string{src.Key(spend.Key)}, ops: []bucket.Op{spend}}
	return &queued{ctx: ctx, call: c, done: make(chan struct{})}
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond) // polling, not waiting for an effect
	}
}

func (p *pipe) state() (waiting, flushers int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue), p.flushers
}

// Many concurrent callers share few round trips, and each gets its own
// answer (computed under its own "now" and cost). The script cache is
// flushed first, so the first calls meet NOSCRIPT (which ones depends on
// timing; TestCoalescedPipelineReloadsScript covers pipelines for sure).
func TestCoalescedCallsShareRoundTrips(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src, rt := coalesceSource(t, srv)
	if _, err := redistest.Do(srv.Addr(), "SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	const callers = 200
	srv.Pause(t)
	paused := true
	defer func() {
		if paused {
			srv.Resume(t)
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, callers)
	outs := make([][]bucket.Outcome, callers)
	for i := range callers {
		wg.Go(func() {
			outs[i] = make([]bucket.Outcome, 1)
			op := testOp(fmt.Sprintf("share:%d", i), int64(1+i%50))
			errs[i] = src.Spend(context.Background(), coalesceNow+int64(i), []bucket.Op{op}, outs[i])
		})
	}
	// Every call is either sent (in a pipeline stuck on the paused
	// server) or queued behind them.
	waitFor(t, "all calls are sent or queued", func() bool {
		q, _ := src.single.state()
		return int64(q)+rt.batches.Load() == callers
	})
	srv.Resume(t)
	paused = false
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		cost := int64(1 + i%50)
		want := coalesceNow + int64(i) + cost*int64(36*time.Second)
		if o := outs[i][0]; !o.Allowed || o.Remaining != 100-cost || o.New.TAT != want {
			t.Errorf("caller %d got %+v, want allowed, %d remaining, new TAT %d", i, o, 100-cost, want)
		}
	}
	// Stuck on the paused server: at most maxFlushers calls sent alone by
	// their callers, or pipelines; behind them the queue, in pipelines of
	// maxPipeline. Each of these may be sent twice (NOSCRIPT).
	if n := rt.trips.Load(); n > 2*(maxFlushers+callers/maxPipeline+1) {
		t.Errorf("%d callers took %d round trips", callers, n)
	} else {
		t.Logf("%d callers, %d round trips", callers, n)
	}
	// Each bucket was written exactly once.
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer c.Close()
	for i := range callers {
		v, err := c.Get(context.Background(), src.Key(fmt.Sprintf("share:%d", i))).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := outs[i][0].New.TAT; v != strconv.FormatInt(want, 10) {
			t.Fatalf("bucket %d holds %s, want %d", i, v, want)
		}
	}
}

// A pipeline whose calls meet NOSCRIPT loads the script and sends them
// again, packed (standalone) or one command per call (as on a cluster).
func TestCoalescedPipelineReloadsScript(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src, rt := coalesceSource(t, srv)
	for _, pack := range []packing{packKeys, packInline, packNone} {
		if _, err := redistest.Do(srv.Addr(), "SCRIPT", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		p := testPipe(src, pack)
		var calls []*queued
		for i := range 5 {
			op := testOp(fmt.Sprintf("reload:%v:%d", pack, i), int64(i+1))
			calls = append(calls, spendCall(context.Background(), src, opSpend, op))
		}
		loads := rt.loads.Load()
		p.send(calls)
		for i, c := range calls {
			<-c.done
			if c.err != nil {
				t.Fatalf("pack=%v: call %d: %v", pack, i, c.err)
			}
			if r, err := decode(c.call, c.reply, make([]bucket.State, 1)); err != nil || !r.allowed {
				t.Fatalf("pack=%v: call %d: reply %v: allowed=%v, %v", pack, i, c.reply, r.allowed, err)
			}
		}
		if rt.loads.Load() != loads+1 {
			t.Errorf("pack=%v: %d script loads, want 1", pack, rt.loads.Load()-loads)
		}
	}
}

// blockFlushers pauses srv and parks maxFlushers calls in flight on it, so
// that the next calls stay queued. It returns a function that resumes the
// server and waits for the parked calls.
func blockFlushers(t *testing.T, srv *redistest.Server, src *Source, rt *roundTrips) func() {
	t.Helper()
	srv.Pause(t)
	var wg sync.WaitGroup
	for i := range maxFlushers {
		wg.Go(func() {
			_ = src.Spend(context.Background(), coalesceNow, []bucket.Op{testOp(fmt.Sprintf("block:%d", i), 1)}, make([]bucket.Outcome, 1))
		})
		waitFor(t, "the blocking call is in flight", func() bool { return rt.batches.Load() == int64(i+1) })
	}
	waitFor(t, "every flusher is busy", func() bool {
		q, f := src.single.state()
		return q == 0 && f == maxFlushers
	})
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			srv.Resume(t)
		}
	})
	return func() {
		srv.Resume(t)
		resumed = true
		wg.Wait()
	}
}

// A caller whose context ends while its call waits gets the context's
// error at once, and its call is never sent: the bucket is untouched.
func TestCoalescedCallerCancelled(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src, rt := coalesceSource(t, srv)
	resume := blockFlushers(t, srv, src, rt)

	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() {
		cancelled <- src.Spend(ctx, coalesceNow, []bucket.Op{testOp("cancelled", 1)}, make([]bucket.Outcome, 1))
	}()
	waitFor(t, "the call is queued", func() bool { q, _ := src.single.state(); return q == 1 })
	start := time.Now()
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller got %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a cancelled caller waited %v", took)
	}
	start = time.Now()
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	err := src.Spend(dctx, coalesceNow, []bucket.Op{testOp("expired", 1)}, make([]bucket.Outcome, 1))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("caller past its deadline got %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a caller with a 50ms deadline waited %v", took)
	}
	resume()
	for _, b := range []string{"cancelled", "expired"} {
		out := make([]bucket.Outcome, 1)
		if err := src.Spend(context.Background(), coalesceNow, []bucket.Op{testOp(b, 0)}, out); err != nil {
			t.Fatal(err)
		}
		if out[0].Remaining != 100 {
			t.Errorf("bucket %q has %d remaining: a call whose caller left was sent", b, out[0].Remaining)
		}
	}
}

// Batches packed into one script call fail alone: a key holding no TAT
// fails its own batch, and the batches packed with it are decided.
func TestCoalescedErrorsStayPerBatch(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src, rt := coalesceSource(t, srv)
	if _, err := redistest.Do(srv.Addr(), "SET", src.Key("junk"), "not a number"); err != nil {
		t.Fatal(err)
	}
	resume := blockFlushers(t, srv, src, rt)
	const callers = 10
	var wg sync.WaitGroup
	errs := make([]error, callers)
	outs := make([][]bucket.Outcome, callers)
	for i := range callers {
		key := fmt.Sprintf("ok:%d", i)
		if i == callers/2 {
			key = "junk"
		}
		wg.Go(func() {
			outs[i] = make([]bucket.Outcome, 1)
			errs[i] = src.Spend(context.Background(), coalesceNow, []bucket.Op{testOp(key, 2)}, outs[i])
		})
	}
	waitFor(t, "all calls are queued", func() bool { q, _ := src.single.state(); return q == callers })
	before := rt.trips.Load()
	resume()
	wg.Wait()
	for i := range callers {
		switch {
		case i == callers/2 && errs[i] == nil:
			t.Errorf("the batch on a key holding no TAT succeeded: %+v", outs[i])
		case i != callers/2 && errs[i] != nil:
			t.Errorf("caller %d failed with a packed neighbour's error: %v", i, errs[i])
		case i != callers/2 && outs[i][0].Remaining != 98:
			t.Errorf("caller %d: %+v, want 98 remaining", i, outs[i][0])
		}
	}
	if n := rt.trips.Load() - before; n != 1 {
		t.Errorf("%d queued calls took %d round trips, want 1", callers, n)
	}
}

// winOp is an op on a sliding window of 10 hits a minute (a fixed one when
// fixed is set).
func winOp(key string, fixed bool, cost int64) bucket.Op {
	alg := bucket.SlidingWindow
	if fixed {
		alg = bucket.FixedWindow
	}
	return bucket.Op{Key: key, Algorithm: alg, Window: window.Limit{Count: 10, Period: 60_000, Fixed: fixed}, Cost: cost}
}

// A packed call's reply is one flat list, each batch taking as many items
// as its shape needs: batches of one and of three keys, a refund, a reset,
// failing two-key batches (the failing key under a GCRA op and under a
// window op, whose values the script must skip), window spends, a batch
// mixing GCRA and windows, a window refund and reset, a sync, and Edge
// Rate Limiting calls (one that boxes, one on a counter holding junk),
// packed into one script call, each get their own answer, and the failing
// batches write nothing.
func TestCoalescedMixedBatchesKeepTheirReplies(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src, rt := coalesceSource(t, srv)
	ctx := context.Background()
	if _, err := redistest.Do(srv.Addr(), "SET", src.Key("junk"), "not a number"); err != nil {
		t.Fatal(err)
	}
	for _, op := range []bucket.Op{testOp("r1", 1), testOp("f1", 5), testOp("f3", 5), winOp("wr", false, 5), winOp("wd", true, 1)} {
		if err := src.Spend(ctx, coalesceNow, []bucket.Op{op}, make([]bucket.Outcome, 1)); err != nil {
			t.Fatal(err)
		}
	}
	rt.trips.Store(0) // blockFlushers counts from here
	rt.batches.Store(0)
	resume := blockFlushers(t, srv, src, rt)
	remaining := func(out []bucket.Outcome) []int64 {
		var r []int64
		for _, o := range out {
			r = append(r, o.Remaining)
		}
		return r
	}
	calls := []struct {
		name string
		run  func() (any, error)
		want string
	}{
		{"one key", func() (any, error) {
			out := make([]bucket.Outcome, 1)
			err := src.Spend(ctx, coalesceNow, []bucket.Op{testOp("a", 2)}, out)
			return remaining(out), err
		}, "[98]"},
		{"three keys", func() (any, error) {
			out := make([]bucket.Outcome, 3)
			err := src.Spend(ctx, coalesceNow, []bucket.Op{testOp("b1", 1), testOp("b2", 2), testOp("b3", 3)}, out)
			return remaining(out), err
		}, "[99 98 97]"},
		{"failing", func() (any, error) {
			out := make([]bucket.Outcome, 2)
			err := src.Spend(ctx, coalesceNow, []bucket.Op{testOp("c", 1), testOp("junk", 1)}, out)
			if err == nil {
				return nil, errors.New("succeeded")
			}
			return "failed", nil
		}, "failed"},
		{"reset", func() (any, error) {
			return src.Reset(ctx, coalesceNow, ResetOps("r1", "r2"))
		}, "1"},
		{"refund", func() (any, error) {
			out := make([]bucket.Outcome, 2)
			err := src.Refund(ctx, coalesceNow, []bucket.Op{testOp("f1", 2), testOp("f2", 2)}, out)
			return remaining(out), err
		}, "[97 100]"},
		{"window", func() (any, error) {
			out := make([]bucket.Outcome, 1)
			err := src.Spend(ctx, coalesceNow, []bucket.Op{winOp("w", false, 3)}, out)
			return remaining(out), err
		}, "[7]"},
		{"failing window", func() (any, error) {
			out := make([]bucket.Outcome, 3)
			err := src.Spend(ctx, coalesceNow, []bucket.Op{winOp("d", false, 1), winOp("junk", true, 1), testOp("d2", 1)}, out)
			if err == nil {
				return nil, errors.New("succeeded")
			}
			return "failed", nil
		}, "failed"},
		{"mixed", func() (any, error) {
			out := make([]bucket.Outcome, 3)
			err := src.Spend(ctx, coalesceNow, []bucket.Op{testOp("m1", 1), winOp("m2", true, 4), winOp("m3", false, 10)}, out)
			return remaining(out), err
		}, "[99 6 0]"},
		{"window refund", func() (any, error) {
			out := make([]bucket.Outcome, 2)
			err := src.Refund(ctx, coalesceNow, []bucket.Op{winOp("wr", false, 2), testOp("f3", 1)}, out)
			return remaining(out), err
		}, "[7 96]"},
		{"window reset", func() (any, error) {
			return src.Reset(ctx, coalesceNow, []bucket.Op{winOp("wd", true, 0), winOp("wx", false, 0)})
		}, "1"},
		{"sync", func() (any, error) {
			p := []syncpush.Window{{Key: "ws", Period: 60_000, Start: coalesceNow / 1e6 / 60_000 * 60_000, Hits: 4, PrevHits: 2}}
			err := src.SyncWindows(ctx, coalesceNow, p)
			return fmt.Sprint(p[0].Total.Cur, p[0].Total.Prev), err
		}, "4 2"},
		{"erl call", func() (any, error) {
			var res bucket.CallResult
			err := src.Call(ctx, coalesceNow, &bucket.Call{
				Counters: []bucket.CounterCheck{{Key: "e1", Delta: 3, Limit: ratecounter.Limit{Window: 1, Rate: 2}}},
				Box:      "e1", Action: bucket.BoxWhenAbove, Until: coalesceNow + 60e9,
			}, &res)
			return fmt.Sprint(res.Above[0], res.Expires == coalesceNow+60e9), err
		}, "true true"},
		{"failing erl call", func() (any, error) {
			var res bucket.CallResult
			err := src.Call(ctx, coalesceNow, &bucket.Call{
				Counters: []bucket.CounterCheck{{Key: "junk", Delta: 1, Limit: ratecounter.Limit{Window: 1, Rate: 2}}},
				Box:      "e2", Action: bucket.BoxWhenAbove, Until: coalesceNow + 60e9,
			}, &res)
			if err == nil {
				return nil, errors.New("succeeded")
			}
			return "failed", nil
		}, "failed"},
		{"one key after", func() (any, error) {
			out := make([]bucket.Outcome, 1)
			err := src.Spend(ctx, coalesceNow, []bucket.Op{testOp("z", 1)}, out)
			return remaining(out), err
		}, "[99]"},
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
	before, scripts := rt.trips.Load(), rt.scripts.Load()
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
	if n := rt.scripts.Load() - scripts; n != 1 {
		t.Errorf("%d queued calls took %d script calls, want 1", len(calls), n)
	}
	out := make([]bucket.Outcome, 1)
	for _, op := range []bucket.Op{testOp("c", 0), winOp("d", false, 0), testOp("d2", 0)} {
		full := int64(100)
		if op.Algorithm.Windowed() {
			full = op.Window.Count
		}
		if err := src.Spend(ctx, coalesceNow, []bucket.Op{op}, out); err != nil || out[0].Remaining != full {
			t.Errorf("%s, in a failing batch: %+v, %v; want untouched", op.Key, out[0], err)
		}
	}
}

// Redis down: every waiting caller gets an error promptly, also callers
// without any deadline of their own; nothing hangs.
func TestCoalescedRedisDown(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src, err := New(Options{Addrs: []string{srv.Addr()}, Namespace: "down:"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	srv.Stop(t)
	const callers = 50
	errs := make(chan error, callers)
	for i := range callers {
		go func() {
			errs <- src.Spend(context.Background(), coalesceNow, []bucket.Op{testOp(fmt.Sprintf("d:%d", i), 1)}, make([]bucket.Outcome, 1))
		}()
	}
	deadline := time.After(2 * time.Second)
	for range callers {
		select {
		case err := <-errs:
			if err == nil {
				t.Fatal("a spend succeeded with Redis stopped")
			}
		case <-deadline:
			t.Fatal("callers still waiting 2s after Redis went down")
		}
	}
}

// On a cluster every master has a coalescer of its own: many concurrent
// callers over many slots each get their own answer.
func TestCoalescedCluster(t *testing.T) {
	cl := redistest.SharedCluster(t)
	src, err := New(Options{Addrs: cl.Addrs(), Cluster: true, Namespace: fmt.Sprintf("cc%d:", time.Now().UnixNano()),
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	const callers = 300
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range callers {
		wg.Go(func() {
			cost := int64(1 + i%7)
			out := make([]bucket.Outcome, 1)
			if err := src.Spend(context.Background(), coalesceNow, []bucket.Op{testOp(fmt.Sprintf("c:%d", i), cost)}, out); err != nil {
				t.Errorf("caller %d: %v", i, err)
				failed.Add(1)
				return
			}
			if out[0].Remaining != 100-cost {
				t.Errorf("caller %d: %+v, want %d remaining", i, out[0], 100-cost)
			}
		})
	}
	wg.Wait()
	n := 0
	src.nodes.byNode.Range(func(_, _ any) bool { n++; return true })
	if n != len(cl.Servers) {
		t.Errorf("%d coalescers for %d masters", n, len(cl.Servers))
	}
}

// On a cluster master, one-key calls of different slots are packed into
// one script call with their keys passed as arguments. A key whose slot
// the master does not serve (the caller's slot map is stale) fails its own
// batch with an error the source treats as a redirect, writing nothing,
// while the others are decided; sent through the source, such a call is
// answered by the key's real master.
func TestPackedClusterCallWithAMovedKey(t *testing.T) {
	cl := redistest.SharedCluster(t)
	src, err := New(Options{Addrs: cl.Addrs(), Cluster: true, Namespace: fmt.Sprintf("pm%d:", time.Now().UnixNano()),
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx := context.Background()
	cc := src.client.(*goredis.ClusterClient)
	masterOf := func(key string) *goredis.Client {
		t.Helper()
		m, err := cc.MasterForKey(ctx, src.Key(key))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// Two keys of different slots on one master, and one of another master.
	home := masterOf("p:0")
	var near, far string
	for i := 1; near == "" || far == ""; i++ {
		k := fmt.Sprintf("p:%d", i)
		switch {
		case masterOf(k).String() != home.String():
			if far == "" {
				far = k
			}
		case Slot(src.Key(k)) != Slot(src.Key("p:0")) && near == "":
			near = k
		}
	}
	newCall := func(key string) *queued { return spendCall(ctx, src, opSpend, testOp(key, 1)) }
	calls := []*queued{newCall("p:0"), newCall(far), newCall(near)}
	p := src.nodes.forNode(home)
	if packs := p.pack(calls); len(packs) != 1 {
		t.Fatalf("%d script calls for three one-key calls to one master, want 1", len(packs))
	}
	p.send(calls)
	for _, c := range calls {
		<-c.done
	}
	for _, i := range []int{0, 2} {
		r, err := decode(calls[i].call, calls[i].reply, make([]bucket.State, 1))
		if calls[i].err != nil || err != nil || !r.allowed {
			t.Errorf("call %d, a key of this master: %v %v allowed=%v", i, calls[i].err, err, r.allowed)
		}
	}
	if err := calls[1].err; err == nil || !isRedirect(err) {
		t.Fatalf("the key of another master: error %v, want one treated as a redirect", err)
	}
	if n, err := cc.Exists(ctx, src.Key(far)).Result(); err != nil || n != 0 {
		t.Fatalf("the moved key was written (exists=%d, %v)", n, err)
	}
	// Through the source, the same stale view ends in one spend on the
	// key's real master.
	c := spendCall(ctx, src, opSpend, testOp(far, 1)).call
	reply, err := src.evalOn(ctx, home, c)
	if err != nil {
		t.Fatalf("evalOn the wrong master: %v", err)
	}
	if r, err := decode(c, reply, make([]bucket.State, 1)); err != nil || !r.allowed || r.states[0] != bucket.Empty {
		t.Fatalf("reply %v: allowed=%v, %v, state read %v; want a first spend", reply, r.allowed, err, r.states)
	}
	out := make([]bucket.Outcome, 1)
	if err := src.Spend(ctx, coalesceNow, []bucket.Op{testOp(far, 0)}, out); err != nil || out[0].Remaining != 99 {
		t.Fatalf("after one spend of 1: %+v, %v; want 99 remaining", out[0], err)
	}
}

// A one-key spend in a packed call is folded into one token for its
// operation and mode. Every operation (spend, or decide only) and mode is
// packed into one call, on buckets with one token left, spending one (which
// fits) or two (which does not): verdicts and writes are exactly as each
// would be alone (docs/semantics.md: check-only never writes, spend-only
// never denies and writes only when it fits itself; a check writes
// nothing).
func TestFoldedSpendsInPackedCalls(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src, _ := coalesceSource(t, srv)
	ctx := context.Background()
	type want struct {
		op      operation
		mode    bucket.Mode
		cost    int64
		allowed bool
		written bool
	}
	var cases []want
	for _, op := range []operation{opSpend, opCheck} {
		for _, mode := range []bucket.Mode{bucket.CheckAndSpend, bucket.CheckOnly, bucket.SpendOnly} {
			cases = append(cases,
				want{op, mode, 1, true, op == opSpend && mode != bucket.CheckOnly},
				want{op, mode, 2, mode == bucket.SpendOnly, false})
		}
	}
	for _, packing := range []packing{packKeys, packInline} {
		p := testPipe(src, packing)
		var calls []*queued
		var stored []string
		for i, w := range cases {
			key := fmt.Sprintf("fold:%d:%d", packing, i)
			out := make([]bucket.Outcome, 1)
			if err := src.Spend(ctx, coalesceNow, []bucket.Op{testOp(key, 99)}, out); err != nil || !out[0].Allowed {
				t.Fatalf("leaving one token in %s: %+v %v", key, out[0], err)
			}
			tat, err := src.client.Get(ctx, src.Key(key)).Result()
			if err != nil {
				t.Fatal(err)
			}
			stored = append(stored, tat)
			op := testOp(key, w.cost)
			op.Mode = w.mode
			calls = append(calls, spendCall(ctx, src, w.op, op))
		}
		batches := make([]*scriptCall, len(calls))
		for i, q := range calls {
			batches[i] = q.call
		}
		if _, args := src.wire.encodePacked(batches, packKeys); len(args) != headerArgs+len(calls) {
			t.Fatalf("%d arguments for %d folded spends, want one each: %d", len(args), len(calls), headerArgs+len(calls))
		}
		p.send(calls)
		for i, c := range calls {
			<-c.done
			w := cases[i]
			name := fmt.Sprintf("packing %d, operation %s, mode %s, cost %d", packing, w.op, w.mode, w.cost)
			r, err := decode(c.call, c.reply, make([]bucket.State, 1))
			if c.err != nil || err != nil {
				t.Fatalf("%s: %v %v", name, c.err, err)
			}
			if r.allowed != w.allowed {
				t.Errorf("%s: allowed=%v, want %v", name, r.allowed, w.allowed)
			}
			after, err := src.client.Get(ctx, c.call.keys[0]).Result()
			if err != nil {
				t.Fatal(err)
			}
			if written := after != stored[i]; written != w.written {
				t.Errorf("%s: TAT %s -> %s, want written=%v", name, stored[i], after, w.written)
			}
		}
	}
}

// replyError is an error as Redis answers it (go-redis's Error).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// Errors the cluster client resolves by itself, or that a packed call's
// batch gets where the same call with its key declared would have been
// redirected, are sent again through the cluster client; others are not.
func TestIsRedirect(t *testing.T) {
	for msg, want := range map[string]bool{
		"MOVED 1335 127.0.0.1:7001":                                           true,
		"ASK 1335 127.0.0.1:7001":                                             true,
		"TRYAGAIN Multiple keys request during rehashing of slot":             true,
		"CLUSTERDOWN The cluster is down":                                     true,
		"ERR Script attempted to access a non local key in a cluster node":    true,
		"ERR Script attempted to access a slot not served":                    true,
		"ERR Script attempted to execute a command while the cluster is down": true,
		"ERR limiter: lim:v1:{x} does not hold a TAT":                         false,
		"NOSCRIPT No matching script":                                         false,
		"READONLY You can't write against a read only replica.":               false,
	} {
		if got := isRedirect(replyError(msg)); got != want {
			t.Errorf("isRedirect(%q) = %v, want %v", msg, got, want)
		}
	}
	if !isRedirect(goredis.ErrClosed) {
		t.Error("isRedirect(ErrClosed) = false")
	}
	// A script's refusal is Redis's answer, not any error that says so.
	if isRedirect(errors.New("dial: slot not served")) {
		t.Error("isRedirect of an error not from Redis = true")
	}
}

// NOSCRIPT is recognised as Redis answers it, also wrapped; nothing else
// is.
func TestIsNoScript(t *testing.T) {
	for err, want := range map[error]bool{
		replyError("NOSCRIPT No matching script. Please use EVAL."):            true,
		fmt.Errorf("pipeline: %w", replyError("NOSCRIPT No matching script.")): true,
		goredis.ErrNoScript: true,
		replyError("ERR Error running script: NOSCRIPT"): false,
		errors.New("NOSCRIPT"):                           false,
	} {
		if got := isNoScript(err); got != want {
			t.Errorf("isNoScript(%q) = %v, want %v", err, got, want)
		}
	}
}

// With a coalescing window, a call that finds nothing in flight waits the
// window out, and the calls that come meanwhile share its round trip; a
// caller that leaves during the window is never sent; a call none joined
// goes alone. The window is timed
// on a fake clock, so the calls wait for as long as the test says.
func TestCoalesceWindowGathersCalls(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src, rt := coalesceSource(t, srv)
	p := src.single
	fake := clock.NewFake()
	p.window, p.clock = 5*time.Millisecond, fake
	rt.trips.Store(0)
	rt.batches.Store(0)
	type answer struct {
		out bucket.Outcome
		err error
	}
	const callers = 4
	const leaver = 2
	leaving, leave := context.WithCancel(context.Background())
	defer leave()
	answers := make([]chan answer, callers)
	for i := range callers {
		ctx := context.Background()
		if i == leaver {
			ctx = leaving
		}
		answers[i] = make(chan answer, 1)
		go func() {
			out := make([]bucket.Outcome, 1)
			err := src.Spend(ctx, coalesceNow, []bucket.Op{testOp(fmt.Sprintf("window:%d", i), 3)}, out)
			answers[i] <- answer{out[0], err}
		}()
		waitFor(t, fmt.Sprintf("call %d is queued", i), func() bool { q, _ := p.state(); return q == i+1 })
	}
	// Held by the window (the flusher waits on the fake clock): nothing
	// has been sent.
	if n := rt.trips.Load(); n != 0 {
		t.Fatalf("%d round trips before the window ended", n)
	}
	leave()
	if a := <-answers[leaver]; !errors.Is(a.err, context.Canceled) || !errors.Is(a.err, once.ErrNotApplied) {
		t.Fatalf("the caller that left got %v, want context.Canceled, not applied", a.err)
	}
	waitFor(t, "the call that left is out of the queue", func() bool { q, _ := p.state(); return q == callers-1 })
	fake.Add(5 * time.Millisecond)
	for i := range callers {
		if i == leaver {
			continue
		}
		a := <-answers[i]
		if a.err != nil || !a.out.Allowed || a.out.Remaining != 97 {
			t.Errorf("caller %d: %+v, %v; want allowed, 97 left", i, a.out, a.err)
		}
	}
	if trips, batches := rt.trips.Load(), rt.batches.Load(); trips != 1 || batches != callers-1 {
		t.Errorf("%d round trips carried %d batches, want one of %d", trips, batches, callers-1)
	}
	if n, err := src.client.Exists(context.Background(), src.Key(fmt.Sprintf("window:%d", leaver))).Result(); err != nil || n != 0 {
		t.Errorf("the bucket of the call that left: EXISTS %d, %v; want 0", n, err)
	}
	waitFor(t, "the flusher is gone", func() bool { q, f := p.state(); return q == 0 && f == 0 })
	if n := rt.alone.Load(); n != 0 {
		t.Errorf("%d calls sent outside the pipeline", n)
	}

	// A call that none joined waits the window out too, and then goes
	// alone, as it would without a window (under its caller's context,
	// bounded by the read timeout rather than a pipeline's).
	lone := make(chan answer, 1)
	go func() {
		out := make([]bucket.Outcome, 1)
		err := src.Spend(context.Background(), coalesceNow, []bucket.Op{testOp("window:lone", 3)}, out)
		lone <- answer{out[0], err}
	}()
	waitFor(t, "the lone call is queued", func() bool { q, _ := p.state(); return q == 1 })
	if n := rt.trips.Load(); n != 1 {
		t.Fatalf("%d round trips before the lone call's window ended, want the group's one", n)
	}
	fake.Add(5 * time.Millisecond)
	if a := <-lone; a.err != nil || !a.out.Allowed || a.out.Remaining != 97 {
		t.Errorf("the lone call: %+v, %v; want allowed, 97 left", a.out, a.err)
	}
	if trips, alone := rt.trips.Load(), rt.alone.Load(); trips != 2 || alone != 1 {
		t.Errorf("after the lone call: %d round trips, %d outside a pipeline; want 2 and 1", trips, alone)
	}
	waitFor(t, "the flusher is gone", func() bool { q, f := p.state(); return q == 0 && f == 0 })
}
