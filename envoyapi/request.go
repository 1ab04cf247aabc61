package envoyapi

import (
	"math"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/limiter-dev/limiter/envoyapi/descriptors"
	"github.com/limiter-dev/limiter/ratelimits"
)

// maxEntryBytes is the longest key or value of a descriptor entry. No id
// kind takes an id that long, and a rule's keys are names; refusing more
// up front keeps a huge value from being copied into an id only to be
// refused there.
const maxEntryBytes = 1024

// maxEntries is the most entries of a descriptor that a rule can match
// (descriptors.MaxKeys): one with more is unlimited, and its decoding may
// stop reading its entries one past the bound (see requestCodec).
const maxEntries = descriptors.MaxKeys

// plan is one request in the Limiter's terms: the batch of its matched
// descriptors, and which descriptor each transaction came from.
type plan struct {
	// txns are the matched descriptors' transactions, in request order.
	txns []ratelimits.Transaction
	// txnOf is, for each descriptor of the request, the index of its
	// transaction in txns, or -1 when it is unlimited.
	txnOf []int
	// refund says the matched descriptors give their hits back
	// (is_negative_hits) instead of spending them.
	refund bool
}

// invalid is a refusal of bad input.
func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// buildPlan turns req into a plan, matching its descriptors against
// rules. A request of one descriptor, the common one, keeps its plan in
// txn1 and txnOf1, which the caller can keep on its stack. A request that
// is not well formed is refused with INVALID_ARGUMENT before the Limiter
// is asked anything.
func buildPlan(req *rlsv3.RateLimitRequest, rules *descriptors.Rules, maxDescriptors int,
	txn1 *[1]ratelimits.Transaction, txnOf1 *[1]int) (plan, error) {
	domain, ds := req.GetDomain(), req.GetDescriptors()
	switch {
	case unreadable(req):
		return plan{}, invalid("the request could not be read: it is not a RateLimitRequest in protobuf wire format")
	case domain == "":
		return plan{}, invalid("the domain is empty")
	case len(ds) == 0:
		return plan{}, invalid("the request has no descriptors")
	case len(ds) > maxDescriptors:
		// The codec may have kept only one past the bound.
		return plan{}, invalid("the request has more than %d descriptors, the most allowed", maxDescriptors)
	}
	var p plan
	if len(ds) == 1 {
		p.txns, p.txnOf = txn1[:0], txnOf1[:]
	} else {
		p.txns, p.txnOf = make([]ratelimits.Transaction, 0, len(ds)), make([]int, len(ds))
	}
	hasRules := rules.HasDomain(domain)
	var negative, positive bool
	for i, d := range ds {
		p.txnOf[i] = -1
		entries := d.GetEntries()
		if err := checkKeys(i, entries); err != nil {
			return plan{}, err
		}
		if !hasRules || len(entries) == 0 || len(entries) > maxEntries {
			continue // no rule has that many keys: unlimited
		}
		limit, ok := rules.Match(domain, len(entries), func(j int) string { return entries[j].GetKey() })
		if !ok {
			// Unlimited, whatever its values: a long value in a
			// descriptor no rule counts must not fail the request, and
			// with it the limits of its other descriptors.
			continue
		}
		if err := checkSizes(i, entries); err != nil {
			return plan{}, err
		}
		cost, err := costOf(i, d, req.GetHitsAddend())
		if err != nil {
			return plan{}, err
		}
		if d.GetIsNegativeHits() {
			negative = true
		} else {
			positive = true
		}
		if negative && positive {
			return plan{}, invalid("descriptor %d: is_negative_hits differs from the request's other limited descriptors; a request either spends or gives back, not both", i)
		}
		p.txnOf[i] = len(p.txns)
		p.txns = append(p.txns, ratelimits.Transaction{Limit: limit, ID: subscriberID(entries), Cost: cost})
	}
	p.refund = negative
	return p, nil
}

// checkKeys refuses an entry with an empty key, in any descriptor.
func checkKeys(i int, entries []*ratelimitv3.RateLimitDescriptor_Entry) error {
	for j, e := range entries {
		if e.GetKey() == "" {
			return invalid("descriptor %d, entry %d: the key is empty", i, j)
		}
	}
	return nil
}

// checkSizes refuses, in a descriptor a rule counts, a key or value too
// long to be part of any id.
func checkSizes(i int, entries []*ratelimitv3.RateLimitDescriptor_Entry) error {
	for j, e := range entries {
		key, value := e.GetKey(), e.GetValue()
		switch {
		case len(key) > maxEntryBytes:
			return invalid("descriptor %d, entry %d: the key is %d bytes; at most %d are allowed", i, j, len(key), maxEntryBytes)
		case len(value) > maxEntryBytes:
			return invalid("descriptor %d, entry %d: the value is %d bytes; at most %d are allowed", i, j, len(value), maxEntryBytes)
		}
	}
	return nil
}

// costOf is descriptor i's cost: its own hits_addend when it sets one,
// otherwise the request's, where 0 means 1 as it does in Envoy. Whether it
// fits the limit's burst is the Limiter's to say.
func costOf(i int, d *ratelimitv3.RateLimitDescriptor, requestHits uint32) (int64, error) {
	hits := uint64(requestHits)
	if h := d.GetHitsAddend(); h != nil {
		hits = h.GetValue()
	}
	if hits > math.MaxInt64 {
		return 0, invalid("descriptor %d: hits_addend %d is out of range", i, hits)
	}
	return max(int64(hits), 1), nil
}

// subscriberID is the id of a matched descriptor: its values as
// descriptors.JoinValues joins them.
func subscriberID(entries []*ratelimitv3.RateLimitDescriptor_Entry) string {
	return descriptors.JoinValues(len(entries), func(j int) string { return entries[j].GetValue() })
}

// descriptorOf returns the index, in the request, of the descriptor of
// transaction t.
func (p *plan) descriptorOf(t int) int {
	for i, ti := range p.txnOf {
		if ti == t {
			return i
		}
	}
	return t // unreachable: every transaction has its descriptor
}

// errorAt is a refusal of the Limiter's about transaction t, told as a
// refusal of its descriptor.
func (p *plan) errorAt(t int, err error) error {
	return invalid("descriptor %d: %v", p.descriptorOf(t), err)
}
