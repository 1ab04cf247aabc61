package ratelimits

import (
	"context"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
)

// Source stores buckets and owns atomicity: it decides and writes a whole
// batch in one atomic step.
//
// The Limiter never reads a TAT and writes it back itself (Boulder's design):
// a read-then-write from outside the store cannot be exact when several
// processes share one store, so the interface offers no such pair of calls.
// Every implementation computes decisions with the bucket package (which
// hands each op to its algorithm's math) and passes the shared conformance
// suite in source/sourcetest.
//
// The keys of one call are distinct (the Limiter rejects duplicates) and
// outcomes has the same length as ops. now is unix nanoseconds from the
// Limiter's clock, so a fake clock drives every source alike.
//
// A failed call that certainly changed nothing wraps once.ErrNotApplied;
// any other failure may have taken effect (a timeout after the call was
// sent, say), and the Limiter's callers are told so.
type Source interface {
	// Spend decides ops as one batch (bucket.SpendBatch) and, when the batch
	// is allowed, stores the new state of every op whose outcome says Write.
	Spend(ctx context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome) error

	// Refund gives back each op's cost (bucket.RefundBatch) and stores the
	// states that changed. Missing buckets are never created.
	Refund(ctx context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome) error

	// SpendOnce is Spend remembered under rec. In the same atomic step as
	// the decision (allowed or denied), the source keeps rec's fingerprint,
	// now and the states it read under rec.Key. A later call with that key
	// before rec.Expires decides nothing and writes nothing: it fills
	// outcomes from the recorded now and states, which gives exactly the
	// first call's outcomes, and reports replayed. A recorded key with
	// another fingerprint fails with once.ErrMismatch. A source that can
	// keep no record for an op refuses the call before doing anything,
	// with a *TransactionError whose Index is the op's in ops and whose
	// Err wraps ErrInvalidIdempotencyKey: the Limiter answers it as that
	// op's transaction's refusal.
	SpendOnce(ctx context.Context, now int64, rec once.Record, ops []bucket.Op, outcomes []bucket.Outcome) (replayed bool, err error)

	// RefundOnce is Refund remembered under rec, as SpendOnce is Spend.
	RefundOnce(ctx context.Context, now int64, rec once.Record, ops []bucket.Op, outcomes []bucket.Outcome) (replayed bool, err error)

	// Reset deletes what is stored under the ops' keys (their cost and mode
	// are ignored), so they read as empty, and returns how many of them
	// still counted something at now (bucket.Busy).
	Reset(ctx context.Context, now int64, ops []bucket.Op) (int, error)

	// Call applies one Edge Rate Limiting call (bucket.ApplyCall) in one
	// atomic step: it adds each counter's hits, checks its limit, reads or
	// changes the box entry, stores what changed, and fills res. Counter
	// keys and the box key are "<enum>:<id>", as bucket keys; a source
	// keeps rate counters, box entries and other buckets apart.
	Call(ctx context.Context, now int64, call *bucket.Call, res *bucket.CallResult) error

	// Ping reports whether the source can answer; readiness checks use it.
	Ping(ctx context.Context) error

	// Close releases the source's resources. No call may follow it.
	Close() error
}
