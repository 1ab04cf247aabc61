package redis

import (
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/source/syncpush"
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
	// opCall applies an Edge Rate Limiting call to rate counters and a box
	// entry (erl.go).
	opCall
	// opSyncRates adds hits counted elsewhere to rate counters, and box
	// expiries set elsewhere to box entries, and reads them back
	// (syncrates.go).
	opSyncRates
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
	case opCall:
		return "call"
	case opSyncRates:
		return "sync rates"
	}
	return "unknown operation"
}

// heavy reports whether c is a sync call of more than lightSyncKeys
// counters: up to hundreds (maxSyncKeys, maxRateSyncKeys), which take
// Redis as long as hundreds of decisions. A pipeline carries one at most
// (nextPipeline). A small one, such as a batch's box entries pushed
// alone, weighs no more than a decision.
func (c *scriptCall) heavy() bool {
	return (c.op == opSync || c.op == opSyncRates) && len(c.keys) > lightSyncKeys
}

// lightSyncKeys is the most counters a sync call may carry and still go
// in a pipeline beside any other sync call: a few, as a decision has.
const lightSyncKeys = 16

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
	// window counter's current window or a rate counter's current second.
	amounts []int64
	// boxes holds, for an opSpend, opCheck, opRefund, opReset or
	// opSyncRates, the name of each key's box entry (keyFormat.boxName),
	// "" for a key without one; nil when no key has one. A box entry is in
	// its key's slot, named in ARGV: the script reads it beside its key.
	boxes []string
	// extra holds what a sync or an ERL call carries beyond keys; nil
	// for the other operations (a pointer, so that a call of the hot path
	// stays small).
	extra *extraArgs
	// record, on an opSpend or opRefund, makes the call idempotent: the
	// script answers it from the record when there is one, and otherwise
	// decides it and writes the record in the same run. On an opClaim it
	// describes the claim.
	record *recordArgs
}

// extraArgs is what a sync or an ERL call carries beyond its keys.
type extraArgs struct {
	// pushes holds an opSync's counters, one per key; decode fills their
	// Total.
	pushes []syncpush.Window
	// ratePushes holds an opSyncRates' pushes, one per key (the counter's
	// name, or the box entry's for a push of a box entry alone); decode
	// fills their Total and TotalBox.
	ratePushes []syncpush.Rate
	// call is an opCall's call: its keys are its counters' names and then,
	// when it has a box action, its box entry's name.
	call *bucket.Call
	// counters and box are what an opCall read, filled by decode: its
	// counters (the zero Counter for none) and its box entry's expiry (0
	// when the entry is not in the box at now); boxAfter is the box
	// entry's expiry as the call left it, read the same way.
	counters      [bucket.MaxCallCounters]ratecounter.Counter
	box, boxAfter int64
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

// pipelined reports whether the call may share round trips with others
// through the pipe of its node (pipe.go): idempotent calls and claims,
// which are rare, go alone.
func (c *scriptCall) pipelined() bool {
	return c.record == nil && c.op != opClaim
}

// boxed reports whether key i of the call has a box entry.
func (c *scriptCall) boxed(i int) bool {
	return c.boxes != nil && c.boxes[i] != ""
}

// refundAmount is what a refund gives back to an op's bucket: its cost in
// time for a GCRA bucket, its cost in hits for a window or rate counter,
// or nothing for a check-only op, as in bucket.RefundBatch.
func refundAmount(op *bucket.Op) int64 {
	switch {
	case op.Mode == bucket.CheckOnly:
		return 0
	case op.Algorithm.Counted(), op.Algorithm == bucket.RateCounter:
		return op.Cost
	}
	return op.EmissionInterval * op.Cost
}
