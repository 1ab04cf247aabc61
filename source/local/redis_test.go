package local

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/ratelimits/window"
	"github.com/limiter-dev/limiter/source/redis"
)

// redisProcess is one service process on a real Redis: its layer in
// front of its own connection to the shared server.
type redisProcess struct {
	*process
	front *Front
	src   *redis.Source
}

func newRedisProcess(t *testing.T, addr string, clk clock.FakeClock) *redisProcess {
	t.Helper()
	src, err := redis.New(redis.Options{Addrs: []string{addr}, Namespace: "refund:",
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	p := newProcess(t, nil, clk, Options{Syncer: src})
	return &redisProcess{process: p, front: p.Front(src), src: src}
}

func (p *redisProcess) do(t *testing.T, refund bool, ops ...bucket.Op) []bucket.Outcome {
	t.Helper()
	out := make([]bucket.Outcome, len(ops))
	do := p.front.Spend
	if refund {
		do = p.front.Refund
	}
	if err := do(context.Background(), p.clk.Now().UnixNano(), ops, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// read is what p decides on each op now, as a cost-0 check.
func (p *redisProcess) read(t *testing.T, ops ...bucket.Op) []int64 {
	t.Helper()
	checks := make([]bucket.Op, len(ops))
	for i := range ops {
		checks[i] = ops[i]
		checks[i].Cost, checks[i].Mode = 0, bucket.CheckOnly
	}
	out := p.do(t, false, checks...)
	remaining := make([]int64, len(ops))
	for i := range out {
		remaining[i] = out[i].Remaining
	}
	return remaining
}

func costs(ops []bucket.Op, c ...int64) []bucket.Op {
	out := make([]bucket.Op, len(ops))
	for i := range ops {
		out[i] = ops[i]
		out[i].Cost = c[i]
	}
	return out
}

// failingRefunds is a source whose refunds fail.
type failingRefunds struct{ *redis.Source }

func (failingRefunds) Refund(context.Context, int64, []bucket.Op, []bucket.Outcome) error {
	return errors.New("down")
}

// On Redis, a refund after a sync gives the pushed hits back on the
// source, for a window with or without a box and a rate counter, with a
// limit decided on the source in the same batch; every process reads it
// at its next sync. A refund whose source call fails changes nothing.
func TestRefundOfPushedHitsOnRedis(t *testing.T) {
	addr := redistest.NewStandalone(t).Addr()
	clk := fakeClock()
	a, b := newRedisProcess(t, addr, clk), newRedisProcess(t, addr, clk)
	rate := 1000 * time.Second
	until := start.Add(time.Minute).UnixNano()
	fixed := window.Limit{Count: 5, Period: time.Minute.Milliseconds()}
	ops := []bucket.Op{
		{Key: "301:r", Algorithm: bucket.FixedWindow, Window: fixed, SyncRate: rate},
		{Key: "302:ip", Algorithm: bucket.RateCounter, Rate: ratecounter.Limit{Window: 10, Rate: 10}, Box: "302:ip", BoxUntil: until, SyncRate: rate},
		{Key: "303:r", Algorithm: bucket.SlidingWindow, Window: fixed, Box: "303:r", BoxUntil: until, SyncRate: rate},
	}
	gcra := bucket.Op{Key: "304:r", Algorithm: bucket.GCRA, EmissionInterval: int64(time.Second), BurstOffset: int64(4 * time.Second)}
	b.read(t, ops...) // held there, so that its cycles read them
	a.do(t, false, append(costs(ops, 3, 5, 3), costs([]bucket.Op{gcra}, 2)...)...)
	if got := a.read(t, ops...); got[0] != 2 || got[1] != 95 || got[2] != 2 {
		t.Fatalf("remaining after the spend: %v, want [2 95 2]", got)
	}
	if _, _, err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}

	// A failed source call gives nothing back, here or on Redis.
	failing := a.Front(failingRefunds{})
	out := make([]bucket.Outcome, 3)
	if err := failing.Refund(context.Background(), clk.Now().UnixNano(), costs(ops, 2, 5, 2), out); err == nil {
		t.Fatal("a refund with the source failing succeeded")
	}
	if got := a.read(t, ops...); got[0] != 2 || got[1] != 95 || got[2] != 2 {
		t.Fatalf("remaining after a failed refund: %v, want [2 95 2]", got)
	}

	out = a.do(t, true, append(costs(ops, 2, 5, 2), costs([]bucket.Op{gcra}, 2)...)...)
	for i, want := range []int64{4, 100, 4} {
		if !out[i].Allowed || out[i].Remaining != want {
			t.Fatalf("refund of op %d after the sync: %+v, want allowed with %d remaining", i, out[i], want)
		}
	}
	if !out[3].Allowed || out[3].Remaining != 4 {
		t.Fatalf("refund of the source's op in the same batch: %+v, want allowed with 4 remaining (full)", out[3])
	}
	for _, p := range []*redisProcess{a, b} {
		if _, _, err := p.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := p.read(t, ops...); got[0] != 4 || got[1] != 100 || got[2] != 4 {
			t.Fatalf("remaining after the next sync: %v, want [4 100 4]", got)
		}
	}
}

// On Redis, a reset of a window limit above 0 with a box deletes the
// counter the syncs add to and takes the id out of its box, counted as one
// bucket: no later sync brings the hits or the box back, in the process
// that reset it or in another.
func TestResetOfSyncedWindowWithABoxOnRedis(t *testing.T) {
	addr := redistest.NewStandalone(t).Addr()
	clk := fakeClock()
	a, b := newRedisProcess(t, addr, clk), newRedisProcess(t, addr, clk)
	rate := 1000 * time.Second
	w := bucket.Op{Key: "305:r", Algorithm: bucket.FixedWindow, Window: window.Limit{Count: 5, Period: time.Minute.Milliseconds()},
		Box: "305:r", BoxUntil: start.Add(time.Hour).UnixNano(), SyncRate: rate}
	b.read(t, w)
	a.do(t, false, costs([]bucket.Op{w}, 3)...)
	if out := a.do(t, false, costs([]bucket.Op{w}, 3)...); out[0].Allowed || !out[0].Penalized {
		t.Fatalf("6 hits of 5: %+v, want denied and boxed", out[0])
	}
	for _, p := range []*redisProcess{a, b} {
		if _, _, err := p.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if out := b.do(t, false, costs([]bucket.Op{w}, 0)...); !out[0].Penalized {
		t.Fatalf("b after the syncs: %+v, want boxed", out[0])
	}
	n, err := a.front.Reset(context.Background(), clk.Now().UnixNano(), []bucket.Op{w})
	if err != nil || n != 1 {
		t.Fatalf("Reset = %d, %v; want 1 bucket", n, err)
	}
	for _, p := range []*redisProcess{a, b, a} {
		if _, _, err := p.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for name, p := range map[string]*redisProcess{"a": a, "b": b} {
		if out := p.do(t, false, costs([]bucket.Op{w}, 0)...); out[0].Penalized || out[0].Remaining != 5 {
			t.Errorf("%s after the reset and the syncs: %+v, want 5 remaining and not boxed", name, out[0])
		}
	}
	// A process that reads the box log only now is not misled by the
	// entry logged before the reset.
	c := newRedisProcess(t, addr, clk)
	c.Follow([]Followed{{Name: "305:", SyncRate: rate}})
	if _, fetched, err := c.Sync(context.Background()); err != nil || fetched != 0 {
		t.Fatalf("a new process's sync: %d fetched, %v; want nothing (the id is no longer boxed)", fetched, err)
	}
	if out := c.do(t, false, costs([]bucket.Op{w}, 0)...); out[0].Penalized {
		t.Errorf("a new process boxes the id reset: %+v", out[0])
	}
}

// A reset of a window limit above 0 with a box counts one bucket for its
// counter and its box entry together, also when only the entry is left
// (the window passed, the id is still boxed); and one whose second step
// fails does not say it changed nothing.
func TestResetOfSyncedWindowWithABoxCountsAndFails(t *testing.T) {
	addr := redistest.NewStandalone(t).Addr()
	clk := fakeClock()
	a := newRedisProcess(t, addr, clk)
	ctx := context.Background()
	w := bucket.Op{Key: "306:r", Algorithm: bucket.FixedWindow, Window: window.Limit{Count: 5, Period: time.Minute.Milliseconds()},
		Box: "306:r", BoxUntil: start.Add(time.Hour).UnixNano(), SyncRate: 1000 * time.Second}
	boxIt := func() {
		a.do(t, false, costs([]bucket.Op{w}, 3)...)
		a.do(t, false, costs([]bucket.Op{w}, 3)...) // denied: boxed
		if _, _, err := a.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	boxIt()
	clk.Add(5 * time.Minute) // the window's hits no longer count; the box does
	if _, _, err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := a.front.Reset(ctx, clk.Now().UnixNano(), []bucket.Op{w}); err != nil || n != 1 {
		t.Fatalf("Reset of a boxed id whose window passed = %d, %v; want 1", n, err)
	}
	boxIt()
	// Two such ops are reset in two steps: the second fails.
	w2 := w
	w2.Key, w2.Box = "306:s", "306:s"
	failing := a.Front(&failingSecondReset{Source: a.src})
	_, err := failing.Reset(ctx, clk.Now().UnixNano(), []bucket.Op{w, w2})
	if err == nil || errors.Is(err, ratelimits.ErrNotApplied) {
		t.Fatalf("a reset whose second step failed: %v, want an error that does not say not applied", err)
	}
}

// failingSecondReset is a source whose second Reset fails, changing
// nothing.
type failingSecondReset struct {
	*redis.Source
	n int
}

func (f *failingSecondReset) Reset(ctx context.Context, now int64, ops []bucket.Op) (int, error) {
	if f.n++; f.n == 2 {
		return 0, fmt.Errorf("%w: down", ratelimits.ErrNotApplied)
	}
	return f.Source.Reset(ctx, now, ops)
}
