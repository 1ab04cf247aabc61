package ratelimits_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/source/syncpush"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/window"
	"github.com/limiter-dev/limiter/source/local"
	"github.com/limiter-dev/limiter/source/memory"
	"github.com/limiter-dev/limiter/source/sourcetest"
)

// countingSource counts the calls that reach a source, and the ops they
// carry, so that a test can say nothing was sent.
type countingSource struct {
	ratelimits.Source
	mu     sync.Mutex
	calls  map[string]int
	resets [][]bucket.Op
}

func (c *countingSource) count(op string) {
	c.mu.Lock()
	c.calls[op]++
	c.mu.Unlock()
}

func (c *countingSource) n(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op]
}

func (c *countingSource) Spend(ctx context.Context, now int64, ops []bucket.Op, out []bucket.Outcome) error {
	c.count("spend")
	return c.Source.Spend(ctx, now, ops, out)
}

func (c *countingSource) Refund(ctx context.Context, now int64, ops []bucket.Op, out []bucket.Outcome) error {
	c.count("refund")
	return c.Source.Refund(ctx, now, ops, out)
}

func (c *countingSource) Reset(ctx context.Context, now int64, ops []bucket.Op) (int, error) {
	c.count("reset")
	c.mu.Lock()
	c.resets = append(c.resets, ops)
	c.mu.Unlock()
	return c.Source.Reset(ctx, now, ops)
}

// windowStore is a shared source's side of a sync, in memory, for the
// Limiter's tests: it adds pushed hits and reads back totals.
type windowStore struct {
	mu       sync.Mutex
	counters map[string]window.Counter
}

func (s *windowStore) SyncWindows(_ context.Context, now int64, pushes []syncpush.Window) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	nowMs := now / 1e6
	for i := range pushes {
		p := &pushes[i]
		start, cur, prev := s.counters[p.Key].At(nowMs, p.Period)
		switch p.Start {
		case start:
			cur, prev = cur+p.Hits, prev+p.PrevHits
		case start - p.Period:
			prev += p.Hits
		}
		p.Total = window.Counter{Period: p.Period, Start: start, Cur: cur, Prev: prev}
		s.counters[p.Key] = p.Total
	}
	return nil
}

// mixedLimiter is a Limiter with a local layer in front of a memory
// source, as one service process on a shared source is wired: Orders is a
// GCRA limit on the source (3 per hour), Local a sliding window of 3 per
// hour counted here only, Synced one of 3 per hour synced every second.
type mixedLimiter struct {
	*ratelimits.Limiter
	src   *countingSource
	layer *local.Layer
	store *windowStore
	clk   clock.FakeClock
}

