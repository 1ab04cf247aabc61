package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/source/syncpush"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// start is on a whole hour, so every window of these tests starts there.
var start = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// store is a shared source's side of a sync, in memory: what the Redis
// source does in its script, with the window package's reading of a
// counter. Calls are counted, can be made to fail before they change
// anything, and are announced on calls when it is set.
type store struct {
	mu       sync.Mutex
	counters map[string]window.Counter
	fail     error // returned, with nothing changed, while set
	// only, when set, makes a call apply just the pushes of the keys it
	// accepts and fail: a sync cut into parts of which some failed.
	only   func(key string) bool
	n      int // calls
	pushes [][]syncpush.Window
	calls  chan int // receives n after each call, when set
	// hold, when set, keeps every call waiting until it is closed, after
	// announcing the call on entered.
	hold, entered chan struct{}
	// rates and boxes are the rate counters and box entries (expiries)
	// SyncRates and Call keep; rn and cn count those calls.
	rates      map[string]ratecounter.Counter
	boxes      map[string]int64
	rn, cn     int
	ratePushes [][]syncpush.Rate
	refunds    [][]bucket.Op // the refunds the layer handed the store's side
	// boxLog is each limit's box log (syncpush.BoxLog): the box entries
	// SyncRates stored, in order; a cursor is an index in it.
	boxLog map[string][]syncpush.BoxEntry
}

func newStore() *store {
	return &store{counters: map[string]window.Counter{}, rates: map[string]ratecounter.Counter{}, boxes: map[string]int64{},
		boxLog: map[string][]syncpush.BoxEntry{}}
}

func (s *store) SyncWindows(_ context.Context, now int64, pushes []syncpush.Window) error {
	if s.hold != nil {
		s.entered <- struct{}{}
		<-s.hold
	}
	s.mu.Lock()
	s.n++
	n := s.n
	s.pushes = append(s.pushes, append([]syncpush.Window(nil), pushes...))
	err := s.fail
	if err == nil && s.only != nil {
		err = errors.New("part of the sync failed")
	}
	for i := range pushes {
		pushes[i].Applied = false
	}
	if s.fail == nil {
		nowMs := bucket.Millis(now)
		for i := range pushes {
			p := &pushes[i]
			if s.only != nil && !s.only(p.Key) {
				continue
			}
			c := at(s.counters[p.Key], nowMs, p.Period)
			switch p.Start {
			case c.Start:
				c.Cur += p.Hits
				c.Prev += p.PrevHits
			case c.Start - p.Period:
				c.Prev += p.Hits
			}
			s.counters[p.Key] = c
			p.Total, p.Applied = c, true
		}
	}
	s.mu.Unlock()
	if s.calls != nil {
		s.calls <- n
	}
	return err
}

func (s *store) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// total is what the store counts for key at now in the current window.
func (s *store) total(key string, now time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.counters[key]
	if !ok {
		return 0
	}
	return at(c, bucket.Millis(now.UnixNano()), c.Period).Cur
}

func (s *store) calls_() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// process is one service process's local layer on the shared store.
type process struct {
	*Layer
	clk clock.FakeClock
}

func newProcess(t *testing.T, s *store, clk clock.FakeClock, opts Options) *process {
	t.Helper()
	if s != nil {
		opts.Syncer = s
	}
	opts.Clock = clk
	if opts.Timers == nil {
		// Timers nobody moves: no loop runs unless a test asks for it.
		opts.Timers = clock.NewFake()
	}
	l, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.Close(ctx)
	})
	return &process{Layer: l, clk: clk}
}

func fakeClock() clock.FakeClock {
	clk := clock.NewFake()
	clk.Set(start)
	return clk
}

// op is a spend on a sliding window of count hits per hour.
func op(key string, count, cost int64, rate time.Duration) bucket.Op {
	return bucket.Op{Key: key, Algorithm: bucket.SlidingWindow, Window: window.Limit{Count: count, Period: time.Hour.Milliseconds()}, Cost: cost, SyncRate: rate}
}

// spend spends ops at the process's now and returns the batch's answer
// and the outcomes.
func (p *process) spend(ops ...bucket.Op) (bool, []bucket.Outcome) {
	out := make([]bucket.Outcome, len(ops))
	return p.Layer.spend(p.clk.Now().UnixNano(), ops, out), out
}

// admit spends cost 1 n times and returns how many were allowed.
func (p *process) admit(n int, o bucket.Op) int {
	allowed := 0
	for range n {
		if ok, _ := p.spend(o); ok {
			allowed++
		}
	}
	return allowed
}

// remaining reads a counter with a cost-0 decision.
func (p *process) remaining(t *testing.T, o bucket.Op) int64 {
	t.Helper()
	o.Cost = 0
	out := make([]bucket.Outcome, 1)
	if !p.decide(p.clk.Now().UnixNano(), []bucket.Op{o}, out) {
		t.Fatalf("a cost-0 read was denied: %+v", out[0])
	}
	return out[0].Remaining
}

func (p *process) sync(t *testing.T) syncResult {
	t.Helper()
	pushed, fetched, err := p.Sync(context.Background())
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return syncResult{Pushed: pushed, Fetched: fetched}
}

