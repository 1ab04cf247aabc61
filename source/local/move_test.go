package local

import (
	"context"
	"testing"
	"time"
)

// A reload that changes a limit's sync_rate (Move) keeps what this
// process counted of it: above 0 the old group pushes its hits at once,
// and the new group decides from the same counts, its boxed ids still
// boxed; to 0 the source has every hit; from below 0 the hits become
// hits to push.
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

	// From below 0 the hits were this process's alone: after Move above 0
	// they are pushed at the next cycle.
	local := op("8:u", 10, 4, -1)
	p.spend(local)
	p.Move(ctx, []Moved{{Name: "8:", From: -1, To: fast}})
	local.SyncRate = fast
	if got := p.remaining(t, local); got != 6 {
		t.Errorf("after Move from below 0, %d remaining, want 6", got)
	}
	p.sync(t)
	if got := s.counters["8:u"]; got.Cur != 4 {
		t.Errorf("the store counts %+v for 8:u after the cycle, want the 4 hits pushed", got)
	}
	if got := p.remaining(t, local); got != 6 {
		t.Errorf("after the cycle, %d remaining, want 6", got)
	}
}
