package local

import (
	"context"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/source/memory"
)

// boxedGCRA is a GCRA op of burst 1 a minute on key whose denial boxes
// it until boxUntil.
func boxedGCRA(key string, mode bucket.Mode, boxUntil int64) bucket.Op {
	return bucket.Op{Key: key, EmissionInterval: int64(time.Minute), BurstOffset: int64(time.Minute), Cost: 1, Mode: mode, Box: key, BoxUntil: boxUntil}
}

// In a batch the local part denies, the inner part answers as it would in
// a denied batch on one source: here a spend-only op of a limit with a
// penalty, whose bucket is empty, answers its bucket's denial (a
// spend-only op never boxes), not a box's.
func TestLocalDenialSpendOnlyAnswersItsBucket(t *testing.T) {
	clk := fakeClock()
	now := clk.Now().UnixNano()
	local := op("w", 1, 1, -1)
	front := newProcess(t, nil, clk, Options{}).Front(memory.New(0))
	one := memory.New(0)
	for _, src := range []interface {
		Spend(context.Context, int64, []bucket.Op, []bucket.Outcome) error
	}{front, one} {
		for _, fill := range []bucket.Op{local, boxedGCRA("g", bucket.SpendOnly, now+int64(30*time.Second))} {
			if err := src.Spend(context.Background(), now, []bucket.Op{fill}, make([]bucket.Outcome, 1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	ops := []bucket.Op{local, boxedGCRA("g", bucket.SpendOnly, now+int64(30*time.Second))}
	got, want := make([]bucket.Outcome, 2), make([]bucket.Outcome, 2)
	if err := front.Spend(context.Background(), now, ops, got); err != nil {
		t.Fatal(err)
	}
	if err := one.Spend(context.Background(), now, ops, want); err != nil {
		t.Fatal(err)
	}
	if got[1].Decision != want[1].Decision || got[1].Penalized {
		t.Fatalf("the spend-only op behind the layer: %+v; on one source: %+v", got[1].Decision, want[1].Decision)
	}
}

// A check-and-spend op that its own bucket denies, in a batch the local
// part denies, has its id boxed on the inner source with its BoxUntil,
// once; an id the inner source has boxed already is left as it is, with
// no push.
func TestLocalDenialBoxesOnlyNewlyDenied(t *testing.T) {
	clk := fakeClock()
	t0 := clk.Now().UnixNano()
	s := newStore()
	front := newProcess(t, s, clk, Options{}).Front(memory.New(0))
	spend := func(now int64, ops ...bucket.Op) []bucket.Outcome {
		t.Helper()
		out := make([]bucket.Outcome, len(ops))
		if err := front.Spend(context.Background(), now, ops, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	local := op("w", 1, 1, -1)
	boxedAt := t0 + int64(30*time.Minute)
	// The local window full; g's bucket emptied, then g boxed on the inner
	// source by a denial of its own.
	spend(t0, local)
	spend(t0, boxedGCRA("g", bucket.CheckAndSpend, boxedAt))
	spend(t0, boxedGCRA("g", bucket.CheckAndSpend, boxedAt))
	t1 := t0 + int64(time.Second)
	spend(t1, boxedGCRA("h", bucket.CheckAndSpend, t1+int64(30*time.Minute)))
	for range 3 {
		out := spend(t1, local, boxedGCRA("g", bucket.CheckAndSpend, t1+int64(30*time.Minute)))
		if !out[1].Penalized || out[1].RetryIn != boxedAt-t1 {
			t.Fatalf("g, boxed already: %+v, want its box's own expiry", out[1].Decision)
		}
	}
	out := spend(t1, local, boxedGCRA("h", bucket.CheckAndSpend, t1+int64(30*time.Minute)))
	if !out[1].Penalized || out[1].RetryIn != int64(30*time.Minute) {
		t.Fatalf("h, denied by its bucket: %+v, want boxed for 30m", out[1].Decision)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rn != 1 || len(s.ratePushes[0]) != 1 || s.ratePushes[0][0].Box != "h" || s.ratePushes[0][0].BoxExpires != t1+int64(30*time.Minute) {
		t.Fatalf("%d box pushes %+v, want one, of h until its BoxUntil", s.rn, s.ratePushes)
	}
}