// Below 0, every process counts alone and the source never hears of it.
func TestLocalOnlyCountsAlone(t *testing.T) {
	s, clk := newStore(), fakeClock()
	a, b := newProcess(t, s, clk, Options{}), newProcess(t, s, clk, Options{})
	o := op("k", 10, 1, -time.Second)
	if got := a.admit(15, o); got != 10 {
		t.Fatalf("process a admitted %d of 15, want 10", got)
	}
	if got := b.admit(15, o); got != 10 {
		t.Fatalf("process b admitted %d of 15, want 10", got)
	}
	if res := a.sync(t); res != (syncResult{}) {
		t.Fatalf("Sync of a local-only layer = %+v, want nothing pushed or fetched", res)
	}
	if s.calls_() != 0 {
		t.Fatalf("the source was called %d times for a local-only limit", s.calls_())
	}
	if a.Pending() != 0 {
		t.Fatalf("Pending = %d, want 0: local-only hits are never pushed", a.Pending())
	}
	// Two hours later neither window counts.
	clk.Add(2 * time.Hour)
	if got := a.remaining(t, o); got != 10 {
		t.Fatalf("two windows later, remaining %d, want 10", got)
	}
}

// Above 0, a process decides from the totals it last read plus its own
// unpushed hits; a sync pushes those and reads everyone's back.
func TestDecidesFromTotalsPlusUnpushedHits(t *testing.T) {
	s, clk := newStore(), fakeClock()
	a, b := newProcess(t, s, clk, Options{}), newProcess(t, s, clk, Options{})
	o := op("k", 10, 1, time.Second)

	if got := a.admit(3, o); got != 3 {
		t.Fatalf("a admitted %d of 3", got)
	}
	if got := b.admit(4, o); got != 4 {
		t.Fatalf("b admitted %d of 4", got)
	}
	if s.calls_() != 0 {
		t.Fatal("a decision made a round trip")
	}
	// Before any sync, each sees its own hits only.
	if ra, rb := a.remaining(t, o), b.remaining(t, o); ra != 7 || rb != 6 {
		t.Fatalf("remaining before sync: a %d, b %d; want 7 and 6", ra, rb)
	}
	if res := a.sync(t); res != (syncResult{Pushed: 1, Fetched: 1}) {
		t.Fatalf("a's sync = %+v, want 1 pushed, 1 fetched", res)
	}
	if res := b.sync(t); res != (syncResult{Pushed: 1, Fetched: 1}) {
		t.Fatalf("b's sync = %+v, want 1 pushed, 1 fetched", res)
	}
	if got := s.total("k", clk.Now()); got != 7 {
		t.Fatalf("the source counts %d, want 7", got)
	}
	// b read 3 + 4; a read only its own 3 until its next sync.
	if ra, rb := a.remaining(t, o), b.remaining(t, o); ra != 7 || rb != 3 {
		t.Fatalf("remaining after one sync each: a %d, b %d; want 7 and 3", ra, rb)
	}
	// A sync with nothing to push only reads.
	if res := a.sync(t); res != (syncResult{Pushed: 0, Fetched: 1}) {
		t.Fatalf("a's second sync = %+v, want 0 pushed, 1 fetched", res)
	}
	if ra := a.remaining(t, o); ra != 3 {
		t.Fatalf("a's remaining after reading the totals: %d, want 3", ra)
	}
	// Totals plus own hits: a's 2 more are decided locally, the third is
	// denied, without a round trip.
	calls := s.calls_()
	if got := a.admit(3, o); got != 3 {
		t.Fatalf("a admitted %d of 3 with 3 remaining", got)
	}
	if ok, out := a.spend(o); ok || out[0].Remaining != 0 || out[0].RetryIn <= 0 {
		t.Fatalf("spend beyond the count: allowed %v, %+v", ok, out[0])
	}
	if s.calls_() != calls {
		t.Fatal("a decision made a round trip")
	}
	if got := a.Pending(); got != 1 {
		t.Fatalf("Pending = %d, want 1 counter", got)
	}
	a.sync(t)
	if got, p := s.total("k", clk.Now()), a.Pending(); got != 10 || p != 0 {
		t.Fatalf("after the push the source counts %d and %d counters are pending; want 10 and 0", got, p)
	}
}

// Pushed and Fetched count counters: every counter held is read; only
// those with hits are pushed, and a pushed counter is pushed once per
// cycle, whatever its number of hits.
func TestSyncAccounting(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	for _, k := range []string{"a", "b", "c"} {
		p.admit(5, op(k, 10, 1, time.Second))
	}
	// A read of a counter this process never spent on makes it held: the
	// next cycle reads its total.
	s.mu.Lock()
	s.counters["d"] = window.Counter{Period: time.Hour.Milliseconds(), Start: bucket.Millis(start.UnixNano()), Cur: 4}
	s.mu.Unlock()
	if got := p.remaining(t, op("d", 10, 0, time.Second)); got != 10 {
		t.Fatalf("d before its first sync: remaining %d, want 10", got)
	}
	if res := p.sync(t); res != (syncResult{Pushed: 3, Fetched: 4}) {
		t.Fatalf("first sync = %+v, want 3 pushed, 4 fetched", res)
	}
	if got := p.remaining(t, op("d", 10, 0, time.Second)); got != 6 {
		t.Fatalf("d after its first sync: remaining %d, want 6", got)
	}
	if n := len(s.pushes[0]); n != 4 {
		t.Fatalf("the cycle made %d pushes in its call, want 4 in one call", n)
	}
	p.admit(1, op("b", 10, 1, time.Second))
	if res := p.sync(t); res != (syncResult{Pushed: 1, Fetched: 4}) {
		t.Fatalf("second sync = %+v, want 1 pushed, 4 fetched", res)
	}
	// Two hours on, nothing counts: the cycle forgets every counter and
	// makes no call.
	clk.Add(2 * time.Hour)
	calls := s.calls_()
	if res := p.sync(t); res != (syncResult{}) {
		t.Fatalf("sync of counters that count nothing = %+v", res)
	}
	if s.calls_() != calls || p.Counters() != 0 {
		t.Fatalf("%d calls made, %d counters held; want none", s.calls_()-calls, p.Counters())
	}
}

