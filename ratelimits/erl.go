package ratelimits

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// RateCheck is one counter's part in CheckRate: Delta hits added to the
// entry's rate counter of the rate-counter limit named Counter, whose
// rate over Window seconds (1, 10 or 60) is then compared with Limit hits
// per second.
type RateCheck struct {
	Counter string
	Delta   int64
	Window  int64
	Limit   int64
}

// CheckRateResult is what CheckRate did. Hits[i] are the hits of check i's
// counter over its window after the call (its rate is Hits[i] / Window),
// and Exceeded[i] whether they went above Limit × Window. Penalized says
// the entry is in the box after the call, until PenaltyExpiresIn from now.
type CheckRateResult struct {
	Penalized        bool
	Hits             []int64
	Exceeded         []bool
	PenaltyExpiresIn time.Duration
}

// Rate returns check i's rate in hits per second, as Fastly's
// ratelimit.check_rate reads it.
func (r *CheckRateResult) Rate(i int, checks []RateCheck) float64 {
	return float64(r.Hits[i]) / float64(checks[i].Window)
}

// RateCounterReading is an entry's rate counter as Fastly's VCL reads it:
// Buckets[k] is bucket.{10(k+1)}s (10s to 60s) and Rates[k] the hits of
// the last 1, 10 and 60 seconds (divide by the window for the rate).
type RateCounterReading struct {
	Buckets [6]int64
	Hits    [3]int64
}

// ReadingWindows are the windows of RateCounterReading.Hits, in seconds.
var ReadingWindows = [3]int64{1, 10, 60}

// erlCall is a validated ERL call: the source's call.
type erlCall struct {
	call bucket.Call
}

// CheckRate is Fastly's ratelimit.check_rate (one check) and check_rates
// (two, on different counters), as one atomic step: each check's Delta is
// added to the entry's counter, its rate over its window compared with its
// limit, and if any goes above, the entry is boxed in box for ttl (an ERL
// TTL: BoxUntil), never shortening an expiry it already has. Hits are
// counted also while the entry is boxed.
//
// entry is an id of each named limit's kind, canonicalised by each. Errors
// before anything runs wrap ErrUnknownLimit, ErrNotRateCounter, ErrNoBox,
// ErrInvalidID or ErrInvalidArgument; the others ErrSourceUnavailable.
func (l *Limiter) CheckRate(ctx context.Context, entry string, checks []RateCheck, box string, ttl time.Duration) (*CheckRateResult, error) {
	if len(checks) < 1 || len(checks) > bucket.MaxCallCounters {
		return nil, fmt.Errorf("%w: want 1 or 2 checks, got %d", ErrInvalidArgument, len(checks))
	}
	if err := CheckTTL(ttl); err != nil {
		return nil, err
	}
	cfg := l.config.Load()
	now := l.now()
	var c erlCall
	for i, chk := range checks {
		if err := checkRateArgs(chk); err != nil {
			if len(checks) == 1 {
				return nil, err // check_rate's own arguments, not one of several checks
			}
			return nil, fmt.Errorf("check %d: %w", i, err)
		}
		for j := range i {
			if checks[j].Counter == chk.Counter {
				return nil, fmt.Errorf("%w: checks %d and %d name the same counter %s", ErrInvalidArgument, j, i, chk.Counter)
			}
		}
		if err := c.addCounter(cfg, chk.Counter, entry, chk.Delta, ratecounter.Limit{Window: chk.Window, Rate: chk.Limit}); err != nil {
			return nil, err
		}
	}
	if err := c.setBox(cfg, box, entry, bucket.BoxWhenAbove, BoxUntil(now, ttl)); err != nil {
		return nil, err
	}
	if out, ok, err := l.checkRateAsSpend(ctx, now, &c, checks); ok {
		return out, err
	}
	var res bucket.CallResult
	if err := l.call(ctx, now, &c, &res); err != nil {
		return nil, err
	}
	s := ratecounter.Second(now)
	out := &CheckRateResult{Hits: make([]int64, len(checks)), Exceeded: make([]bool, len(checks))}
	for i, chk := range checks {
		out.Hits[i] = res.Counters[i].Window(s, chk.Window)
		out.Exceeded[i] = res.Above[i]
	}
	out.Penalized, out.PenaltyExpiresIn = res.Expires > now, expiresIn(res.Expires, now)
	return out, nil
}

