package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// Lease is a held lease of a concurrency limit: the bucket it is in (the
// canonical id the service answered), its id, and its time to live. It
// ends when released, or TTL after it was taken or last renewed.
type Lease struct {
	Limit string
	ID    string
	Lease string
	TTL   time.Duration
}

// ErrNotAcquired is returned by WithLease when no slot was free: the
// Decision says when one frees (RetryIn).
var ErrNotAcquired = errors.New("limiter: no slot free")

// ErrNoLease is returned by WithLease for a transaction that cannot hold
// a lease: a check-only one, one of cost 0, or one whose limit is not a
// concurrency limit, limiting this id or not (then its spend has
// happened; fn does not run).
var ErrNoLease = errors.New("limiter: the transaction takes no lease")

// ErrLeaseLost is the cause of the context WithLease gives its function
// once a renewal found the lease ended (it expired, or was reset), or the
// service refused to renew it for good (a 4xx answer: the limit was
// removed, the token revoked): the slot may be someone else's by now.
var ErrLeaseLost = errors.New("limiter: the lease ended before the function returned")

// Acquire spends t on a concurrency limit: when a slot is free it takes a
// lease, which the returned Lease names (its Lease is empty when the
// spend was denied, or the limit is not limited for this id). The
// Decision is the spend's.
func (c *Client) Acquire(ctx context.Context, t Transaction, opts ...CallOption) (Lease, *Decision, error) {
	d, err := c.Spend(ctx, t, opts...)
	if err != nil {
		return Lease{}, nil, err
	}
	td := d.Decisions[0]
	if td.Lease == "" {
		return Lease{}, d, nil
	}
	return Lease{Limit: td.Limit, ID: td.ID, Lease: td.Lease, TTL: td.LeaseExpiresIn}, d, nil
}

// Release ends l, freeing its slots at once. The decision's Allowed says
// whether a live lease was released: false when it had expired or was
// released already, which is not an error (a release that fails needs no
// retry either: the lease ends by itself at its TTL).
func (c *Client) Release(ctx context.Context, l Lease, opts ...CallOption) (*Decision, error) {
	body, err := leaseBody(l)
	return c.decideKeyed(ctx, "/v1/release", body, err, opts)
}

// Renew sets l to end its limit's period from now. The decision's Allowed
// says whether it was still live: a lease that expired is not renewed
// (acquire again).
func (c *Client) Renew(ctx context.Context, l Lease, opts ...CallOption) (*Decision, error) {
	body, err := leaseBody(l)
	return c.decideKeyed(ctx, "/v1/renew", body, err, opts)
}

// leaseJSON is a lease as release and renew read it.
type leaseJSON struct {
	Limit string `json:"limit"`
	ID    string `json:"id"`
	Lease string `json:"lease"`
}

func leaseBody(l Lease) ([]byte, error) {
	for _, f := range []struct{ name, value string }{{"limit", l.Limit}, {"id", l.ID}, {"lease", l.Lease}} {
		if !utf8.ValidString(f.value) {
			return nil, fmt.Errorf("transaction 0: %w: the %s %q", ErrInvalidUTF8, f.name, f.value)
		}
	}
	return json.Marshal(leaseJSON{Limit: l.Limit, ID: l.ID, Lease: l.Lease})
}

// LeaseOption changes how WithLease keeps its lease.
type LeaseOption func(*leaseOptions)

type leaseOptions struct {
	every   time.Duration
	fixed   bool // every was given (RenewEvery)
	onRenew func(*Decision, error)
}

// halfTTL is the renewal interval of a lease that lives ttl.
func halfTTL(ttl time.Duration) time.Duration { return max(ttl/2, time.Millisecond) }

// RenewEvery renews the lease every d instead of at half its time to
// live (the time to live each renewal answers, which a reload of the
// service may change). A shorter interval survives a longer outage of
// the service.
func RenewEvery(d time.Duration) LeaseOption {
	return func(o *leaseOptions) { o.every = d }
}

// OnRenew calls f after every renewal, with its answer or its error (a
// failed renewal is tried again at the next interval, unless the service
// refused it for good: see ErrLeaseLost), from the goroutine that renews:
// to log, or to count.
func OnRenew(f func(*Decision, error)) LeaseOption {
	return func(o *leaseOptions) { o.onRenew = f }
}