// A failed push keeps its hits: decisions go on counting them, the next
// cycle pushes them again, and the source ends with each hit once.
func TestFailedPushIsKeptAndRetried(t *testing.T) {
	s, clk := newStore(), fakeClock()
	cycles := make(chan Cycle, 16)
	p := newProcess(t, s, clk, Options{Timers: clk, OnCycle: func(c Cycle) { cycles <- c }})
	o := op("k", 10, 1, time.Second)
	p.admit(4, o)
	down := errors.New("connection refused")
	s.setFail(down)
	if _, _, err := p.Sync(context.Background()); !errors.Is(err, down) {
		t.Fatalf("Sync with the source down: %v, want %v", err, down)
	}
	if c := <-cycles; c.Trigger != TriggerAdmin || !errors.Is(c.Err, down) || c.Pushed != 0 || c.SyncRate != time.Second {
		t.Fatalf("cycle reported: %+v", c)
	}
	if got := p.Pending(); got != 1 {
		t.Fatalf("Pending after a failed push = %d, want 1", got)
	}
	// Decisions go on locally, still counting the kept hits.
	if got := p.admit(10, o); got != 6 {
		t.Fatalf("admitted %d with 4 kept hits of 10, want 6", got)
	}
	// The loop's cycle fails as well, and keeps them too.
	clk.Add(time.Second)
	if c := receive(t, cycles); c.Trigger != TriggerTimer || c.Err == nil {
		t.Fatalf("cycle reported: %+v", c)
	}
	s.setFail(nil)
	if res := p.sync(t); res != (syncResult{Pushed: 1, Fetched: 1}) {
		t.Fatalf("sync once the source is back = %+v", res)
	}
	if c := <-cycles; c.Err != nil || c.Pushed != 1 || c.Fetched != 1 {
		t.Fatalf("cycle reported: %+v", c)
	}
	if got := s.total("k", clk.Now()); got != 10 {
		t.Fatalf("the source counts %d, want 10: each hit once", got)
	}
	if got := p.remaining(t, o); got != 0 {
		t.Fatalf("remaining %d after the push, want 0", got)
	}
}

// receive waits for the next value of a channel a loop sends on, bounded
// in real time so that a loop that never runs fails the test.
func receive[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing received within 10s")
	}
	panic("unreachable")
}

// The loop of a group runs one cycle per sync_rate of its timers' clock,
// each limit on its own sync_rate.
func TestLoopRunsEverySyncRate(t *testing.T) {
	s, clk := newStore(), fakeClock()
	s.calls = make(chan int, 16)
	p := newProcess(t, s, clk, Options{Timers: clk})
	rearmed := make(chan time.Duration, 16)
	p.rearmed = func(rate time.Duration) { rearmed <- rate }
	// waitFast waits until the fast loop has set its next tick.
	waitFast := func() {
		for receive(t, rearmed) != time.Second {
		}
	}
	p.admit(1, op("fast", 10, 1, time.Second))
	p.admit(1, op("slow", 10, 1, 5*time.Second))
	clk.Add(time.Second)
	receive(t, s.calls)
	if got := s.total("fast", clk.Now()); got != 1 {
		t.Fatalf("after 1s the source counts %d fast hits, want 1", got)
	}
	if got := s.total("slow", clk.Now()); got != 0 {
		t.Fatalf("after 1s the source counts %d slow hits, want 0: its sync_rate is 5s", got)
	}
	for range 4 {
		waitFast()
		clk.Add(time.Second)
		receive(t, s.calls) // the fast group's cycle; the slow one's comes with the 5th second
	}
	receive(t, s.calls)
	if got := s.total("slow", clk.Now()); got != 1 {
		t.Fatalf("after 5s the source counts %d slow hits, want 1", got)
	}
}

// Close pushes what is pending before it returns, trying again while the
// push fails, and stops the loops.
func TestClosePushesPendingHits(t *testing.T) {
	s, clk := newStore(), fakeClock()
	var attempts atomic.Int32
	p := newProcess(t, s, clk, Options{Timers: clk, ShutdownRetry: -1, OnCycle: func(Cycle) {
		if attempts.Add(1) == 1 {
			s.setFail(nil) // the first attempt failed; the next succeeds
		}
	}})
	p.admit(7, op("k", 10, 1, time.Hour))
	p.admit(2, op("j", 10, 1, time.Minute))
	s.setFail(errors.New("busy"))
	if err := p.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got, j := s.total("k", clk.Now()), s.total("j", clk.Now()); got != 7 || j != 2 {
		t.Fatalf("after Close the source counts %d and %d, want 7 and 2", got, j)
	}
	if attempts.Load() != 3 {
		t.Fatalf("%d cycles at Close, want 3 (a failure, then one per group)", attempts.Load())
	}
	calls := s.calls_()
	clk.Add(time.Hour)
	if s.calls_() != calls {
		t.Fatal("a loop ran after Close")
	}
}