// checkRateAsSpend answers the most common check_rate, one counter boxing
// into its own limit's box for the same entry on the source, as the spend
// of one rate-counter op with the call's window, limit and TTL: the same
// rules (bucket.SpendBatch on such an op is bucket.ApplyCall on such a
// call), through the source's spend path, which shares its calls among
// concurrent requests (on Redis, one script run for many). ok is false
// when the call has another shape; it then goes through Source.Call.
func (l *Limiter) checkRateAsSpend(ctx context.Context, now int64, c *erlCall, checks []RateCheck) (*CheckRateResult, bool, error) {
	if len(checks) != 1 || c.call.Box != c.call.Counters[0].Key {
		return nil, false, nil
	}
	cc := &c.call.Counters[0]
	ops := [1]bucket.Op{{
		Key: cc.Key, Algorithm: RateCounter, Rate: cc.Limit, Cost: cc.Delta, Mode: CheckAndSpend,
		Box: c.call.Box, BoxUntil: c.call.Until, Capacity: cc.Capacity, SyncRate: cc.SyncRate,
	}}
	var outcomes [1]bucket.Outcome
	if err := l.source.Spend(ctx, now, ops[:], outcomes[:]); err != nil {
		return nil, true, sourceFailure(err)
	}
	d := outcomes[0].Decision
	out := &CheckRateResult{Hits: []int64{d.Hits}, Exceeded: []bool{cc.Limit.Above(d.Hits)}, Penalized: d.Penalized}
	if d.Penalized {
		out.PenaltyExpiresIn = time.Duration(d.RetryIn)
	}
	return out, true, nil
}

// checkRateArgs checks one check's ranges.
func checkRateArgs(chk RateCheck) error {
	switch {
	case !ratecounter.ValidWindow(chk.Window):
		return fmt.Errorf("%w: window must be 1, 10 or 60, got %d", ErrInvalidArgument, chk.Window)
	case chk.Limit < MinRate || chk.Limit > MaxRate:
		return fmt.Errorf("%w: limit must be from %d to %d, got %d", ErrInvalidArgument, MinRate, MaxRate, chk.Limit)
	case chk.Delta < 0 || chk.Delta > MaxRateCost:
		return fmt.Errorf("%w: delta must be from 0 to %d, got %d", ErrInvalidArgument, MaxRateCost, chk.Delta)
	}
	return nil
}

// Increment is Fastly's ratecounter.increment: it adds delta (0 to
// MaxIncrement) hits to the entry's counter and returns its bucket.60s
// after them. Nobody is boxed.
func (l *Limiter) Increment(ctx context.Context, counter, entry string, delta int64) (int64, error) {
	if delta < 0 || delta > MaxIncrement {
		return 0, fmt.Errorf("%w: delta must be from 0 to %d, got %d", ErrInvalidArgument, MaxIncrement, delta)
	}
	r, err := l.readCounter(ctx, counter, entry, delta)
	if err != nil {
		return 0, err
	}
	return r.Buckets[5], nil
}

// RateCounter reads an entry's counter without changing it. An entry never
// counted reads as zeros.
func (l *Limiter) RateCounter(ctx context.Context, counter, entry string) (RateCounterReading, error) {
	return l.readCounter(ctx, counter, entry, 0)
}

func (l *Limiter) readCounter(ctx context.Context, counter, entry string, delta int64) (RateCounterReading, error) {
	cfg := l.config.Load()
	var c erlCall
	if err := c.addCounter(cfg, counter, entry, delta, ratecounter.Limit{}); err != nil {
		return RateCounterReading{}, err
	}
	now := l.now()
	var res bucket.CallResult
	if err := l.call(ctx, now, &c, &res); err != nil {
		return RateCounterReading{}, err
	}
	s := ratecounter.Second(now)
	var r RateCounterReading
	for k := range r.Buckets {
		r.Buckets[k] = res.Counters[0].Bucket(s, int64(10*(k+1)))
	}
	for k, w := range ReadingWindows {
		r.Hits[k] = res.Counters[0].Window(s, w)
	}
	return r, nil
}

