// Package concurrency holds the concurrency limit as pure functions on
// integer milliseconds: at most Count slots held at once, each acquire
// holding a lease that ends when it is released or when its time to live
// runs out.
//
// A bucket is the set of its leases. A lease is live while now < Exp; an
// expired lease counts for nothing and is never revived, so a client that
// crashes holding one gives its slots back after at most the time to live.
// Used is the sum of the costs of the live leases.
//
// Like the gcra and window packages, nothing here does I/O or reads a
// clock: the caller passes now, and the new lease's id, which it makes
// (NewID). docs/semantics.md states the rules in prose.
package concurrency

import (
	"cmp"
	"slices"
)

// MaxCount is the most slots a concurrency limit may have, and so the most
// leases one bucket holds: every decision walks them all.
const MaxCount = 10_000

// Lease is one acquire's hold on Cost slots until Exp (unix ms).
type Lease struct {
	ID   string
	Cost int64
	Exp  int64
}

// Limit is a concurrency limit reduced to what a decision needs. TTL is a
// lease's time to live in milliseconds. A Limit is valid when 1 <= Count
// <= MaxCount and TTL >= 1; callers guarantee it.
type Limit struct {
	Count int64
	TTL   int64
}

// Decision is the outcome of one computation for one bucket, durations in
// milliseconds. Leases is the bucket after the operation, expired leases
// dropped; whether it is stored is up to the caller (a check stores
// nothing, a denied acquire changes nothing but the dropping of expired
// leases, which changes no decision).
type Decision struct {
	Allowed   bool
	Remaining int64
	RetryIn   int64
	ResetIn   int64
	// Lease is the lease an allowed acquire of cost above 0 took; its ID
	// is empty otherwise.
	Lease  Lease
	Leases []Lease
}

// Live returns the leases of b that are live at nowMs, in b's own backing
// array (b is reordered and cut, never grown).
func Live(nowMs int64, b []Lease) []Lease {
	return slices.DeleteFunc(b, func(l Lease) bool { return nowMs >= l.Exp })
}

// used is the sum of the costs of leases, all of them live.
func used(leases []Lease) int64 {
	var u int64
	for _, l := range leases {
		u += l.Cost
	}
	return u
}

// Acquire decides whether cost slots fit at nowMs in bucket b, and when
// allowed with cost above 0, adds a lease with id that ends TTL after
// nowMs. The caller guarantees 0 <= cost <= l.Count. A cost of 0 reads:
// no lease, and the figures count none. b's backing array is reused.
func Acquire(nowMs int64, l Limit, cost int64, id string, b []Lease) Decision {
	live := Live(nowMs, b)
	u := used(live)
	if u+cost > l.Count {
		return Decision{
			Remaining: max(0, l.Count-u),
			RetryIn:   max(1, retryIn(nowMs, l.Count, u, cost, live)),
			ResetIn:   resetIn(nowMs, live),
			Leases:    live,
		}
	}
	d := Decision{Allowed: true, Leases: live}
	if cost > 0 {
		d.Lease = Lease{ID: id, Cost: cost, Exp: nowMs + l.TTL}
		d.Leases = append(live, d.Lease)
		u += cost
	}
	d.Remaining = l.Count - u
	if d.Remaining < cost {
		d.RetryIn = retryIn(nowMs, l.Count, u, cost, d.Leases)
	}
	d.ResetIn = resetIn(nowMs, d.Leases)
	return d
}

// Release ends the live lease with id at nowMs. Allowed reports whether
// there was one; the figures are those of a cost-0 acquire after it.
func Release(nowMs int64, l Limit, id string, b []Lease) Decision {
	live := Live(nowMs, b)
	i := slices.IndexFunc(live, func(x Lease) bool { return x.ID == id })
	if i >= 0 {
		live = slices.Delete(live, i, i+1)
	}
	return after(nowMs, l, i >= 0, live)
}

// Renew sets the expiry of the live lease with id to TTL after nowMs.
// Allowed reports whether there was one: an expired lease is not renewed.
// The figures are those of a cost-0 acquire after it.
func Renew(nowMs int64, l Limit, id string, b []Lease) Decision {
	live := Live(nowMs, b)
	i := slices.IndexFunc(live, func(x Lease) bool { return x.ID == id })
	if i >= 0 {
		live[i].Exp = nowMs + l.TTL
	}
	return after(nowMs, l, i >= 0, live)
}

// after is the decision of a release or renew that changed (or not) the
// live leases to live: Allowed says whether it did, and the figures are
// those of a read.
func after(nowMs int64, l Limit, changed bool, live []Lease) Decision {
	return Decision{
		Allowed:   changed,
		Remaining: max(0, l.Count-used(live)),
		ResetIn:   resetIn(nowMs, live),
		Leases:    live,
	}
}

// Busy reports whether b holds a live lease at nowMs: a reset of it gives
// the id something back.
func Busy(nowMs int64, b []Lease) bool {
	return slices.ContainsFunc(b, func(l Lease) bool { return nowMs < l.Exp })
}

// Expires returns the unix ms from which b holds no live lease, so that a
// store may forget it: its latest expiry, or 0 for an empty bucket.
func Expires(b []Lease) int64 {
	if len(b) == 0 {
		return 0
	}
	latest := b[0].Exp
	for _, l := range b[1:] {
		latest = max(latest, l.Exp)
	}
	return latest
}

// resetIn is how long until every lease of live has ended with no
// release: the latest expiry, 0 when there is none.
func resetIn(nowMs int64, live []Lease) int64 {
	if len(live) == 0 {
		return 0
	}
	return Expires(live) - nowMs
}

// retryIn is the least d >= 0 such that, with no release and no renewal,
// the leases still live at nowMs + d leave room for cost slots: walking
// live in order of expiry, the first expiry after which u less the costs
// ended by then, plus cost, fits in count. cost <= count, so the walk ends
// at the latest expiry at most. live is not changed.
func retryIn(nowMs, count, u, cost int64, live []Lease) int64 {
	if u+cost <= count {
		return 0
	}
	// Sorting a copy costs an allocation on the slow path only: a decision
	// that found no room.
	byExp := slices.Clone(live)
	slices.SortFunc(byExp, func(a, b Lease) int { return cmp.Compare(a.Exp, b.Exp) })
	for _, l := range byExp {
		u -= l.Cost
		if u+cost <= count {
			return l.Exp - nowMs
		}
	}
	return resetIn(nowMs, live)
}
