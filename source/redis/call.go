package redis

import (
	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// operation is what one run of the bucket script does.
type operation uint8

const (
	// opSpend decides a batch and, when it is allowed, writes it.
	opSpend operation = iota + 1
	// opCheck decides a batch and writes nothing: the parts of a cluster
	// batch that come after a denied part.
	opCheck
	// opRefund moves each bucket's TAT back by its decrement, never before
	// now.
	opRefund
	// opReset deletes the buckets, counting those that were not full.
	opReset
	// opClaim claims an idempotency key on a cluster (once.go).
	opClaim
)

func (op operation) String() string {
	switch op {
	case opSpend:
		return "spend"
	case opCheck:
		return "check"
	case opRefund:
		return "refund"
	case opReset:
		return "reset"
	case opClaim:
		return "claim"
	}
	return "unknown operation"
}

// scriptCall is one run of the bucket script as the Go side sees it: what
// to do, at which instant, on which keys, with which values. wire.encode
// turns it into the script's KEYS and ARGV and decode reads its reply;
// no other code knows the script's argument layout.
type scriptCall struct {
	op  operation
	now int64
	// keys are the Redis names of the buckets (keyFormat.name), all of one
	// hash slot on a cluster; for opClaim, the claim's key alone.
	keys []string
	// spends holds the ops of an opSpend or opCheck batch, one per key.
	spends []bucket.Op
	// decrements holds how far an opRefund moves each key's TAT back.
	decrements []int64
	// record, on an opSpend or opRefund, makes the call idempotent: the
	// script answers it from the record when there is one, and otherwise
	// decides it and writes the record in the same run. On an opClaim it
	// describes the claim.
	record *recordArgs
}

// recordArgs is what the script needs of an idempotency record.
type recordArgs struct {
	// key is the record's Redis key: on a cluster, in the batch's slot. An
	// opClaim leaves it empty (its key is the call's only key).
	key         string
	fingerprint string
	// expires is when the record stops answering, in unix nanoseconds on
	// the service's clock; lifetimeMS is how long Redis keeps its key.
	expires    int64
	lifetimeMS int64
}

// packable reports whether the call may share a packed script call with
// others (pack.go): idempotent calls and claims have operations of their
// own that packed calls do not carry.
func (c *scriptCall) packable() bool {
	return c.record == nil && c.op != opClaim
}

// refundDecrement is how far a refund moves an op's TAT back: its cost in
// time, or nothing for a check-only op, as in bucket.RefundBatch.
func refundDecrement(op *bucket.Op) int64 {
	if op.Mode == bucket.CheckOnly {
		return 0
	}
	return op.EmissionInterval * op.Cost
}
