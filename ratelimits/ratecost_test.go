package ratelimits_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/internal/vectors"
	"github.com/limiter-dev/limiter/ratelimits"
)

// A rate-counter transaction's cost is hits observed, from 0 to
// MaxRateCost, whatever rate × window is; above is refused before
// anything is counted. A GCRA limit's cost stays bounded by its burst.
func TestRateCounterCostBound(t *testing.T) {
	rc, err := ratelimits.NewRateCounterLimit(10*time.Second, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	gcra, err := ratelimits.NewLimit(5, 5, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ratelimits.NewConfig(
		[]ratelimits.NameInfo{{Name: 130, Limit: "PerIP", Kind: ratelimits.KindIP}, {Name: 131, Limit: "Small", Kind: ratelimits.KindString}},
		map[string]ratelimits.Limit{"PerIP": rc, "Small": gcra}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(start)
	l, err := ratelimits.NewLimiter(cfg, vectors.NewModelSource(), clk)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		limit string
		cost  int64
		ok    bool
	}{
		{"PerIP", ratelimits.MaxRateCost, true}, // far above rate × window (100)
		{"PerIP", ratelimits.MaxRateCost + 1, false},
		{"PerIP", -1, false},
		{"Small", 5, true},
		{"Small", 6, false},
	} {
		txn := ratelimits.Transaction{Limit: c.limit, ID: "192.0.2.1", Cost: c.cost, Mode: ratelimits.CheckOnly}
		for name, call := range map[string]func(context.Context, []ratelimits.Transaction) (*ratelimits.BatchDecision, error){
			"check": l.Check, "refund": l.Refund, "spend": l.Spend,
		} {
			_, err := call(ctx, []ratelimits.Transaction{txn})
			if c.ok != (err == nil) || (err != nil && !errors.Is(err, ratelimits.ErrInvalidCost)) {
				t.Errorf("%s %s cost %d: %v; want ok %v or ErrInvalidCost", name, c.limit, c.cost, err, c.ok)
			}
		}
	}
	// The refused spends counted nothing: a spend of cost 1 sees one hit.
	bd, err := l.Spend(ctx, []ratelimits.Transaction{{Limit: "PerIP", ID: "192.0.2.2", Cost: ratelimits.MaxRateCost + 1}})
	if err == nil {
		t.Fatalf("spend above the bound: %+v", bd)
	}
	bd, err = l.Spend(ctx, []ratelimits.Transaction{{Limit: "PerIP", ID: "192.0.2.2", Cost: 1}})
	if err != nil || !bd.Allowed || bd.Remaining != 99 {
		t.Fatalf("spend of 1 after a refused one: %+v %v; want allowed, 99 remaining", bd, err)
	}
}
