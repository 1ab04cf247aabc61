package local

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// A reload that changes a limit's sync_rate (Move) keeps what this
// process counted of it: above 0 the old group pushes its hits at once,
// and the new group decides from the same counts, its boxed ids still
// boxed; to 0 the source has every hit.
func TestMoveKeepsWhatWasCounted(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	ctx := context.Background()
	slow, fast := 300*time.Second, 5*time.Second
	w := op("5:u", 10, 8, slow)
	if ok, _ := p.spend(w); !ok {
		t.Fatal("8 of 10 denied")
	}
	if ok, out := p.spend(rop("6:u", 150, slow, 0)); ok || !out[0].Penalized {
		t.Fatalf("150 hits of a rate of 100: %v %+v, want boxed", ok, out[0])
	}
	before := s.n
	p.Move(ctx, []Moved{{Name: "5:", From: slow, To: fast}, {Name: "6:", From: slow, To: fast}, {Name: "7:", From: 0, To: fast}})
	if s.n != before+1 {
		t.Errorf("Move made %d window pushes, want 1: the old group's cycle, once", s.n-before)
	}
	if got := s.storedHits("6:u", clk.Now(), 10); got != 150 {
		t.Errorf("the store counts %d hits of 6:u after Move, want the 150 pushed", got)
	}
	w.SyncRate = fast
	if got := p.remaining(t, w); got != 2 {
		t.Errorf("after Move to %s, %d remaining, want 2", fast, got)
	}
	if got := p.boxed(t, "6:u", fast); got != start.Add(time.Minute).UnixNano() {
		t.Errorf("after Move to %s, 6:u boxed until %d, want %d", fast, got, start.Add(time.Minute).UnixNano())
	}
	if ok, _ := p.spend(op("5:u", 10, 3, fast)); ok {
		t.Error("3 more of 10 after 8 allowed in the new group")
	}
	// The new group's cycle reads the totals again: still 8.
	p.sync(t)
	if got := p.remaining(t, w); got != 2 {
		t.Errorf("after the new group's cycle, %d remaining, want 2", got)
	}
	if got := s.total("5:u", clk.Now()); got != 8 {
		t.Errorf("the store counts %d hits of 5:u, want 8: each once", got)
	}
}

// With the source down, the old group's push fails: the unpushed hits and
// box entries move with the limit, and the new group pushes them once
// the source is back; the old group no longer does.
func TestMoveWhileTheSourceFails(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	ctx := context.Background()
	slow, fast := 300*time.Second, 5*time.Second
	w := penalized(op("5:u", 10, 6, slow), time.Hour)
	p.spend(w)
	if ok, out := p.spend(penalized(op("5:u", 10, 6, slow), time.Hour)); ok || !out[0].Penalized {
		t.Fatalf("12 of 10: %v %+v, want denied and boxed", ok, out[0])
	}
	s.fail = errors.New("down")
	p.Move(ctx, []Moved{{Name: "5:", From: slow, To: fast}})
	w.SyncRate, w.Cost = fast, 0
	counter := op("5:u", 10, 0, fast) // the window alone: the id is boxed
	if got := p.remaining(t, counter); got != 4 {
		t.Errorf("after Move with the source down, %d remaining, want 4", got)
	}
	s.fail = nil
	// The new group's cycle alone, as its timer runs it, before the old
	// group's: what it reads back must not undo what moved.
	if _, err := p.runCycle(ctx, p.groupOf(fast), TriggerTimer); err != nil {
		t.Fatal(err)
	}
	if got := p.remaining(t, counter); got != 4 {
		t.Errorf("after the new group's cycle, %d remaining, want 4", got)
	}
	if _, out := p.spend(w); !out[0].Penalized {
		t.Errorf("after the new group's cycle, the id is not boxed: %+v", out[0])
	}
	p.sync(t)
	if got := s.total("5:u", clk.Now()); got != 6 {
		t.Errorf("the store counts %d hits of 5:u after the syncs, want the 6 counted, once", got)
	}
	if got := s.storedBox("5:u"); got != start.Add(time.Hour).UnixNano() {
		t.Errorf("the store boxes 5:u until %d, want %d", got, start.Add(time.Hour).UnixNano())
	}
	if got := p.remaining(t, counter); got != 4 {
		t.Errorf("after the new group's cycle, %d remaining, want 4", got)
	}
	if _, out := p.spend(w); !out[0].Penalized {
		t.Errorf("after the move, the id is not boxed: %+v", out[0])
	}
}

