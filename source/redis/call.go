package redis

import (
	"github.com/limiter-dev/limiter/ratelimits"
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
	// opRefund moves each GCRA bucket's TAT back by its decrement, never
	// before now, and takes hits off each window counter's current window.
	opRefund
	// opReset deletes the buckets, counting those that still counted
	// something.
	opReset
	// opClaim claims an idempotency key on a cluster (once.go).
	opClaim
	// opSync adds hits counted elsewhere to window counters and reads them
	// back (sync.go).
	opSync
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
	case opSync:
		return "sync"
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
	// ops holds the ops of an opSpend, opCheck, opRefund or opReset batch,
	// one per key: what the script needs of each is its algorithm and its
	// numbers (for a reset, the algorithm and a window's period).
	ops []bucket.Op
	// amounts holds, for an opRefund, what to give back per key: how far
	// a GCRA bucket's TAT moves back (ns), or how many hits come off a
	// window counter's current window.
	amounts []int64
	// pushes holds an opSync's counters, one per key; decode fills their
	// Total.
	pushes []ratelimits.WindowPush
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

// refundAmount is what a refund gives back to an op's bucket: its cost in
// time for a GCRA bucket, its cost in hits for a window counter, or
// nothing for a check-only op, as in bucket.RefundBatch.
func refundAmount(op *bucket.Op) int64 {
	switch {
	case op.Mode == bucket.CheckOnly:
		return 0
	case op.Algorithm.Windowed():
		return op.Cost
	}
	return op.EmissionInterval * op.Cost
}
