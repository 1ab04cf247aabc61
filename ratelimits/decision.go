package ratelimits

import (
	"math"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/calendar"
)

// Decision is the answer for one transaction. Its fields are exported so
// that callers (and front ends other than HTTP) can use every part of it.
type Decision struct {
	// Limit is the limit name as configured, e.g. "NewOrdersPerAccount",
	// as in Transaction.Limit.
	Limit string
	// ID is the canonical subscriber id the bucket belongs to.
	ID string
	// Allowed: for a spend or check, the tokens were (or would be) there;
	// for a refund, something was actually given back.
	Allowed bool
	// Remaining is how many tokens are left, never negative. It is
	// math.MaxInt64 for an unlimited transaction.
	Remaining int64
	// RetryIn is how long until a transaction of the same cost would be
	// allowed (0 when it would be allowed now).
	RetryIn time.Duration
	// ResetIn is how long until the bucket is full again.
	ResetIn time.Duration
	// Unlimited is true when the limit has neither a default nor an
	// override for this id: it is disabled, always allowed, never stored.
	Unlimited bool
	// Effective is the limit that decided: the override for ID, else the
	// default (zero when Unlimited).
	Effective Limit
	// Algorithm is how the limit counts: Effective's algorithm, or for an
	// unlimited transaction the one its name is configured with.
	Algorithm Algorithm
	// Penalized says the id is in the limit's penalty box (after this
	// transaction): the decision is then the box's. It is meaningful only
	// when Effective.HasBox(); front ends show it for those limits alone.
	Penalized bool
	// Shadow says the limit is a shadow limit (Limit.Shadow): Allowed is
	// what it would have decided, but it never denies nor decides the
	// batch.
	Shadow bool
	// Mode is the mode the transaction was decided in: its own, except
	// that a shadow limit's check-and-spend transactions take part as
	// spend-only ones. Only a CheckAndSpend decision can deny a request.
	Mode Mode
	// Period is the calendar period a calendar limit decided in (unix ms,
	// [Start, End)); zero for other limits.
	Period calendar.Period
	// Lease is the id of the lease a written acquire of a concurrency
	// limit took, and LeaseExpiresIn its time to live; "" and 0 for every
	// other decision (a check, a denial, cost 0, another algorithm).
	Lease          string
	LeaseExpiresIn time.Duration
}

// Window is the length of the period d counts over: its limit's period,
// or a calendar limit's current period (Period), whose length varies with
// the calendar and the zone's clock changes.
func (d *Decision) Window() time.Duration {
	if d.Effective.Algorithm == Calendar {
		return time.Duration(d.Period.End-d.Period.Start) * time.Millisecond
	}
	return d.Effective.Period
}

// PeriodName is how d's period is spelt: a calendar limit's unit ("month"),
// or the limit's period as a Go duration ("15m0s").
func (d *Decision) PeriodName() string { return d.Effective.PeriodName() }

// BatchDecision is the answer for a batch: the strictest of its counting
// decisions, and every transaction's own decision in request order.
type BatchDecision struct {
	Allowed   bool
	Remaining int64
	RetryIn   time.Duration
	ResetIn   time.Duration
	// Deciding is the index of the decision the batch fields come from, or
	// -1 when no transaction counts (all spend-only or unlimited): such a
	// batch is allowed with Remaining math.MaxInt64.
	Deciding  int
	Decisions []Decision
	// Degraded is set when the source failed and the Limiter fails open:
	// every transaction is allowed without having been decided. Cause is
	// the source's error then.
	Degraded bool
	Cause    error
	// Replayed is set when SpendOnce or RefundOnce answered from the
	// record of an earlier call with the same key: nothing was decided or
	// written this time, and the decisions are that call's.
	Replayed bool
}

// degradedDecision allows every transaction of a batch the source could
// not decide, for a Limiter that fails open. Remaining and the durations
// are unknown and reported as 0.
func degradedDecision(prepared []preparedTxn, cause error) *BatchDecision {
	bd := &BatchDecision{Allowed: true, Deciding: -1, Degraded: true, Cause: cause, Decisions: make([]Decision, len(prepared))}
	for i, p := range prepared {
		if p.unlimited {
			bd.Decisions[i] = unlimitedDecision(p)
			continue
		}
		bd.Decisions[i] = Decision{Limit: p.info.Limit, ID: p.bucketID, Allowed: true, Effective: p.limit, Algorithm: p.limit.Algorithm, Shadow: p.limit.Shadow, Mode: p.mode}
	}
	return bd
}

// unlimitedDecision is the answer for a transaction whose limit is disabled.
func unlimitedDecision(p preparedTxn) Decision {
	return Decision{
		Limit:     p.info.Limit,
		ID:        p.bucketID,
		Allowed:   true,
		Remaining: math.MaxInt64,
		Unlimited: true,
		Algorithm: p.algorithm,
		Mode:      p.mode,
	}
}

// limitedDecision turns a source's decision into the Decision of transaction p.
func limitedDecision(p preparedTxn, d bucket.Decision) Decision {
	dec := Decision{
		Limit:     p.info.Limit,
		ID:        p.bucketID,
		Allowed:   d.Allowed,
		Remaining: max(d.Remaining, 0),
		RetryIn:   time.Duration(d.RetryIn),
		ResetIn:   time.Duration(d.ResetIn),
		Effective: p.limit,
		Algorithm: p.limit.Algorithm,
		Penalized: d.Penalized,
		Shadow:    p.limit.Shadow,
		Period:    d.Period,
		Mode:      p.mode,
	}
	if d.Lease != "" {
		dec.Lease, dec.LeaseExpiresIn = d.Lease, p.limit.Period
	}
	return dec
}

// stricter reports whether a is stricter than b: a denial beats an
// allowance, then the longer RetryIn, then the smaller Remaining. Ties keep
// the earlier transaction, so the answer does not depend on anything but
// request order.
func stricter(a, b *Decision) bool {
	if a.Allowed != b.Allowed {
		return !a.Allowed
	}
	if a.RetryIn != b.RetryIn {
		return a.RetryIn > b.RetryIn
	}
	return a.Remaining < b.Remaining
}

// combine fills the batch fields of bd from its decisions. Only counting
// transactions (not spend-only, not unlimited) can decide the batch.
func combine(bd *BatchDecision, prepared []preparedTxn) {
	bd.Deciding = -1
	for i := range bd.Decisions {
		d := &bd.Decisions[i]
		if d.Unlimited || d.Shadow || !prepared[i].mode.Counts() {
			continue
		}
		if bd.Deciding < 0 || stricter(d, &bd.Decisions[bd.Deciding]) {
			bd.Deciding = i
		}
	}
	if bd.Deciding < 0 {
		bd.Allowed, bd.Remaining, bd.RetryIn, bd.ResetIn = true, math.MaxInt64, 0, 0
		return
	}
	d := &bd.Decisions[bd.Deciding]
	bd.Allowed, bd.Remaining, bd.RetryIn, bd.ResetIn = d.Allowed, d.Remaining, d.RetryIn, d.ResetIn
}
