package ratelimits_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/ratelimits"
)

const shadowDefaults = `
Enforced:
  enum: 101
  id: string
  burst: 2
  count: 2
  period: 1m
Watched:
  enum: 102
  id: string
  burst: 1
  count: 1
  period: 1m
  shadow: true
WatchedWindow:
  enum: 103
  id: string
  algorithm: fixed-window
  count: 1
  period: 1m
  shadow: true
`

// A shadow limit is decided and kept like a spend-only transaction: it
// never denies the batch nor decides it, and it is written only while it
// is itself allowed and the batch is.
func TestShadowLimitNeverDenies(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLimiter(t, shadowDefaults, "")
	batch := []ratelimits.Transaction{{Limit: "Enforced", ID: "a", Cost: 1}, {Limit: "Watched", ID: "a", Cost: 1}}

	// First spend: both allowed; the shadow token is taken.
	bd, err := l.Spend(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if !bd.Allowed || bd.Deciding != 0 || !bd.Decisions[1].Allowed || !bd.Decisions[1].Shadow || bd.Decisions[0].Shadow {
		t.Fatalf("first spend: %+v", bd)
	}

	// Second spend: the shadow limit is out of tokens and says so, but
	// the batch is allowed and the enforced limit decides it.
	bd, err = l.Spend(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if !bd.Allowed || bd.Deciding != 0 || bd.Remaining != 0 {
		t.Fatalf("second spend: batch %+v", bd)
	}
	if bd.Decisions[1].Allowed || !bd.Decisions[1].Shadow {
		t.Fatalf("second spend: the shadow decision %+v, want denied and marked shadow", bd.Decisions[1])
	}

	// Third spend: the enforced limit denies; nothing is written, so a
	// check of the shadow limit alone still shows it empty, and the
	// enforced one still at 0.
	bd, err = l.Spend(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if bd.Allowed || bd.Deciding != 0 {
		t.Fatalf("third spend: %+v, want denied by the enforced limit", bd)
	}

	// A batch of shadow limits alone is always allowed, and nobody
	// decides it.
	bd, err = l.Spend(ctx, []ratelimits.Transaction{{Limit: "Watched", ID: "a", Cost: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !bd.Allowed || bd.Deciding != -1 || bd.Decisions[0].Allowed {
		t.Fatalf("shadow alone: %+v, want allowed with no deciding transaction and the shadow decision denied", bd)
	}
	// So is a check.
	bd, err = l.Check(ctx, []ratelimits.Transaction{{Limit: "Watched", ID: "a", Cost: 1}, {Limit: "WatchedWindow", ID: "a", Cost: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !bd.Allowed || bd.Deciding != -1 || bd.Decisions[0].Allowed || !bd.Decisions[1].Allowed {
		t.Fatalf("check: %+v", bd)
	}
}

// A check-only transaction of a shadow limit beside transactions that
// write is decided apart, so that its denial cannot stop their writes.
func TestShadowCheckOnlyDoesNotStopWrites(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLimiter(t, shadowDefaults, "")
	if _, err := l.Spend(ctx, []ratelimits.Transaction{{Limit: "Watched", ID: "b", Cost: 1}}); err != nil {
		t.Fatal(err)
	}
	batch := []ratelimits.Transaction{
		{Limit: "Watched", ID: "b", Cost: 1, Mode: ratelimits.CheckOnly},
		{Limit: "Enforced", ID: "b", Cost: 2},
	}
	bd, err := l.Spend(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if !bd.Allowed || bd.Deciding != 1 || bd.Decisions[0].Allowed || !bd.Decisions[0].Shadow {
		t.Fatalf("spend: %+v", bd)
	}
	// The enforced limit's two tokens were taken.
	d, err := l.Inspect(ctx, "Enforced", "b")
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining != 0 {
		t.Fatalf("Enforced after the spend: remaining %d, want 0", d.Remaining)
	}
	// One idempotency record cannot cover the two source calls.
	_, err = l.SpendOnce(ctx, "key", batch)
	var te *ratelimits.TransactionError
	if !errors.Is(err, ratelimits.ErrShadowCheckIdempotency) || !errors.As(err, &te) || te.Index != 0 {
		t.Fatalf("SpendOnce: %v, want ErrShadowCheckIdempotency at transaction 0", err)
	}
}

// shadow belongs to the name: overrides inherit it and cannot set it.
func TestShadowBelongsToTheName(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLimiter(t, shadowDefaults, `
- Watched:
    burst: 5
    count: 5
    period: 1m
    ids: [{id: big}]
`)
	d, err := l.Inspect(ctx, "Watched", "big")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Shadow || !d.Effective.Override || !d.Effective.Shadow || d.Effective.Burst != 5 {
		t.Fatalf("override: %+v", d)
	}
	info, _ := l.Config().Lookup("Watched")
	enforced, _ := l.Config().Lookup("Enforced")
	if !l.Config().Shadow(info.Name) || l.Config().Shadow(enforced.Name) {
		t.Fatal("Config.Shadow: want true for Watched only")
	}

	for _, tc := range []struct{ name, defaults, overrides, want string }{
		{"on an override", shadowDefaults, "- Watched:\n    burst: 5\n    count: 5\n    period: 1m\n    shadow: false\n    ids: [{id: x}]\n", "overrides.yaml:5: Watched: an override cannot set shadow"},
		{"not a bool", "A:\n  enum: 101\n  id: string\n  burst: 1\n  count: 1\n  period: 1m\n  shadow: yes please\n", "", "defaults.yaml:7: A: shadow must be true or false"},
	} {
		_, err := configfile.Parse("defaults.yaml", []byte(tc.defaults), "overrides.yaml", []byte(tc.overrides))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// A shadow limit with a penalty boxes nobody: its spends take part as
// spend-only ones, and a check, or a check-only transaction, answers as
// the spend would, its bucket's denial rather than a box's.
func TestShadowPenaltyBoxesNobody(t *testing.T) {
	const defaults = `
WatchedLockout:
  enum: 104
  id: string
  burst: 2
  count: 2
  period: 1m
  penalty: 5m
  shadow: true
WatchedWindowLockout:
  enum: 105
  id: string
  algorithm: fixed-window
  count: 2
  period: 1m
  penalty: 5m
  shadow: true
`
	ctx := context.Background()
	l, _ := newTestLimiter(t, defaults, "")
	for _, limit := range []string{"WatchedLockout", "WatchedWindowLockout"} {
		if _, err := l.Spend(ctx, []ratelimits.Transaction{{Limit: limit, ID: "q", Cost: 2}}); err != nil {
			t.Fatal(err)
		}
		spend, err := l.Spend(ctx, []ratelimits.Transaction{{Limit: limit, ID: "q", Cost: 1}})
		if err != nil {
			t.Fatal(err)
		}
		check, err := l.Check(ctx, []ratelimits.Transaction{{Limit: limit, ID: "q", Cost: 1}})
		if err != nil {
			t.Fatal(err)
		}
		checkOnly, err := l.Spend(ctx, []ratelimits.Transaction{{Limit: limit, ID: "q", Cost: 1, Mode: ratelimits.CheckOnly}})
		if err != nil {
			t.Fatal(err)
		}
		sd := spend.Decisions[0]
		if sd.Allowed || sd.Penalized || sd.RetryIn > time.Minute {
			t.Fatalf("%s: a spend over the limit: %+v, want denied by the bucket, not boxed", limit, sd)
		}
		for name, d := range map[string]ratelimits.Decision{"check": check.Decisions[0], "check-only": checkOnly.Decisions[0]} {
			if d.Penalized || d.RetryIn != sd.RetryIn || d.ResetIn != sd.ResetIn {
				t.Errorf("%s: a %s answers %+v; want what the spend answered, %+v", limit, name, d, sd)
			}
		}
	}
}
