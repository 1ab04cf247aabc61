package bucket

import "github.com/limiter-dev/limiter/ratelimits/concurrency"

// A concurrency op's bucket is its live leases (State.Leases). In a spend
// or check it acquires: the op's Cost slots, as a lease named Op.LeaseID
// that ends Op.Lease.TTL after now. In RefundBatch it releases or renews
// the lease Op.LeaseID names, as Op.LeaseAction says: a concurrency limit
// takes no refund (a refund would not say which lease), so the Limiter
// sends only releases and renewals that way.
//
// Its Outcome's Write asks for New.Leases to be stored as the bucket, an
// empty set meaning delete; the bucket counts nothing from
// concurrency.Expires(New.Leases) on. Expired leases are dropped from the
// state a decision reads, so a source that stores New.Leases whenever it
// wrote, and drops expired leases whenever it reads, never keeps one for
// long. The arithmetic works in whole milliseconds (floor of now); the
// decision's durations are given in nanoseconds, as every op's are.

// LeaseAction is what a concurrency op does in RefundBatch.
type LeaseAction uint8

const (
	// Release ends the lease: its slots are free at once.
	Release LeaseAction = iota
	// Renew sets the lease's expiry to its limit's time to live after now.
	Renew
)

// acquire decides a concurrency op's spend at now. Its lease is reported
// (Decision.Lease) until SpendBatch knows whether it is written.
func acquire(now int64, op *Op, st State) Outcome {
	d := concurrency.Acquire(Millis(now), op.Lease, op.Cost, op.LeaseID, LeasesOf(st))
	o := leaseOutcome(d)
	o.Lease = d.Lease.ID
	return o
}

// leaseAction releases or renews the lease op names at now. The bucket is
// written only when the lease was live (and so changed).
func leaseAction(now int64, op *Op, st State) Outcome {
	var d concurrency.Decision
	if op.LeaseAction == Renew {
		d = concurrency.Renew(Millis(now), op.Lease, op.LeaseID, LeasesOf(st))
	} else {
		d = concurrency.Release(Millis(now), op.Lease, op.LeaseID, LeasesOf(st))
	}
	o := leaseOutcome(d)
	o.Write = d.Allowed
	return o
}

// leaseOutcome is the outcome of a concurrency decision: durations in
// nanoseconds, and the leases left as the new state.
func leaseOutcome(d concurrency.Decision) Outcome {
	return Outcome{
		Decision: Decision{Allowed: d.Allowed, Remaining: d.Remaining, RetryIn: d.RetryIn * nsPerMs, ResetIn: d.ResetIn * nsPerMs},
		New:      State{TAT: Empty.TAT, Leases: &d.Leases},
	}
}

// LeasesOf returns the leases of st (nil when it holds none).
func LeasesOf(st State) []concurrency.Lease {
	if st.Leases == nil {
		return nil
	}
	return *st.Leases
}

// WithLeases returns a State holding leases.
func WithLeases(leases []concurrency.Lease) State {
	return State{TAT: Empty.TAT, Leases: &leases}
}

// unlease clears the lease of every concurrency op whose outcome is not
// written: a check, a check-only transaction, a denied batch. Their
// figures stay as if the lease were taken.
func unlease(ops []Op, outcomes []Outcome) {
	for i := range ops {
		if ops[i].Algorithm == Concurrency && !outcomes[i].Write {
			outcomes[i].Lease = ""
		}
	}
}