// With the source down to the end, Close gives up when its context ends
// and says how many counters kept hits.
func TestCloseGivesUpWhenItsContextEnds(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	p.admit(3, op("a", 10, 1, time.Second))
	p.admit(3, op("b", 10, 1, time.Second))
	s.setFail(errors.New("down"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := p.Close(ctx)
	if err == nil || !strings.Contains(err.Error(), "2 counters of sync_rate 1s keep hits that were not pushed") {
		t.Fatalf("Close = %v", err)
	}
	if s.calls_() != 1 {
		t.Fatalf("%d attempts with the context done, want exactly 1", s.calls_())
	}
}

// Hits of the window before are pushed as PrevHits, and still weigh on
// the source's sliding window.
func TestPushAcrossAWindowBoundary(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	o := op("k", 10, 1, time.Second)
	clk.Add(59 * time.Minute)
	p.admit(6, o)
	clk.Add(31 * time.Minute) // half-way into the next hour
	if got := p.remaining(t, o); got != 7 {
		t.Fatalf("remaining %d, want 7: 6 hits weighing half", got)
	}
	p.sync(t)
	last := s.pushes[len(s.pushes)-1][0]
	if last.Hits != 0 || last.PrevHits != 6 || last.Start != bucket.Millis(start.Add(time.Hour).UnixNano()) {
		t.Fatalf("push = %+v, want 6 previous-window hits for the window at 01:00", last)
	}
	if got := p.remaining(t, o); got != 7 {
		t.Fatalf("remaining %d after the sync, want 7", got)
	}
}

// refunder is the store's side of a refund at now, as the shared
// source's Refund gives back what the layer hands it: the window counters
// and rate counters the syncs add to, taken down by each op's cost in the
// current window (second), never below 0. The ops are kept in refunds.
func (s *store) refunder(now int64) sharedRefund {
	return func(_ context.Context, ops []bucket.Op) error {
		if len(ops) == 0 {
			return nil
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.refunds = append(s.refunds, slices.Clone(ops))
		if s.fail != nil {
			return s.fail
		}
		for _, op := range ops {
			if op.Algorithm == bucket.RateCounter {
				if c, ok := s.rates[op.Key]; ok {
					c.Remove(ratecounter.Second(now), op.Cost)
					s.rates[op.Key] = c
				}
				continue
			}
			if c, ok := s.counters[op.Key]; ok {
				c = at(c, bucket.Millis(now), op.Window.Period)
				c.Cur = max(c.Cur-op.Cost, 0)
				s.counters[op.Key] = c
			}
		}
		return nil
	}
}

// refundOn refunds ops in p at its clock's now, the source's part on s.
func (p *process) refundOn(s *store, ops ...bucket.Op) ([]bucket.Outcome, error) {
	out := make([]bucket.Outcome, len(ops))
	now := p.clk.Now().UnixNano()
	return out, p.refund(context.Background(), now, ops, out, s.refunder(now))
}

// A refund gives back the hits not pushed first, then pushed ones on the
// source, where the totals read here come down by as much at once.
func TestRefundGivesBackUnpushedHitsFirst(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p, other := newProcess(t, s, clk, Options{}), newProcess(t, s, clk, Options{})
	o := op("k", 10, 1, time.Second)
	other.remaining(t, o) // held there, so that its cycles read it
	p.admit(3, o)
	p.sync(t)
	other.sync(t)
	if got := other.remaining(t, o); got != 7 {
		t.Fatalf("another process reads %d remaining, want 7", got)
	}
	p.admit(2, o)
	refund := func(cost int64) bucket.Outcome {
		t.Helper()
		r := o
		r.Cost = cost
		out, err := p.refundOn(s, r)
		if err != nil {
			t.Fatalf("refund of %d: %v", cost, err)
		}
		return out[0]
	}
	if got := refund(1); !got.Allowed || got.Remaining != 6 || len(s.refunds) != 0 {
		t.Fatalf("refund of 1 with 2 unpushed: %+v, %d source calls; want allowed with 6 remaining and no source call", got, len(s.refunds))
	}
	if got := refund(3); !got.Allowed || got.Remaining != 9 {
		t.Fatalf("refund of 3 with 1 unpushed and 3 pushed: %+v, want allowed with 9 remaining", got)
	}
	if got := s.total("k", clk.Now()); got != 1 {
		t.Fatalf("the store counts %d after the refund, want 1", got)
	}
	if got := refund(5); !got.Allowed || got.Remaining != 10 {
		t.Fatalf("refund of 5 with 1 pushed: %+v, want allowed with 10 remaining", got)
	}
	if got := refund(1); got.Allowed || got.Remaining != 10 {
		t.Fatalf("refund with nothing counted: %+v, want nothing given back", got)
	}
	if res := p.sync(t); res.Pushed != 0 || p.remaining(t, o) != 10 || s.total("k", clk.Now()) != 0 {
		t.Fatalf("after a sync: %+v, remaining %d, the store counts %d; want nothing pushed, 10, 0", res, p.remaining(t, o), s.total("k", clk.Now()))
	}
	other.sync(t)
	if got := other.remaining(t, o); got != 10 {
		t.Fatalf("another process reads %d remaining, want 10", got)
	}
	// Local only: every hit is this process's to give back.
	l := op("l", 10, 1, -1)
	p.admit(4, l)
	r := l
	r.Cost = 3
	if out, err := p.refundOn(s, r); err != nil || !out[0].Allowed || out[0].Remaining != 9 {
		t.Fatalf("local-only refund: %+v, %v; want allowed with 9 remaining", out[0], err)
	}
	// A check-only refund gives nothing back, and no counter is made.
	r = op("new", 10, 1, time.Second)
	r.Mode = bucket.CheckOnly
	if out, err := p.refundOn(s, r); err != nil || out[0].Allowed || out[0].Remaining != 10 {
		t.Fatalf("refund of a counter never spent: %+v, %v", out[0], err)
	}
}

// A refund whose source part fails changes nothing, here or there.
func TestFailedRefundChangesNothing(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	o, w := op("k", 10, 1, time.Second), penalized(op("3:w", 10, 1, time.Second), time.Hour)
	p.admit(3, o)
	p.admit(3, w)
	p.sync(t)
	p.admit(2, o)
	s.setFail(errors.New("down"))
	r, rw := o, w
	r.Cost, rw.Cost = 4, 4
	if _, err := p.refundOn(s, r, rw); err == nil {
		t.Fatal("a refund with the source failing succeeded")
	}
	if got, gw := p.remaining(t, o), p.remaining(t, w); got != 5 || gw != 7 {
		t.Fatalf("remaining %d and %d after a failed refund, want 5 and 7", got, gw)
	}
	if n := p.Pending(); n != 1 {
		t.Fatalf("Pending = %d after a failed refund, want 1", n)
	}
	s.setFail(nil)
	if res := p.sync(t); res.Pushed != 1 || s.total("k", clk.Now()) != 5 || s.total("3:w", clk.Now()) != 3 {
		t.Fatalf("sync after a failed refund: %+v, the store counts %d and %d; want 1 pushed, 5 and 3", res, s.total("k", clk.Now()), s.total("3:w", clk.Now()))
	}
	// The window's box is not the source's business in a refund: its
	// counter is stored under its key alone.
	out, err := p.refundOn(s, r, rw)
	if err != nil || !out[0].Allowed || !out[1].Allowed || out[0].Remaining != 9 || out[1].Remaining != 10 {
		t.Fatalf("refund = %+v, %v; want both allowed, 9 and 10 remaining", out, err)
	}
	if last := s.refunds[len(s.refunds)-1]; len(last) != 2 || last[1].Box != "" || last[1].Cost != 3 || last[0].Cost != 4 {
		t.Fatalf("the source was handed %+v", last)
	}
}

// Reset forgets the local counters and the unpushed hits, and runs the
// source's part while no cycle runs.
func TestReset(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	synced, unpushed, localOnly, quiet := op("synced", 10, 1, time.Second), op("unpushed", 10, 1, time.Second), op("local", 10, 1, -1), op("quiet", 10, 1, -1)
	p.admit(3, synced)
	p.sync(t)
	p.admit(2, unpushed)
	p.admit(1, localOnly)
	var called int
	n, err := p.reset(context.Background(), clk.Now().UnixNano(), []bucket.Op{synced, unpushed, localOnly, quiet}, func(context.Context) (int, error) {
		called++
		s.mu.Lock()
		delete(s.counters, "synced") // the source's reset, which counts the one it held
		s.mu.Unlock()
		return 1, nil
	})
	// synced: the source's count; unpushed and local: only this process
	// knew them; quiet counted nothing.
	if err != nil || n != 3 || called != 1 {
		t.Fatalf("Reset = %d, %v (source called %d times), want 3", n, err, called)
	}
	for _, o := range []bucket.Op{synced, unpushed, localOnly} {
		if got := p.remaining(t, o); got != 10 {
			t.Fatalf("%s: remaining %d after the reset, want 10", o.Key, got)
		}
	}
	if res := p.sync(t); res.Pushed != 0 {
		t.Fatalf("sync after the reset pushed %d counters: the dropped hits came back", res.Pushed)
	}
	// A source reset that certainly changed nothing forgets nothing here.
	p.admit(4, localOnly)
	if _, err := p.reset(context.Background(), clk.Now().UnixNano(), []bucket.Op{localOnly}, func(context.Context) (int, error) {
		return 0, fmt.Errorf("%w: down", ratelimits.ErrNotApplied)
	}); err == nil {
		t.Fatal("Reset with the source failing succeeded")
	}
	if got := p.remaining(t, localOnly); got != 6 {
		t.Fatalf("remaining %d after a reset that changed nothing, want 6", got)
	}
	// Nor does one whose outcome is unknown: keeping too much is safer
	// than forgetting hits a reset that never applied left in place.
	if _, err := p.reset(context.Background(), clk.Now().UnixNano(), []bucket.Op{localOnly}, func(context.Context) (int, error) {
		return 0, errors.New("timed out")
	}); err == nil {
		t.Fatal("Reset with the source timing out succeeded")
	}
	if got := p.remaining(t, localOnly); got != 6 {
		t.Fatalf("remaining %d after a reset of unknown outcome, want 6", got)
	}
	// One whose steps took effect in part forgets here too: what it
	// reset on the source must not be pushed back. It still fails.
	if _, err := p.reset(context.Background(), clk.Now().UnixNano(), []bucket.Op{localOnly}, func(context.Context) (int, error) {
		return 0, partlyApplied(errors.New("down"))
	}); err == nil || errors.Is(err, ratelimits.ErrNotApplied) {
		t.Fatalf("Reset with the source failing in part: %v, want an error that does not say not applied", err)
	}
	if got := p.remaining(t, localOnly); got != 10 {
		t.Fatalf("remaining %d after a reset that failed in part, want 10", got)
	}
}

// The bound holds; an evicted counter of a limit above 0 leaves its hits
// to the next cycle, one below 0 loses them and says so.
func TestEvictionKeepsUnpushedHits(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{MaxCounters: 4})
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		p.admit(2, op(k, 10, 1, time.Second))
	}
	if got := p.Counters(); got != 4 {
		t.Fatalf("%d counters held, want the bound, 4", got)
	}
	if res := p.sync(t); res.Pushed != 6 || res.Fetched != 4 {
		t.Fatalf("sync = %+v, want 6 counters pushed (2 of them evicted), 4 fetched", res)
	}
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		if got := s.total(k, clk.Now()); got != 2 {
			t.Fatalf("the source counts %d hits of %s, want 2", got, k)
		}
	}
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		p.admit(1, op(k, 10, 1, -1))
	}
	if ev, lost := p.Evictions(); ev != 3 || lost != 1 {
		t.Fatalf("evictions %d, lost %d; want 3 and 1", ev, lost)
	}
}

