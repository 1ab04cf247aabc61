package vectors

import (
	"context"
	"errors"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/ratelimits"
)

// LimiterDriver runs vector steps against a Limiter directly, on a fake
// clock, with exact nanoseconds. A refused batch is status 400, as the
// HTTP API answers it; a source failure is an error.
type LimiterDriver struct {
	Limiter *ratelimits.Limiter
	Clock   clock.FakeClock
}

// Advance moves the fake clock.
func (d *LimiterDriver) Advance(dur time.Duration) error {
	d.Clock.Add(dur)
	return nil
}

// Do runs one operation.
func (d *LimiterDriver) Do(op string, txns []Txn) (Result, error) {
	ctx := context.Background()
	in := make([]ratelimits.Transaction, len(txns))
	for i, vt := range txns {
		mode, err := ratelimits.ParseMode(vt.Mode)
		if err != nil {
			return Result{Status: 400}, nil
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
		bd, err = d.Limiter.Spend(ctx, in)
	case "check":
		bd, err = d.Limiter.Check(ctx, in)
	case "refund":
		bd, err = d.Limiter.Refund(ctx, in)
	case "reset":
		_, err = d.Limiter.Reset(ctx, in)
		bd = &ratelimits.BatchDecision{}
	default:
		return Result{}, errors.New("unknown op " + op)
	}
	switch {
	case errors.Is(err, ratelimits.ErrSourceUnavailable):
		return Result{}, err
	case err != nil:
		return Result{Status: 400}, nil
	}
	res := Result{Status: 200, Allowed: bd.Allowed, Remaining: bd.Remaining, RetryIn: int64(bd.RetryIn), ResetIn: int64(bd.ResetIn)}
	for _, dd := range bd.Decisions {
		res.Decisions = append(res.Decisions, ResultDecision{
			Limit: dd.Limit, ID: dd.ID, Allowed: dd.Allowed, Remaining: dd.Remaining,
			RetryIn: int64(dd.RetryIn), ResetIn: int64(dd.ResetIn), Algorithm: dd.Algorithm.String(),
		})
	}
	return res, nil
}