// A limit moved to and fro counts each hit once, here and on the source.
func TestMoveToAndFroCountsOnce(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	ctx := context.Background()
	fast := 5 * time.Second
	// Below 0, above, below again: the 4 hits stay 4.
	w := op("8:u", 10, 4, -1)
	p.spend(w)
	p.Move(ctx, []Moved{{Name: "8:", From: -1, To: fast}})
	p.Move(ctx, []Moved{{Name: "8:", From: fast, To: -1}})
	w.SyncRate = -1
	if got := p.remaining(t, w); got != 6 {
		t.Errorf("window below 0, above, below: %d remaining, want 6", got)
	}
	// Above 0, below, above again: the store counts the 4 pushed once.
	w = op("9:u", 10, 4, fast)
	p.spend(w)
	p.sync(t)
	p.Move(ctx, []Moved{{Name: "9:", From: fast, To: -1}})
	p.Move(ctx, []Moved{{Name: "9:", From: -1, To: fast}})
	p.sync(t)
	if got := s.total("9:u", clk.Now()); got != 4 {
		t.Errorf("window above 0, below, above: the store counts %d, want 4", got)
	}
	// A rate counter below 0 cannot tell its own hits from what it
	// started from: moved above 0 they count as totals read, until the
	// first cycle reads the source's (they were never on it); nothing is
	// pushed, so nothing is counted twice.
	r := rop("6:u", 30, -1, 0)
	p.spend(r)
	p.Move(ctx, []Moved{{Name: "6:", From: -1, To: fast}})
	r.SyncRate, r.Cost = fast, 0
	if _, out := p.spend(r); out[0].Remaining != 70 {
		t.Errorf("rate counter moved above 0: %d remaining, want 70", out[0].Remaining)
	}
	p.sync(t)
	if got := s.storedHits("6:u", clk.Now(), 10); got != 0 {
		t.Errorf("the store counts %d hits of a counter below 0 moved above, want none pushed", got)
	}
}

// Moved below 0 after a failed push, the unpushed hits count in the new
// group, and are not pushed any more; moved back, they count once.
func TestMoveBelowZeroAndBackAfterAFailedPush(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	ctx := context.Background()
	fast := 5 * time.Second
	w := op("5:u", 10, 4, fast)
	p.spend(w)
	r := rop("6:u", 30, fast, 0)
	p.spend(r)
	s.setFail(errors.New("down"))
	p.Move(ctx, []Moved{{Name: "5:", From: fast, To: -1}, {Name: "6:", From: fast, To: -1}})
	w.SyncRate, r.SyncRate, r.Cost = -1, -1, 0
	if got := p.remaining(t, w); got != 6 {
		t.Errorf("window below 0: %d remaining, want 6", got)
	}
	if _, out := p.spend(r); out[0].Remaining != 70 {
		t.Errorf("rate counter below 0: %d remaining, want 70", out[0].Remaining)
	}
	p.Move(ctx, []Moved{{Name: "5:", From: -1, To: fast}, {Name: "6:", From: -1, To: fast}})
	w.SyncRate, r.SyncRate = fast, fast
	if got := p.remaining(t, w); got != 6 {
		t.Errorf("window back above 0: %d remaining, want 6", got)
	}
	if _, out := p.spend(r); out[0].Remaining != 70 {
		t.Errorf("rate counter back above 0: %d remaining, want 70", out[0].Remaining)
	}
	s.setFail(nil)
	p.sync(t)
	if got := s.total("5:u", clk.Now()); got > 4 {
		t.Errorf("the store counts %d hits of 5:u, want at most the 4 counted", got)
	}
}

// Evicted counters' and entries' orphans move with the limit: below 0
// they count, and the id stays boxed.
func TestMoveTakesOrphans(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{MaxCounters: 1})
	ctx := context.Background()
	fast := 5 * time.Second
	a := op("5:a", 10, 4, fast)
	p.spend(a)
	p.spend(op("5:b", 10, 1, fast))   // evicts 5:a: its hits an orphan
	p.spend(rop("6:a", 150, fast, 1)) // boxed
	p.spend(rop("6:b", 1, fast, 1))   // evicts 6:a's counter and box entry
	s.setFail(errors.New("down"))
	p.Move(ctx, []Moved{{Name: "5:", From: fast, To: -1}, {Name: "6:", From: fast, To: -1}})
	a.SyncRate = -1
	if got := p.remaining(t, a); got != 6 {
		t.Errorf("an orphan's hits moved below 0: %d remaining, want 6", got)
	}
	if got := p.boxed(t, "6:a", -1); got == 0 {
		t.Error("an orphan box entry moved below 0 boxes nobody")
	}
}