// A change of period is another window: hits counted under the old one
// are not read by decisions under the new one, and are not pushed either
// (the source would replace its counter of the new period with them).
func TestPeriodChange(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	hourly := op("k", 10, 1, time.Second)
	p.admit(4, hourly)
	daily := hourly
	daily.Window.Period = (24 * time.Hour).Milliseconds()
	if got := p.admit(1, daily); got != 1 {
		t.Fatal("a spend under the new period was denied")
	}
	if got := p.remaining(t, daily); got != 9 {
		t.Fatalf("remaining %d under the new period, want 9", got)
	}
	if res := p.sync(t); res != (syncResult{Pushed: 1, Fetched: 1}) {
		t.Fatalf("sync = %+v, want the key pushed and fetched once", res)
	}
	if len(s.pushes[0]) != 1 || s.pushes[0][0].Period != daily.Window.Period || s.pushes[0][0].Hits != 1 {
		t.Fatalf("pushes %+v, want 1 hit under 24h only", s.pushes[0])
	}
	// An evicted counter's orphan of the old period is dropped when the
	// key comes back under another: the key is pushed once, of the new
	// period.
	q := newProcess(t, s, clk, Options{MaxCounters: 1})
	q.admit(3, hourly)
	q.admit(1, op("other", 10, 1, time.Second)) // evicts k: its 3 hits are its orphan
	if got := orphans(q.Layer); got != 1 {
		t.Fatalf("%d orphans after the eviction, want 1", got)
	}
	q.admit(2, daily) // evicts other, drops k's hourly orphan
	if got := q.remaining(t, daily); got != 8 {
		t.Fatalf("remaining %d under the new period, want 8", got)
	}
	if res := q.sync(t); res != (syncResult{Pushed: 2, Fetched: 1}) {
		t.Fatalf("sync = %+v, want k and other pushed once each, k fetched", res)
	}
	for _, push := range s.pushes[len(s.pushes)-1] {
		if push.Key == "k" && push.Period != daily.Window.Period {
			t.Fatalf("pushed %+v: the old period's hits", push)
		}
	}
}

