package vectors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/httpapi/wire"
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
			HasPenalized: dd.Effective.HasBox(), Penalized: dd.Penalized,
		})
	}
	return res, nil
}

// ERL makes an ERL call on the Limiter and answers it as the HTTP API
// does (durations in whole milliseconds, rounded up; rates hits / window),
// so that the same expectations hold at both levels. A body the API would
// refuse, and every refusal of the Limiter but a source failure, is status
// 400.
func (d *LimiterDriver) ERL(step *ERLStep) (ERLResult, error) {
	answer, err := d.erl(context.Background(), step)
	switch {
	case errors.Is(err, errBadBody), ratelimits.IsClientError(err):
		return ERLResult{Status: 400}, nil
	case err != nil:
		return ERLResult{}, err
	}
	m, err := answerOf(answer)
	if err != nil {
		return ERLResult{}, err
	}
	return ERLResult{Status: 200, Answer: m}, nil
}

// errBadBody is the driver's refusal of a body the API would refuse.
var errBadBody = errors.New("vectors: bad ERL body")

// erl makes the call and returns its answer as a wire type.
func (d *LimiterDriver) erl(ctx context.Context, step *ERLStep) (any, error) {
	l := d.Limiter
	switch step.Call {
	case "check_rate":
		var b wire.CheckRateRequest
		if err := strictBody(step.Body, &b); err != nil {
			return nil, err
		}
		ttl, err := parseTTL(*b.TTL)
		if err != nil {
			return nil, err
		}
		checks := []ratelimits.RateCheck{{Counter: *b.RateCounter, Delta: *b.Delta, Window: *b.Window, Limit: *b.Limit}}
		r, err := l.CheckRate(ctx, *b.Entry, checks, *b.PenaltyBox, ttl)
		if err != nil {
			return nil, err
		}
		return wire.CheckRateResponse{Penalized: r.Penalized, Rate: r.Rate(0, checks), PenaltyExpiresInMS: millisUp(r.PenaltyExpiresIn)}, nil
	case "check_rates":
		var b wire.CheckRatesRequest
		if err := strictBody(step.Body, &b); err != nil {
			return nil, err
		}
		if len(*b.Checks) != 2 {
			return nil, errBadBody
		}
		ttl, err := parseTTL(*b.TTL)
		if err != nil {
			return nil, err
		}
		checks := make([]ratelimits.RateCheck, len(*b.Checks))
		for i, c := range *b.Checks {
			if c.RateCounter == nil || c.Delta == nil || c.Window == nil || c.Limit == nil {
				return nil, errBadBody
			}
			checks[i] = ratelimits.RateCheck{Counter: *c.RateCounter, Delta: *c.Delta, Window: *c.Window, Limit: *c.Limit}
		}
		r, err := l.CheckRate(ctx, *b.Entry, checks, *b.PenaltyBox, ttl)
		if err != nil {
			return nil, err
		}
		a := wire.CheckRatesResponse{Penalized: r.Penalized, Exceeded: r.Exceeded, PenaltyExpiresInMS: millisUp(r.PenaltyExpiresIn)}
		for i := range checks {
			a.Rates = append(a.Rates, r.Rate(i, checks))
		}
		return a, nil
	case "increment":
		var b wire.IncrementRequest
		if err := strictBody(step.Body, &b); err != nil {
			return nil, err
		}
		n, err := l.Increment(ctx, step.Path, *b.Entry, *b.Delta)
		if err != nil {
			return nil, err
		}
		return wire.IncrementResponse{Bucket60s: n}, nil
	case "add":
		var b wire.BoxAddRequest
		if err := strictBody(step.Body, &b); err != nil {
			return nil, err
		}
		ttl, err := parseTTL(*b.TTL)
		if err != nil {
			return nil, err
		}
		in, err := l.BoxAdd(ctx, step.Path, *b.Entry, ttl)
		if err != nil {
			return nil, err
		}
		return wire.BoxAddResponse{PenaltyExpiresInMS: millisUp(in)}, nil
	case "remove":
		var b wire.BoxRemoveRequest
		if err := strictBody(step.Body, &b); err != nil {
			return nil, err
		}
		removed, err := l.BoxRemove(ctx, step.Path, *b.Entry)
		if err != nil {
			return nil, err
		}
		return wire.BoxRemoveResponse{Removed: removed}, nil
	}
	// lookup and has take the entry from the URL: only the entry counts.
	var b struct {
		Entry *string `json:"entry"`
	}
	if err := strictBody(step.Body, &b); err != nil {
		return nil, err
	}
	if step.Call == "has" {
		has, in, err := l.BoxHas(ctx, step.Path, *b.Entry)
		if err != nil {
			return nil, err
		}
		return wire.BoxHasResponse{Has: has, PenaltyExpiresInMS: millisUp(in)}, nil
	}
	r, err := l.RateCounter(ctx, step.Path, *b.Entry)
	if err != nil {
		return nil, err
	}
	entry := *b.Entry
	if info, ok := l.Config().Lookup(step.Path); ok {
		entry, _, _ = info.Kind.Canonicalize(entry) // valid: the call took it
	}
	a := wire.RateCounterResponse{
		Entry: entry,
		Buckets: wire.RateBuckets{S10: r.Buckets[0], S20: r.Buckets[1], S30: r.Buckets[2],
			S40: r.Buckets[3], S50: r.Buckets[4], S60: r.Buckets[5]},
		Rates: wire.Rates{S1: float64(r.Hits[0]) / 1, S10: float64(r.Hits[1]) / 10, S60: float64(r.Hits[2]) / 60},
	}
	return a, nil
}

// strictBody decodes body into v, a pointer to a request type whose
// fields are all pointers, refusing unknown fields and any field missing
// (or null): every field of an ERL request is required.
func strictBody(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", errBadBody, err)
	}
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		if rv.Field(i).IsNil() {
			return fmt.Errorf("%w: %s is missing", errBadBody, rv.Type().Field(i).Tag.Get("json"))
		}
	}
	return nil
}

// parseTTL reads a Go duration, refusing one that is not.
func parseTTL(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w: ttl: %w", errBadBody, err)
	}
	return d, nil
}

// millisUp converts a duration to whole milliseconds, rounded up, as the
// API answers durations.
func millisUp(d time.Duration) int64 {
	return round(int64(max(d, 0)), time.Millisecond)
}