// WithLease acquires t, runs fn under the lease, and releases it when fn
// returns or panics (the panic goes on). While fn runs, the lease is
// renewed at half its time to live (RenewEvery), so fn may outlive it
// many times over; the context fn gets is cancelled, with ErrLeaseLost as
// its cause, when a renewal finds the lease ended. When no slot is free
// (the transaction's own decision denies it, whatever its mode), fn does
// not run and the error wraps ErrNotAcquired, with the spend's Decision;
// when the service lets it run without a lease (a shadow limit, which
// never denies, or the service failed open), fn runs without one; a
// transaction that takes no lease at all is ErrNoLease.
// Otherwise fn's error is returned, and the Decision is the acquire's.
func (c *Client) WithLease(ctx context.Context, t Transaction, fn func(context.Context) error, opts ...LeaseOption) (*Decision, error) {
	var o leaseOptions
	for _, opt := range opts {
		opt(&o)
	}
	if t.Mode == ModeCheckOnly || t.Cost() == 0 {
		return nil, fmt.Errorf("%w: %s %q is check-only or of cost 0", ErrNoLease, t.Limit, t.ID)
	}
	l, d, err := c.Acquire(ctx, t)
	if err != nil {
		return nil, err
	}
	if l.Lease == "" {
		switch td := d.Decisions[0]; {
		case td.Algorithm != Concurrency:
			return d, fmt.Errorf("%w: %s is a %s limit, not a concurrency limit (the spend was made)", ErrNoLease, t.Limit, td.Algorithm)
		case td.Shadow || (td.Allowed && d.Degraded):
			// A shadow limit never denies, and writes no lease when it
			// would have; a fail-open answer writes none.
			return d, fn(ctx)
		}
		// The transaction's own decision, not the batch's: a spend-only
		// transaction's batch is allowed whatever it decides.
		return d, fmt.Errorf("%w for %s %q: retry in %s", ErrNotAcquired, t.Limit, t.ID, d.Decisions[0].RetryIn)
	}
	o.fixed = o.every > 0
	if !o.fixed {
		o.every = halfTTL(l.TTL)
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		c.keep(runCtx, l, o, done, cancel)
	}()
	defer func() {
		// A renewal in flight is cut short: the release goes at once.
		close(done)
		cancel(nil)
		<-renewed
		// Released even when ctx is done: the slot is someone else's to
		// take as soon as possible. A failed release needs nothing more:
		// the lease ends at its TTL.
		rctx, stop := context.WithTimeout(context.WithoutCancel(ctx), max(l.TTL, time.Second))
		defer stop()
		_, _ = c.Release(rctx, l)
	}()
	return d, fn(runCtx)
}

// keep renews l every o.every until done is closed, cancelling the run's
// context with ErrLeaseLost when a renewal finds the lease ended.
func (c *Client) keep(ctx context.Context, l Lease, o leaseOptions, done <-chan struct{}, cancel context.CancelCauseFunc) {
	t := time.NewTicker(o.every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d, err := c.Renew(ctx, l)
		select {
		case <-done:
			return // cut short by the release: no renewal to report
		default:
		}
		if o.onRenew != nil {
			o.onRenew(d, err)
		}
		if err == nil && !d.Allowed {
			cancel(ErrLeaseLost)
			return
		}
		if refusedForGood(err) {
			// The service refuses to renew it (the limit is gone, the
			// token revoked): the lease ends at its TTL.
			cancel(fmt.Errorf("%w: %w", ErrLeaseLost, err))
			return
		}
		if err == nil {
			if every := renewInterval(o, d); every != o.every {
				o.every = every
				t.Reset(every)
			}
		}
	}
}

// refusedForGood reports whether err is the service's refusal of a
// request, which a repeat would meet again: a 4xx answer of the API, but
// for 429 and 409 (a request that may pass later). An error of the
// connection, a timeout or a 5xx is tried again at the next interval.
func refusedForGood(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code != "" && e.StatusCode >= 400 && e.StatusCode < 500 &&
		e.StatusCode != http.StatusTooManyRequests && e.StatusCode != http.StatusConflict
}

// renewInterval is the interval to the renewal after one that answered
// d: half the time to live it set (a reload may have changed it), unless
// RenewEvery fixed the interval.
func renewInterval(o leaseOptions, d *Decision) time.Duration {
	if o.fixed || len(d.Decisions) != 1 || d.Decisions[0].Period <= 0 {
		return o.every
	}
	return halfTTL(d.Decisions[0].Period)
}