// orphans counts the orphans of every group.
func orphans(l *Layer) int {
	n := 0
	for _, g := range l.allGroups() {
		for i := range g.shards {
			sh := &g.shards[i]
			sh.mu.Lock()
			n += len(sh.orphans)
			sh.mu.Unlock()
		}
	}
	return n
}

// A flood of fresh ids while pushes fail stays within the bound: the
// shard keeps MaxCounters counters and as many orphans, and the hits
// beyond are dropped and counted. Once the source is back, what was kept
// is pushed once.
func TestOrphansAreBounded(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{MaxCounters: 16})
	s.setFail(errors.New("down"))
	const ids = 100_000
	for i := range ids {
		if ok, _ := p.spend(op(fmt.Sprintf("id:%d", i), 10, 1, time.Hour)); !ok {
			t.Fatalf("spend %d denied", i)
		}
		if i == ids/2 {
			if _, _, err := p.Sync(context.Background()); err == nil {
				t.Fatal("a sync with the source down succeeded")
			}
		}
	}
	if c, o, pend := p.Counters(), orphans(p.Layer), p.Pending(); c != 16 || o != 16 || pend != 32 {
		t.Fatalf("counters %d, orphans %d, pending %d; want 16, 16, 32", c, o, pend)
	}
	if ev, lost := p.Evictions(); ev != ids-16 || lost != ids-32 {
		t.Fatalf("evictions %d, lost %d; want %d and %d", ev, lost, ids-16, ids-32)
	}
	s.setFail(nil)
	if res := p.sync(t); res != (syncResult{Pushed: 32, Fetched: 16}) {
		t.Fatalf("sync once the source is back = %+v, want 32 pushed, 16 fetched", res)
	}
	s.mu.Lock()
	n, sum := len(s.counters), int64(0)
	for _, c := range s.counters {
		sum += c.Cur
	}
	s.mu.Unlock()
	if n != 32 || sum != 32 || orphans(p.Layer) != 0 || p.Pending() != 0 {
		t.Fatalf("the source holds %d counters of %d hits, %d orphans and %d pending left; want 32, 32, 0, 0",
			n, sum, orphans(p.Layer), p.Pending())
	}
}

