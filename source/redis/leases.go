package redis

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/concurrency"
)

// A concurrency limit's bucket is its lease set, stored as one string
// (lua/leases.lua): "L", then each lease as "<id>:<cost>:<exp>" (exp in
// unix ms), separated by ",". It holds no space, so that it is one word
// of an idempotency record, and its "L" tells it from every other kind
// of value. The script decides acquires, releases and renewals on it, and
// returns it as read, after the op's lease id and "=" (leaseItem); the
// outcomes are then computed from it with the concurrency functions, as
// for every other algorithm.

// maxLeaseTTL bounds a lease's time to live (ms), far above the service's
// own bound of a day, so that an expiry stays exact in the script's
// doubles.
const maxLeaseTTL = 1 << 40

// checkLeaseOp rejects a concurrency op outside the Source contract: it
// needs a count from 1 to concurrency.MaxCount, a time to live of at
// least 1 ms, a cost from 0 to its count, one of the three modes, no box,
// and a lease id that is one the service makes (concurrency.ValidID), or
// none for an op that takes no lease.
func checkLeaseOp(op *bucket.Op) error {
	l := op.Lease
	takes := op.Mode != bucket.CheckOnly && op.Cost > 0
	if l.Count < 1 || l.Count > concurrency.MaxCount || l.TTL < 1 || l.TTL > maxLeaseTTL ||
		op.Cost < 0 || op.Cost > l.Count || op.Mode > bucket.SpendOnly || op.Box != "" ||
		(op.LeaseID != "" && !concurrency.ValidID(op.LeaseID)) || (op.LeaseID == "" && takes) {
		return fmt.Errorf("%w: %q: concurrency count %d, ttl %d ms, cost %d, mode %d, lease %q, box %q",
			ErrInvalidOp, op.Key, l.Count, l.TTL, op.Cost, op.Mode, op.LeaseID, op.Box)
	}
	return nil
}

// formatLeases writes leases as the script stores them, "" for none.
func formatLeases(leases []concurrency.Lease) string {
	if len(leases) == 0 {
		return ""
	}
	b := make([]byte, 0, 1+len(leases)*(concurrency.IDLength+20))
	b = append(b, 'L')
	for i, l := range leases {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, l.ID...)
		b = append(b, ':')
		b = strconv.AppendInt(b, l.Cost, 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, l.Exp, 10)
	}
	return string(b)
}

// leaseItem is a concurrency op's value as the script returns it and a
// record keeps it: the op's lease id, "=", and its lease set as stored.
func leaseItem(id string, leases []concurrency.Lease) string {
	return id + "=" + formatLeases(leases)
}

// isLeases reports whether a stored value, or a value as the script
// returns it, is a concurrency op's: another algorithm reads it as empty.
func isLeases(s string) bool {
	return s != "" && (s[0] == 'L' || strings.IndexByte(s, '=') >= 0)
}

// parseLeases reads a lease set as stored ("" for none). Another
// algorithm's value (its limit's algorithm changed) reads as no lease.
func parseLeases(s string) ([]concurrency.Lease, error) {
	if s == "" || s[0] != 'L' {
		return nil, nil
	}
	parts := strings.Split(s[1:], ",")
	leases := make([]concurrency.Lease, 0, len(parts))
	for _, p := range parts {
		id, rest, ok1 := strings.Cut(p, ":")
		c, e, ok2 := strings.Cut(rest, ":")
		cost, err1 := strconv.ParseInt(c, 10, 64)
		exp, err2 := strconv.ParseInt(e, 10, 64)
		if !ok1 || !ok2 || err1 != nil || err2 != nil || id == "" || cost < 0 {
			return nil, fmt.Errorf("%w: a lease set %.80q", ErrBadReply, s)
		}
		leases = append(leases, concurrency.Lease{ID: id, Cost: cost, Exp: exp})
	}
	return leases, nil
}

// setLeases stores the state a concurrency op i read, from its value as
// the script returns it (leaseItem; "" or another algorithm's value for
// none): its live leases at decidedAt. A replayed op takes the lease id
// its first call was given, so that a replay answers that lease.
func (r *scriptReply) setLeases(i int, s string) error {
	r.states[i] = bucket.WithLeases(nil)
	id, v, ok := strings.Cut(s, "=")
	if !ok {
		return nil
	}
	leases, err := parseLeases(v)
	if err != nil {
		return err
	}
	if r.replayed {
		r.ops[i].LeaseID = id
	}
	r.states[i] = bucket.WithLeases(concurrency.Live(bucket.Millis(r.decidedAt), leases))
	return nil
}

// cloneLeases gives each state of states its own copy of its leases, so
// that a decision, which may change them in place, leaves states as read.
func cloneLeases(states []bucket.State) []bucket.State {
	out := make([]bucket.State, len(states))
	for i, st := range states {
		out[i] = st
		if st.Leases != nil {
			out[i] = bucket.WithLeases(append([]concurrency.Lease(nil), *st.Leases...))
		}
	}
	return out
}