// Moved to 0, a limit leaves nothing in its old group but what it must
// still push; moved back, nothing comes back.
func TestMoveToZeroAndBack(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	ctx := context.Background()
	fast := time.Second
	w := op("5:u", 10, 4, -1)
	p.spend(w)
	p.spend(rop("6:u", 150, -1, 0)) // boxed below 0
	p.Move(ctx, []Moved{{Name: "5:", From: -1, To: 0}, {Name: "6:", From: -1, To: 0}})
	p.Move(ctx, []Moved{{Name: "5:", From: 0, To: -1}, {Name: "6:", From: 0, To: -1}})
	if got := p.remaining(t, w); got != 10 {
		t.Errorf("below 0, to 0 and back: %d remaining, want 10", got)
	}
	if got := p.boxed(t, "6:u", -1); got != 0 {
		t.Errorf("below 0, to 0 and back: still boxed until %d", got)
	}
	// Above 0 with the source down, to 0: the unpushed hits are pushed
	// by the old group once the source is back, and the old group no
	// longer follows the limit's box log.
	p.Follow([]Followed{{Name: "9:", SyncRate: fast}})
	p.spend(op("9:u", 10, 4, fast))
	s.setFail(errors.New("down"))
	p.Move(ctx, []Moved{{Name: "9:", From: fast, To: 0}})
	s.setFail(nil)
	p.sync(t)
	if got := s.total("9:u", clk.Now()); got != 4 {
		t.Errorf("the store counts %d hits of 9:u after the move to 0, want 4", got)
	}
	if tb := (*p.groupOf(fast).tables.Load())["9:"]; tb != nil && tb.follows {
		t.Error("the old group still follows the box log of a limit moved to 0")
	}
}

// What was removed or reset while a limit was in another group does not
// come back when it moves back.
func TestMoveBackBringsNothingBack(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	ctx := context.Background()
	fast := 5 * time.Second
	p.spend(rop("6:u", 150, -1, 0)) // boxed
	p.Move(ctx, []Moved{{Name: "6:", From: -1, To: fast}})
	p.call(t, bucket.Call{Box: "6:u", Action: bucket.BoxRemove}, fast)
	if got := p.boxed(t, "6:u", fast); got != 0 {
		t.Fatalf("after the removal, boxed until %d", got)
	}
	p.Move(ctx, []Moved{{Name: "6:", From: fast, To: -1}})
	if got := p.boxed(t, "6:u", -1); got != 0 {
		t.Errorf("moved back below 0, the removed entry boxes again until %d", got)
	}
	w := op("7:u", 10, 4, -1)
	p.spend(w)
	p.Move(ctx, []Moved{{Name: "7:", From: -1, To: fast}})
	w.SyncRate = fast
	if _, err := p.reset(ctx, clk.Now().UnixNano(), []bucket.Op{w}, func(context.Context) (int, error) { return 0, nil }); err != nil {
		t.Fatal(err)
	}
	p.Move(ctx, []Moved{{Name: "7:", From: fast, To: -1}})
	w.SyncRate = -1
	if got := p.remaining(t, w); got != 10 {
		t.Errorf("moved back below 0 after a reset, %d remaining, want 10", got)
	}
}

// A reset counts a window moved below 0, which holds what it started
// from rather than hits of its own.
func TestResetCountsAWindowMovedBelowZero(t *testing.T) {
	s, clk := newStore(), fakeClock()
	p := newProcess(t, s, clk, Options{})
	ctx := context.Background()
	fast := 5 * time.Second
	w := op("5:u", 10, 4, fast)
	p.spend(w)
	p.sync(t)
	p.Move(ctx, []Moved{{Name: "5:", From: fast, To: -1}})
	w.SyncRate = -1
	n, err := p.reset(ctx, clk.Now().UnixNano(), []bucket.Op{w}, func(context.Context) (int, error) { return 0, nil })
	if err != nil || n != 1 {
		t.Errorf("Reset = %d, %v; want 1", n, err)
	}
}

// resetStub answers a reset with the ops whose key, or box entry, it
// holds.
type resetStub struct {
	ratelimits.Source
	held map[string]bool
}

func (r *resetStub) Reset(_ context.Context, _ int64, ops []bucket.Op) (int, error) {
	n := 0
	for _, op := range ops {
		if (op.Box == "" && r.held[op.Key]) || (op.Box != "" && r.held["box:"+op.Box]) {
			n++
		}
	}
	return n, nil
}

// Several windows above 0 with a box count once each that held
// something, the one holding hits only and the one boxing only alike.
func TestResetCountsEachWindowWithABox(t *testing.T) {
	clk := fakeClock()
	p := newProcess(t, newStore(), clk, Options{})
	fast := 5 * time.Second
	a := penalized(op("5:a", 10, 0, fast), time.Hour)
	b := penalized(op("5:b", 10, 0, fast), time.Hour)
	f := p.Front(&resetStub{held: map[string]bool{"5:a": true, "box:5:b": true}})
	if n, err := f.Reset(context.Background(), clk.Now().UnixNano(), []bucket.Op{a, b}); err != nil || n != 2 {
		t.Errorf("Reset = %d, %v; want 2", n, err)
	}
}