// An evicted counter's unpushed hits still count for its subscriber: a
// counter made again for the key takes them back before the next cycle.
func TestEvictedHitsStillCount(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{MaxCounters: 1})
	a := op("a", 10, 1, time.Second)
	p.admit(6, a)
	p.admit(1, op("b", 10, 1, time.Second)) // evicts a
	if got := orphans(p.Layer); got != 1 {
		t.Fatalf("%d orphans after a's eviction, want 1", got)
	}
	if got := p.admit(10, a); got != 4 {
		t.Fatalf("a admitted %d of 10 after its eviction, want 4: its 6 unpushed hits count", got)
	}
	if res := p.sync(t); res != (syncResult{Pushed: 2, Fetched: 1}) {
		t.Fatalf("sync = %+v, want a and b pushed, a fetched", res)
	}
	if got := s.total("a", clk.Now()); got != 10 {
		t.Fatalf("the source counts %d hits of a, want 10", got)
	}
	if ev, lost := p.Evictions(); lost != 0 || ev == 0 {
		t.Fatalf("evictions %d, lost %d; want some and none lost", ev, lost)
	}
}

// Below 0 nothing is ever orphaned: a period change or an eviction drops
// the hits, which only this process counted.
func TestLocalOnlyNeverOrphans(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{MaxCounters: 1})
	hourly := op("k", 10, 1, -1)
	p.admit(4, hourly)
	daily := hourly
	daily.Window.Period = (24 * time.Hour).Milliseconds()
	p.admit(1, daily)
	p.admit(1, op("j", 10, 1, -1)) // evicts k, which counts 1
	if got := orphans(p.Layer); got != 0 {
		t.Fatalf("%d orphans in a local-only group, want 0", got)
	}
	if _, lost := p.Evictions(); lost != 1 {
		t.Fatalf("lost %d, want 1", lost)
	}
	if got := p.remaining(t, daily); got != 10 {
		t.Fatalf("k after its eviction: remaining %d, want 10", got)
	}
}

// When a sync fails in part, the pushes the source applied are done: only
// the others are pushed again, and no hit counts twice.
func TestPartlyFailedPushIsNotCountedTwice(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	a, b := op("a", 10, 1, time.Second), op("b", 10, 1, time.Second)
	p.admit(3, a)
	p.admit(4, b)
	s.mu.Lock()
	s.only = func(key string) bool { return key == "a" }
	s.mu.Unlock()
	if _, _, err := p.Sync(context.Background()); err == nil {
		t.Fatal("a partly failed sync succeeded")
	}
	if got, pend := s.total("a", clk.Now()), p.Pending(); got != 3 || pend != 1 {
		t.Fatalf("after the partial sync the source counts %d of a and %d keys are pending; want 3 and 1", got, pend)
	}
	// a read its total (3, its own hits) and holds nothing unpushed.
	if ra, rb := p.remaining(t, a), p.remaining(t, b); ra != 7 || rb != 6 {
		t.Fatalf("remaining a %d, b %d; want 7 and 6", ra, rb)
	}
	s.mu.Lock()
	s.only = nil
	s.mu.Unlock()
	if res := p.sync(t); res != (syncResult{Pushed: 1, Fetched: 2}) {
		t.Fatalf("the next sync = %+v, want b pushed, both fetched", res)
	}
	if ta, tb := s.total("a", clk.Now()), s.total("b", clk.Now()); ta != 3 || tb != 4 {
		t.Fatalf("the source counts a %d, b %d; want 3 and 4", ta, tb)
	}
}

// A counter evicted while its hits are in flight, and made again before
// the push fails, gets those hits back: decisions count them, and the
// next cycle pushes the key once with all of them.
func TestFailedPushOfAnEvictedCounter(t *testing.T) {
	s, clk := newStore(), fakeClock()
	s.hold, s.entered = make(chan struct{}), make(chan struct{}, 4)
	p := newProcess(t, s, clk, Options{MaxCounters: 1})
	a := op("a", 10, 1, time.Second)
	p.admit(5, a)
	done := make(chan error)
	go func() {
		_, _, err := p.Sync(context.Background())
		done <- err
	}()
	receive(t, s.entered) // a's 5 hits are in flight
	p.admit(1, op("b", 10, 1, time.Second))
	p.admit(2, a) // evicts b, a new counter of a
	s.setFail(errors.New("down"))
	close(s.hold)
	if err := receive(t, done); err == nil {
		t.Fatal("the held sync succeeded")
	}
	if got := p.remaining(t, a); got != 3 {
		t.Fatalf("a's remaining %d after the failed push, want 3: 5 + 2 of its hits", got)
	}
	s.setFail(nil)
	s.hold = nil
	res := p.sync(t)
	if res != (syncResult{Pushed: 2, Fetched: 1}) {
		t.Fatalf("sync = %+v, want a and b pushed once each, a fetched", res)
	}
	if ta, tb := s.total("a", clk.Now()), s.total("b", clk.Now()); ta != 7 || tb != 1 {
		t.Fatalf("the source counts a %d, b %d; want 7 and 1", ta, tb)
	}
}