func newMixedLimiter(t *testing.T) *mixedLimiter {
	t.Helper()
	orders, err := ratelimits.NewLimit(3, 3, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	win, err := ratelimits.NewWindowLimit(ratelimits.SlidingWindow, 3, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	localOnly, synced := win, win
	localOnly.SyncRate, synced.SyncRate = -time.Second, time.Second
	cfg, err := ratelimits.NewConfig([]ratelimits.NameInfo{
		{Name: 200, Limit: "Orders", Kind: ratelimits.KindString},
		{Name: 201, Limit: "Local", Kind: ratelimits.KindString},
		{Name: 202, Limit: "Synced", Kind: ratelimits.KindString},
	}, map[string]ratelimits.Limit{"Orders": orders, "Local": localOnly, "Synced": synced}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(start)
	store := &windowStore{counters: map[string]window.Counter{}}
	layer, err := local.New(local.Options{Syncer: store, Clock: clk, Timers: clock.NewFake()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = layer.Close(context.Background()) })
	src := &countingSource{Source: memory.New(0), calls: map[string]int{}}
	l, err := ratelimits.NewLimiter(cfg, layer.Front(src), clk)
	if err != nil {
		t.Fatal(err)
	}
	return &mixedLimiter{Limiter: l, src: src, layer: layer, store: store, clk: clk}
}

func (m *mixedLimiter) remaining(t *testing.T, limit, id string) int64 {
	t.Helper()
	d, err := m.Inspect(context.Background(), limit, id)
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining
}

func txn(limit string, cost int64) ratelimits.Transaction {
	return ratelimits.Transaction{Limit: limit, ID: "a", Cost: cost}
}

// A local denial decides the batch, and the source only checks its part:
// the source's transactions answer with their own figures, as an allowed
// transaction of a denied batch does (as if written), and nothing is
// written anywhere.
func TestMixedBatchLocalDenialWritesNothing(t *testing.T) {
	m := newMixedLimiter(t)
	spendOK(t, m.Limiter, txn("Local", 3))
	bd := spendOK(t, m.Limiter, txn("Orders", 1), txn("Local", 1))
	if bd.Allowed || bd.Deciding != 1 || bd.RetryIn <= 0 {
		t.Fatalf("batch with a full local window: %+v", bd)
	}
	if d := bd.Decisions[0]; !d.Allowed || d.Remaining != 2 || d.RetryIn != 0 || d.ResetIn != 20*time.Minute || d.Limit != "Orders" {
		t.Fatalf("the source's transaction: %+v, want allowed, 2 left as if written", d)
	}
	if n := m.src.n("spend"); n != 1 {
		t.Fatalf("the source was called %d times, want once (the check)", n)
	}
	if got := m.remaining(t, "Orders", "a"); got != 3 {
		t.Fatalf("Orders remaining %d, want 3", got)
	}
}

// A spend-only transaction of the source part (a shadow limit's are) in a
// batch the local part denies answers its own decision, read as a
// check-only one, and is not written.
func TestMixedLocalDenialReadsSpendOnly(t *testing.T) {
	m := newMixedLimiter(t)
	spendOK(t, m.Limiter, txn("Local", 3))
	spendOnly := ratelimits.Transaction{Limit: "Orders", ID: "a", Cost: 1, Mode: ratelimits.SpendOnly}
	bd := spendOK(t, m.Limiter, spendOnly, txn("Local", 1))
	if bd.Allowed || bd.Deciding != 1 {
		t.Fatalf("batch with a full local window: %+v", bd)
	}
	if d := bd.Decisions[0]; !d.Allowed || d.Remaining != 2 || d.ResetIn <= 0 {
		t.Fatalf("the source's spend-only transaction: %+v, want its own decision (allowed, 2 left after it)", d)
	}
	if got := m.remaining(t, "Orders", "a"); got != 3 {
		t.Fatalf("Orders remaining %d, want 3: nothing written in a denied batch", got)
	}
}

// A source denial writes nothing locally.
func TestMixedBatchSourceDenialWritesNothingLocally(t *testing.T) {
	m := newMixedLimiter(t)
	spendOK(t, m.Limiter, txn("Orders", 3))
	bd := spendOK(t, m.Limiter, txn("Orders", 1), txn("Local", 1), txn("Synced", 2))
	if bd.Allowed || bd.Deciding != 0 {
		t.Fatalf("batch with the source's bucket empty: %+v", bd)
	}
	if d := bd.Decisions[1]; !d.Allowed || d.Remaining != 2 {
		t.Fatalf("the local transaction is decided and reported as if written: %+v", d)
	}
	if a, b := m.remaining(t, "Local", "a"), m.remaining(t, "Synced", "a"); a != 3 || b != 3 {
		t.Fatalf("after a denied batch, remaining Local %d and Synced %d, want 3 and 3", a, b)
	}
	// Allowed on both sides: both written.
	m.clk.Add(time.Hour) // the GCRA bucket is full again; the windows count nothing
	bd = spendOK(t, m.Limiter, txn("Orders", 1), txn("Local", 1), txn("Synced", 2))
	if !bd.Allowed {
		t.Fatalf("batch allowed everywhere: %+v", bd)
	}
	if o, a, b := m.remaining(t, "Orders", "a"), m.remaining(t, "Local", "a"), m.remaining(t, "Synced", "a"); o != 2 || a != 2 || b != 1 {
		t.Fatalf("remaining Orders %d, Local %d, Synced %d; want 2, 2 and 1", o, a, b)
	}
	// A batch of local limits only never reaches the source.
	calls := m.src.n("spend")
	spendOK(t, m.Limiter, txn("Local", 1), txn("Synced", 1))
	if m.src.n("spend") != calls {
		t.Fatal("a local-only batch reached the source")
	}
}

// Check decides the local part as Spend would and writes nothing.
func TestMixedCheckWritesNothing(t *testing.T) {
	m := newMixedLimiter(t)
	bd, err := m.Check(context.Background(), []ratelimits.Transaction{txn("Orders", 1), txn("Local", 2)})
	if err != nil || !bd.Allowed || bd.Decisions[1].Remaining != 1 {
		t.Fatalf("check: %+v, %v", bd, err)
	}
	if a := m.remaining(t, "Local", "a"); a != 3 {
		t.Fatalf("Local remaining %d after a check, want 3", a)
	}
}

// Refund gives back local hits, pushed or not, and the source's part: a
// pushed hit of Synced is given back on the source in the call that gives
// back Orders', and here at once.
func TestMixedRefund(t *testing.T) {
	m := newMixedLimiter(t)
	spendOK(t, m.Limiter, txn("Orders", 2), txn("Local", 2), txn("Synced", 2))
	if _, _, err := m.layer.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	bd, err := m.Refund(context.Background(), []ratelimits.Transaction{txn("Orders", 1), txn("Local", 1), txn("Synced", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if !bd.Decisions[0].Allowed || !bd.Decisions[1].Allowed || !bd.Decisions[2].Allowed {
		t.Fatalf("refund decisions: %+v", bd.Decisions)
	}
	if n := m.src.n("refund"); n != 1 {
		t.Fatalf("%d refund calls to the source, want 1", n)
	}
	if o, a, s := m.remaining(t, "Orders", "a"), m.remaining(t, "Local", "a"), m.remaining(t, "Synced", "a"); o != 2 || a != 2 || s != 2 {
		t.Fatalf("remaining Orders %d, Local %d, Synced %d after the refund; want 2, 2 and 2", o, a, s)
	}
}

// Reset forgets local counters; a synced limit is reset on the source too,
// a local-only one never reaches it.
func TestMixedReset(t *testing.T) {
	m := newMixedLimiter(t)
	spendOK(t, m.Limiter, txn("Orders", 1), txn("Local", 1), txn("Synced", 1))
	n, err := m.Reset(context.Background(), []ratelimits.Transaction{txn("Orders", 0), txn("Local", 0), txn("Synced", 0)})
	if err != nil {
		t.Fatal(err)
	}
	// Orders counted on the source; Local only here; Synced's key is not
	// on this memory source (the window store holds it), but this process
	// had a hit it had not pushed.
	if n != 3 {
		t.Fatalf("Reset counted %d, want 3", n)
	}
	if len(m.src.resets) != 1 || len(m.src.resets[0]) != 2 || m.src.resets[0][1].Algorithm != ratelimits.SlidingWindow {
		t.Fatalf("the source's resets: %+v, want one call with Orders and Synced", m.src.resets)
	}
	for _, limit := range []string{"Orders", "Local", "Synced"} {
		if got := m.remaining(t, limit, "a"); got != 3 {
			t.Fatalf("%s remaining %d after the reset, want 3", limit, got)
		}
	}
	if pushed, _, err := m.layer.Sync(context.Background()); err != nil || pushed != 0 {
		t.Fatalf("sync after the reset: %d pushed, %v; the dropped hit must not be pushed", pushed, err)
	}
}

// An idempotency key cannot cover hits counted in one process's memory:
// such batches are refused, as a client error, before anything is done.
func TestMixedIdempotencyRefused(t *testing.T) {
	m := newMixedLimiter(t)
	for _, call := range []func(context.Context, string, []ratelimits.Transaction) (*ratelimits.BatchDecision, error){m.SpendOnce, m.RefundOnce} {
		_, err := call(context.Background(), "k", []ratelimits.Transaction{txn("Orders", 1), txn("Synced", 1)})
		var te *ratelimits.TransactionError
		if !errors.Is(err, local.ErrIdempotency) || !errors.Is(err, ratelimits.ErrInvalidIdempotencyKey) || !errors.As(err, &te) || te.Index != 1 {
			t.Fatalf("idempotent call with a synced limit: %v", err)
		}
	}
	if m.src.n("spend")+m.src.n("refund") != 0 {
		t.Fatal("a refused call reached the source")
	}
	// Without a local limit, keys work as always.
	if _, err := m.SpendOnce(context.Background(), "k", []ratelimits.Transaction{txn("Orders", 1)}); err != nil {
		t.Fatal(err)
	}
}

// Concurrent mixed batches never write a local hit for a batch the source
// denied: with the source's bucket the tighter limit, the local windows
// count exactly the batches allowed.
func TestConcurrentMixedBatches(t *testing.T) {
	m := newMixedLimiter(t)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				bd, err := m.Spend(context.Background(), []ratelimits.Transaction{
					{Limit: "Orders", ID: "b", Cost: 1}, {Limit: "Local", ID: "b", Cost: 1}, {Limit: "Synced", ID: "b", Cost: 1},
				})
				if err != nil {
					t.Error(err)
					return
				}
				if bd.Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for range 10 {
			if _, _, err := m.layer.Sync(context.Background()); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	if allowed.Load() != 3 {
		t.Fatalf("%d batches allowed, want 3", allowed.Load())
	}
	for _, limit := range []string{"Orders", "Local", "Synced"} {
		if got := m.remaining(t, limit, "b"); got != 0 {
			t.Fatalf("%s remaining %d, want 0", limit, got)
		}
	}
}

// modelSource is a source that keeps rate counters and box entries:
// sourcetest.Model behind a lock. It implements what these tests call.
type modelSource struct {
	ratelimits.Source
	mu sync.Mutex
	m  sourcetest.Model
}

func (s *modelSource) Spend(_ context.Context, now int64, ops []bucket.Op, out []bucket.Outcome) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	copy(out, s.m.Apply(now, ops, false))
	return nil
}

func (s *modelSource) Call(_ context.Context, now int64, call *bucket.Call, res *bucket.CallResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m.Call(now, call, res)
	return nil
}

// newRateMixedLimiter is a Limiter with a local layer in front of a
// source that keeps rate counters: Orders a GCRA limit on the source (3
// per hour), Local a sliding window of 3 per hour counted here only, Rate
// a rate counter on the source and HereRate one counted here only (each
// 10 hits a second over 10 seconds, a minute in the box).
func newRateMixedLimiter(t *testing.T) (*ratelimits.Limiter, *countingSource, clock.FakeClock) {
	t.Helper()
	orders, err := ratelimits.NewLimit(3, 3, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	win, err := ratelimits.NewWindowLimit(ratelimits.SlidingWindow, 3, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	win.SyncRate = -time.Second
	rate, err := ratelimits.NewRateCounterLimit(10*time.Second, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	here := rate
	here.SyncRate = -time.Second
	cfg, err := ratelimits.NewConfig([]ratelimits.NameInfo{
		{Name: 200, Limit: "Orders", Kind: ratelimits.KindString},
		{Name: 201, Limit: "Local", Kind: ratelimits.KindString},
		{Name: 203, Limit: "Rate", Kind: ratelimits.KindString},
		{Name: 204, Limit: "HereRate", Kind: ratelimits.KindString},
	}, map[string]ratelimits.Limit{"Orders": orders, "Local": win, "Rate": rate, "HereRate": here}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(start)
	layer, err := local.New(local.Options{Clock: clk, Timers: clock.NewFake()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = layer.Close(context.Background()) })
	src := &countingSource{Source: &modelSource{m: sourcetest.Model{}}, calls: map[string]int{}}
	l, err := ratelimits.NewLimiter(cfg, layer.Front(src), clk)
	if err != nil {
		t.Fatal(err)
	}
	return l, src, clk
}

// hitsIn10s reads a rate counter's hits over the last 10 seconds.
func hitsIn10s(t *testing.T, l *ratelimits.Limiter, counter string) int64 {
	t.Helper()
	r, err := l.RateCounter(context.Background(), counter, "a")
	if err != nil {
		t.Fatal(err)
	}
	return r.Hits[1]
}

// A batch the local part denies still counts its rate-counter hits: the
// local ones, and the source's, sent with the source's other
// transactions made check-only, which write nothing.
func TestMixedLocalDenialStillCountsRateHits(t *testing.T) {
	l, src, _ := newRateMixedLimiter(t)
	spendOK(t, l, txn("Local", 3))
	bd := spendOK(t, l, txn("Orders", 1), txn("Rate", 5), txn("Local", 1), txn("HereRate", 7))
	if bd.Allowed || bd.Deciding != 2 {
		t.Fatalf("batch with a full local window: %+v", bd)
	}
	if d := bd.Decisions[0]; !d.Allowed || d.Remaining != 2 {
		t.Fatalf("the source's GCRA transaction, checked: %+v, want allowed, 2 left as if written", d)
	}
	if d := bd.Decisions[1]; !d.Allowed || d.Remaining != 95 {
		t.Fatalf("the source's rate counter, sent alone: %+v", d)
	}
	if r, h := hitsIn10s(t, l, "Rate"), hitsIn10s(t, l, "HereRate"); r != 5 || h != 7 {
		t.Fatalf("hits counted: Rate %d, HereRate %d; want 5 and 7", r, h)
	}
	if got := src.n("spend"); got != 1 {
		t.Fatalf("%d spends reached the source, want 1 (the rate counter and the check)", got)
	}
	if d, err := l.Inspect(context.Background(), "Orders", "a"); err != nil || d.Remaining != 3 {
		t.Fatalf("Orders after the denied batch: %+v, %v", d, err)
	}
	// A check counts nothing; the source's part is checked there, for its
	// figures.
	bd, err := l.Check(context.Background(), []ratelimits.Transaction{txn("Rate", 5), txn("Local", 1), txn("HereRate", 7)})
	if err != nil {
		t.Fatal(err)
	}
	if d := bd.Decisions[0]; !d.Allowed || d.Remaining != 90 {
		t.Fatalf("the source's rate counter in a check: %+v, want allowed, 90 left as if counted", d)
	}
	if r, h := hitsIn10s(t, l, "Rate"), hitsIn10s(t, l, "HereRate"); r != 5 || h != 7 {
		t.Fatalf("after a check: Rate %d, HereRate %d", r, h)
	}
}

// A batch the source part denies writes no local window cost, but its
// local rate-counter hits.
func TestMixedSourceDenialStillCountsLocalRateHits(t *testing.T) {
	l, _, _ := newRateMixedLimiter(t)
	spendOK(t, l, txn("Orders", 3), txn("HereRate", 60))
	bd := spendOK(t, l, txn("Orders", 1), txn("Local", 1), txn("HereRate", 30))
	if bd.Allowed || bd.Deciding != 0 || !bd.Decisions[1].Allowed || !bd.Decisions[2].Allowed {
		t.Fatalf("batch with the source's bucket empty: %+v", bd)
	}
	if d, err := l.Inspect(context.Background(), "Local", "a"); err != nil || d.Remaining != 3 {
		t.Fatalf("Local after the denied batch: %+v, %v", d, err)
	}
	if h := hitsIn10s(t, l, "HereRate"); h != 90 {
		t.Fatalf("HereRate counts %d, want 90", h)
	}
	// Above the limit in a batch the local part denies: boxed.
	bd = spendOK(t, l, txn("Orders", 1), txn("HereRate", 20))
	if bd.Allowed || !bd.Decisions[1].Penalized {
		t.Fatalf("110 hits of 100 here: %+v, want boxed", bd.Decisions[1])
	}
	if has, _, err := l.BoxHas(context.Background(), "HereRate", "a"); err != nil || !has {
		t.Fatalf("HereRate's box: %v, %v; want the id boxed", has, err)
	}
}
