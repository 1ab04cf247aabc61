package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/internal/vectors"
	"github.com/limiter-dev/limiter/ratelimits"
)

// The public vectors at the library level, exact to the nanosecond, with
// the Limiter on a jmhodges fake clock deciding in Redis.
func TestPublicVectors(t *testing.T) {
	f, err := vectors.Public()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			cfg, err := ratelimits.ParseConfig("defaults.yaml", f.Defaults, "overrides.yaml", f.Overrides)
			if err != nil {
				t.Fatal(err)
			}
			clk := clock.NewFake()
			clk.Set(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
			l, err := ratelimits.NewLimiter(cfg, newSource(t, b.opts(t)), clk)
			if err != nil {
				t.Fatal(err)
			}
			vectors.Run(t, f, &limiterDriver{limiter: l, clock: clk}, time.Nanosecond)
		})
	}
}

// limiterDriver runs vector steps against a Limiter directly.
type limiterDriver struct {
	limiter *ratelimits.Limiter
	clock   clock.FakeClock
}

func (d *limiterDriver) Advance(dur time.Duration) error {
	d.clock.Add(dur)
	return nil
}

func (d *limiterDriver) Do(op string, txns []vectors.Txn) (vectors.Result, error) {
	ctx := context.Background()
	in := make([]ratelimits.Transaction, len(txns))
	for i, vt := range txns {
		mode, err := ratelimits.ParseMode(vt.Mode)
		if err != nil {
			return vectors.Result{Status: 400}, nil
		}
		in[i] = ratelimits.Transaction{Limit: vt.Limit, ID: vt.ID, Cost: 1, Mode: mode}
		if vt.Cost != nil {
			in[i].Cost = *vt.Cost
		}
	}
	var bd *ratelimits.BatchDecision
	var err error
	switch op {
	case "spend":
		bd, err = d.limiter.Spend(ctx, in)
	case "check":
		bd, err = d.limiter.Check(ctx, in)
	case "refund":
		bd, err = d.limiter.Refund(ctx, in)
	case "reset":
		_, err = d.limiter.Reset(ctx, in)
		bd = &ratelimits.BatchDecision{}
	default:
		return vectors.Result{}, errors.New("unknown op " + op)
	}
	switch {
	case errors.Is(err, ratelimits.ErrSourceUnavailable):
		return vectors.Result{}, err
	case err != nil:
		return vectors.Result{Status: 400}, nil
	}
	res := vectors.Result{Status: 200, Allowed: bd.Allowed, Remaining: bd.Remaining, RetryIn: int64(bd.RetryIn), ResetIn: int64(bd.ResetIn)}
	for _, dd := range bd.Decisions {
		res.Decisions = append(res.Decisions, vectors.ResultDecision{
			Limit: dd.Name, ID: dd.ID, Allowed: dd.Allowed, Remaining: dd.Remaining,
			RetryIn: int64(dd.RetryIn), ResetIn: int64(dd.ResetIn),
		})
	}
	return res, nil
}