// BoxAdd is Fastly's penaltybox.add: the entry is in box until ttl (an
// ERL TTL, BoxUntil) from now, replacing any expiry it had, also a later
// one. It returns how long the entry stays.
func (l *Limiter) BoxAdd(ctx context.Context, box, entry string, ttl time.Duration) (time.Duration, error) {
	if err := CheckTTL(ttl); err != nil {
		return 0, err
	}
	now := l.now()
	res, err := l.boxCall(ctx, now, box, entry, bucket.BoxReplace, BoxUntil(now, ttl))
	if err != nil {
		return 0, err
	}
	return expiresIn(res.Expires, now), nil
}

// BoxHas is Fastly's penaltybox.has: whether the entry is in box, and for
// how long still. An entry never boxed is not in it.
func (l *Limiter) BoxHas(ctx context.Context, box, entry string) (bool, time.Duration, error) {
	now := l.now()
	res, err := l.boxCall(ctx, now, box, entry, bucket.BoxRead, 0)
	if err != nil {
		return false, 0, err
	}
	return res.Expires > now, expiresIn(res.Expires, now), nil
}

// BoxRemove takes the entry out of box, and reports whether it was in.
func (l *Limiter) BoxRemove(ctx context.Context, box, entry string) (bool, error) {
	res, err := l.boxCall(ctx, l.now(), box, entry, bucket.BoxRemove, 0)
	if err != nil {
		return false, err
	}
	return res.Removed, nil
}

func (l *Limiter) boxCall(ctx context.Context, now int64, box, entry string, action bucket.BoxAction, until int64) (*bucket.CallResult, error) {
	var c erlCall
	if err := c.setBox(l.config.Load(), box, entry, action, until); err != nil {
		return nil, err
	}
	var res bucket.CallResult
	if err := l.call(ctx, now, &c, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// expiresIn is the time from now to a box expiry, 0 when it is past.
func expiresIn(expires, now int64) time.Duration {
	return time.Duration(max(0, expires-now))
}

// addCounter adds a counter of the rate-counter limit named counter to c,
// for entry canonicalised by its id kind.
func (c *erlCall) addCounter(cfg *Config, counter, entry string, delta int64, lim ratecounter.Limit) error {
	info, ok := cfg.Lookup(counter)
	if !ok {
		return fmt.Errorf("ratecounter: %w %q", ErrUnknownLimit, counter)
	}
	if cfg.Algorithm(info.Name) != RateCounter {
		return fmt.Errorf("ratecounter: %w: %s counts with %s", ErrNotRateCounter, counter, cfg.Algorithm(info.Name))
	}
	id, _, err := info.Kind.Canonicalize(entry)
	if err != nil {
		return fmt.Errorf("entry for %s: %w", counter, err)
	}
	c.call.Counters = append(c.call.Counters, bucket.CounterCheck{Key: info.BucketKey(id), Delta: delta, Limit: lim, Capacity: cfg.Capacity(info.Name), SyncRate: cfg.SyncRate(info.Name)})
	return nil
}

// setBox sets c's box: the box of the limit named box, for entry
// canonicalised by its id kind.
func (c *erlCall) setBox(cfg *Config, box, entry string, action bucket.BoxAction, until int64) error {
	info, ok := cfg.Lookup(box)
	if !ok {
		return fmt.Errorf("penaltybox: %w %q", ErrUnknownLimit, box)
	}
	if !cfg.HasBox(info.Name) {
		return fmt.Errorf("penaltybox: %w: %s has neither algorithm rate-counter nor a penalty", ErrNoBox, box)
	}
	id, _, err := info.Kind.Canonicalize(entry)
	if err != nil {
		return fmt.Errorf("entry for %s: %w", box, err)
	}
	c.call.Box, c.call.Action, c.call.Until, c.call.BoxCapacity = info.BucketKey(id), action, until, cfg.Capacity(info.Name)
	c.call.BoxSyncRate = cfg.SyncRate(info.Name)
	return nil
}

// call applies c on the source, in one atomic step.
func (l *Limiter) call(ctx context.Context, now int64, c *erlCall, res *bucket.CallResult) error {
	if err := l.source.Call(ctx, now, &c.call, res); err != nil {
		return sourceFailure(err)
	}
	return nil
}

// IsClientError reports whether err refuses an ERL call for its arguments
// (a 400), not for the source.
func IsClientError(err error) bool {
	for _, e := range []error{ErrUnknownLimit, ErrNotRateCounter, ErrNoBox, ErrInvalidID, ErrInvalidArgument} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
