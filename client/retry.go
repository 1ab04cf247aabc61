package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"time"
)

// RetryPolicy says how often and how patiently a call is tried again after
// a failure that a repeat can mend. Which failures those are depends on
// the call; see the package documentation ("Retries").
type RetryPolicy struct {
	// MaxRetries is how many times a call may be sent again after its
	// first attempt: 0 means DefaultMaxRetries, NoRetries none.
	MaxRetries int
	// BaseDelay is the wait before the first retry (DefaultBaseDelay when
	// 0); each retry waits twice as long as the one before, up to
	// MaxDelay (DefaultMaxDelay when 0). Each wait is jittered: a random
	// point between half of it and all of it, so that clients failing
	// together do not come back together.
	BaseDelay time.Duration
	MaxDelay  time.Duration
}

// Defaults of RetryPolicy.
const (
	DefaultMaxRetries = 2
	DefaultBaseDelay  = 50 * time.Millisecond
	DefaultMaxDelay   = 2 * time.Second
	// NoRetries as MaxRetries sends every call once. Spends and refunds
	// then carry no Idempotency-Key unless the caller gives one.
	NoRetries = -1
)

// withDefaults fills in the zero fields.
func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxRetries == 0 {
		p.MaxRetries = DefaultMaxRetries
	}
	if p.MaxRetries < 0 {
		p.MaxRetries = 0
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = DefaultBaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	p.MaxDelay = max(p.MaxDelay, p.BaseDelay)
	return p
}

// backoff is the wait before retry n (1 for the first), before jitter:
// BaseDelay doubled n-1 times, at most MaxDelay.
func (p RetryPolicy) backoff(n int) time.Duration {
	d := p.BaseDelay
	for i := 1; i < n && d < p.MaxDelay; i++ {
		d *= 2
	}
	return min(d, p.MaxDelay)
}

// jitter picks a wait between half of d and d; u is uniform in [0, 1).
func jitter(d time.Duration, u float64) time.Duration {
	half := d / 2
	return half + time.Duration(u*float64(d-half))
}

// safety is what a call may bear being sent again.
type safety int

const (
	// sendOnce: the call changes something each time it is applied (a
	// spend or refund without an idempotency key, hits added, a sync).
	// It is sent again only when the failure proves it was not applied.
	sendOnce safety = iota
	// repeatable: the call reads, or a repeat leaves things as one call
	// does (a reset, a reload, a penalty box entry added or removed), or
	// it carries an idempotency key, so that the service answers a repeat
	// with the first answer.
	repeatable
)

// outcome is what a failed attempt says about the call.
type outcome int

const (
	// final: a repeat would get the same answer (a 4xx), or the failure
	// is not one a repeat mends (a 500).
	final outcome = iota
	// notApplied: the call certainly did nothing (no connection was made,
	// or the service said source_unavailable).
	notApplied
	// unknown: the call may or may not have been applied (a timeout, a
	// broken connection, source_outcome_unknown, a proxy's 502 or 504).
	unknown
	// unsettled: the first request with this idempotency key has no known
	// outcome yet; nothing was done, and a later repeat with the same key
	// is answered once it has one.
	unsettled
)

// retryable reports whether a failure of outcome o is worth another
// attempt of a call of safety s sent with (or without) a key.
func retryable(o outcome, s safety, keyed bool) bool {
	switch o {
	case notApplied:
		return true
	case unknown:
		return s == repeatable
	case unsettled:
		return keyed
	}
	return false
}

// classifyError is the outcome of an *Error answer.
func classifyError(e *Error) outcome {
	switch e.Code {
	case CodeSourceUnavailable:
		return notApplied
	case CodeSourceOutcomeUnknown:
		return unknown
	case CodeIdempotencyKeyUnsettled:
		return unsettled
	case "":
		// Not the service's answer: a proxy in front of it that could not
		// reach it, or gave up waiting for it, cannot say whether the
		// request got through.
		switch e.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return unknown
		}
	}
	return final
}

// classifyTransport is the outcome of an attempt that got no answer: a
// connection never made is notApplied; anything later (a write or read
// that failed, the attempt's timeout) may have reached the service.
func classifyTransport(err error) outcome {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return notApplied
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return notApplied
	}
	return unknown
}

// wait sleeps d, or until ctx is done, whose error it then returns.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// randomUnit is a uniform number in [0, 1) for jitter.
func randomUnit() float64 { return rand.Float64() }
