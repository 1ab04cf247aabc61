package memory

import (
	"slices"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/concurrency"
)

// leaseRecord is what an idempotency record keeps of a call's
// concurrency ops, by op index: the leases each read (a copy, taken
// before the decision changed them), and the lease id each was given.
// A replay decides with both, so it answers the first call's lease ids
// along with its figures, and takes no lease of its own: a replay
// writes nothing.
type leaseRecord struct {
	ids    []string
	leases [][]concurrency.Lease
}

// add records op (the i-th of n) and the leases it read, making r on the
// first concurrency op of a call.
func (r *leaseRecord) add(i, n int, op *bucket.Op, leases []concurrency.Lease) *leaseRecord {
	if r == nil {
		r = &leaseRecord{ids: make([]string, n), leases: make([][]concurrency.Lease, n)}
	}
	r.ids[i], r.leases[i] = op.LeaseID, slices.Clone(leases)
	return r
}

// restore gives the concurrency ops of a replayed call their recorded
// lease ids and states (copies, which the decision may change). An op
// recorded as another algorithm (its limit's changed in between) reads
// an empty bucket, as unpackStates does.
func (r *leaseRecord) restore(ops []bucket.Op, states []bucket.State) {
	for i := range ops {
		if ops[i].Algorithm != bucket.Concurrency {
			continue
		}
		var leases []concurrency.Lease
		if r != nil && i < len(r.ids) {
			ops[i].LeaseID = r.ids[i]
			leases = slices.Clone(r.leases[i])
		}
		states[i] = bucket.WithLeases(leases)
	}
}