// A single-key spend on a counter already held allocates nothing.
func TestLocalSpendAllocatesNothing(t *testing.T) {
	p := newProcess(t, newStore(), fakeClock(), Options{})
	ops := []bucket.Op{op("k", 1<<40, 1, time.Second)}
	out := make([]bucket.Outcome, 1)
	now := p.clk.Now().UnixNano()
	p.Layer.spend(now, ops, out)
	if n := testing.AllocsPerRun(100, func() { p.Layer.spend(now, ops, out) }); n != 0 {
		t.Fatalf("a local spend allocates %v times, want 0", n)
	}
}

// Many goroutines on one process, with cycles running beside them: a
// process never admits more than count of its own (its own hits are always
// in what it decides on), and every admitted hit reaches the source
// exactly once.
func TestConcurrentSpendsAndSyncs(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{Timers: clk})
	o := op("k", 500, 1, time.Millisecond)
	other := op("l", 500, 1, -1)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if ok, _ := p.spend(o, other); ok {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			_, _, _ = p.Sync(context.Background())
		}
	})
	wg.Go(func() {
		for range 20 {
			clk.Add(time.Millisecond) // the loop's cycles too
		}
	})
	wg.Wait()
	if got := admitted.Load(); got != 500 {
		t.Fatalf("admitted %d of 800, want exactly 500", got)
	}
	p.sync(t)
	if got := s.total("k", clk.Now()); got != 500 {
		t.Fatalf("the source counts %d, want 500", got)
	}
}

// A reset or a sync waiting for a running cycle gives up when its context
// ends, and then does nothing.
func TestWaitingForACycleEndsWithTheContext(t *testing.T) {
	s, clk := newStore(), fakeClock()
	s.hold, s.entered = make(chan struct{}), make(chan struct{}, 16)
	p := newProcess(t, s, clk, Options{})
	o := op("k", 10, 1, time.Second)
	p.admit(2, o)
	done := make(chan error)
	go func() {
		_, _, err := p.Sync(context.Background())
		done <- err
	}()
	receive(t, s.entered) // the cycle is in its call, holding the group
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	_, err := p.reset(ctx, clk.Now().UnixNano(), []bucket.Op{o}, func(context.Context) (int, error) {
		called = true
		return 0, nil
	})
	if !errors.Is(err, context.Canceled) || called {
		t.Fatalf("Reset while a cycle runs, context done: %v (source called: %v)", err, called)
	}
	if _, _, err := p.Sync(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sync while a cycle runs, context done: %v", err)
	}
	close(s.hold)
	if err := receive(t, done); err != nil {
		t.Fatal(err)
	}
	if got := s.total("k", clk.Now()); got != 2 {
		t.Fatalf("the source counts %d, want 2", got)
	}
}

// A box listing on the source behind the layer is bounded by
// SourceTimeout, like every other call the Front makes to it.
func TestListBoxBoundedBySourceTimeout(t *testing.T) {
	p := newProcess(t, newStore(), fakeClock(), Options{SourceTimeout: time.Minute})
	inner := &deadlineLister{}
	if _, err := p.Front(inner).ListBox(context.Background(), 0, "7", "", 10); err != nil {
		t.Fatal(err)
	}
	if !inner.hadDeadline {
		t.Fatal("the listing reached the inner source without a deadline")
	}
}

// deadlineLister is an inner source that lists nothing and notes whether
// its context had a deadline; it implements nothing else.
type deadlineLister struct {
	ratelimits.Source
	hadDeadline bool
}

func (d *deadlineLister) ListBox(ctx context.Context, _ int64, _, _ string, _ int) (ratelimits.BoxPage, error) {
	_, d.hadDeadline = ctx.Deadline()
	return ratelimits.BoxPage{}, nil
}

// A refund that must wait for a running cycle waits no longer than the
// source timeout, and then fails having done nothing: a retry is a first
// try.
func TestRefundWaitsForACycleWithinTheSourceTimeout(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{SourceTimeout: 20 * time.Millisecond})
	w := op("5:u", 10, 5, time.Second)
	p.spend(w)
	p.sync(t) // the 5 hits are pushed: a refund of them needs the source
	s.hold, s.entered = make(chan struct{}), make(chan struct{}, 1)
	synced := make(chan error, 1)
	go func() { _, _, err := p.Sync(context.Background()); synced <- err }()
	<-s.entered // the cycle holds the group, waiting on the source
	refunded := make(chan error, 1)
	go func() {
		w.Cost = 3
		refunded <- p.refund(context.Background(), clk.Now().UnixNano(), []bucket.Op{w}, make([]bucket.Outcome, 1), s.refunder(clk.Now().UnixNano()))
	}()
	select {
	case err := <-refunded:
		if !errors.Is(err, ratelimits.ErrNotApplied) {
			t.Errorf("refund behind a running cycle: %v, want ErrNotApplied", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the refund still waits for the running cycle")
	}
	close(s.hold)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	w.Cost = 0
	if got := p.remaining(t, w); got != 5 {
		t.Errorf("after the refused refund, %d remaining, want 5", got)
	}
}
