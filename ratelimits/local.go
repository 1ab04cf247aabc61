package ratelimits

import (
	"context"
	"fmt"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// Local counts, in this process's memory, the window limits whose
// sync_rate is not 0, when the Source is shared by several processes
// (docs/design.md, "Where the counting happens"). A limit with sync_rate
// below 0 is counted here only; one above 0 is counted here and pushed to
// the shared source every sync_rate, which also reads back what every
// process counted together. source/local implements it.
//
// The Limiter decides a batch's local part before its source part, and
// writes the local part only once the source part is allowed too. That
// takes two steps, Decide then Commit, where a batch with no source part
// takes one (Spend). Between the two steps other batches may decide on the
// same counters: this counting is approximate by design, and each step is
// atomic on its own.
//
// The in-memory calls take no context and return no error: they never
// wait on I/O. Reset and Sync talk to the source and take one.
type Local interface {
	// Decide decides ops as one batch (bucket.SpendBatch) from the local
	// counters at now, and writes nothing. It returns whether the batch
	// is allowed; outcomes say which ops Commit must write.
	Decide(now int64, ops []LocalOp, outcomes []bucket.Outcome) bool

	// Commit writes what Decide's outcomes ask for: it adds the cost of
	// every op whose outcome says Write to the counter's window at now,
	// whatever other batches wrote since Decide (an add, never a
	// replacement by the state Decide saw, so their hits stay counted).
	Commit(now int64, ops []LocalOp, outcomes []bucket.Outcome)

	// Spend is Decide and, when the batch is allowed, Commit, in one
	// atomic step: for a batch with no source part.
	Spend(now int64, ops []LocalOp, outcomes []bucket.Outcome) bool

	// Refund gives each op's cost back (bucket.RefundBatch rules) from the
	// hits this process counted and has not pushed: hits already pushed to
	// the source are everyone's and stay counted until their window ends.
	// For a limit counted locally only, that is every hit.
	Refund(now int64, ops []LocalOp, outcomes []bucket.Outcome)

	// Reset forgets the local counters of ops and calls source, which
	// resets the source's part (the keys of limits above 0 among them),
	// while no sync of those limits runs, so that no push in flight brings
	// back hits the reset removed. The local counters are forgotten only
	// when source succeeds. It returns how many of the counters still
	// counted something: source's count, plus those of ops the source
	// could not know about (below 0, or hits not pushed yet).
	Reset(ctx context.Context, now int64, ops []LocalOp, source func(context.Context) (int, error)) (int, error)

	// Call applies an Edge Rate Limiting call whose counters and box are
	// all kept in this process (their limits' sync_rate is not 0), as one
	// atomic step (bucket.ApplyCall). A counter above 0 has its hits pushed
	// at the next sync, as a window's are; a box entry set, extended or
	// removed here reaches the source at the next sync of its limit.
	Call(ctx context.Context, now int64, call LocalCall, res *bucket.CallResult) error

	// Sync runs one sync cycle of every limit above 0 now (pushes every
	// unpushed hit, reads back the totals of every counter held) and
	// returns when it is done.
	Sync(ctx context.Context) (SyncResult, error)
}

// LocalOp is one transaction of a batch's local part: its op, as a source
// would see it, and its limit's sync_rate (never 0).
type LocalOp struct {
	Op       bucket.Op
	SyncRate time.Duration
}

// LocalCall is an ERL call for the local layer, with the sync_rate of
// each of its counters and of its box's limit.
type LocalCall struct {
	Call        *bucket.Call
	SyncRates   [bucket.MaxCallCounters]time.Duration
	BoxSyncRate time.Duration
}

// SyncResult is what a sync cycle did: Pushed counts the (limit, id)
// counters whose unpushed hits went to the source, Fetched those whose
// totals were read back.
type SyncResult struct {
	Pushed  int
	Fetched int
}

// ErrLocalIdempotency refuses SpendOnce and RefundOnce of a batch with a
// limit counted in process memory (sync_rate ≠ 0 on a shared source). An
// idempotency record must be kept in the same atomic step as the writes it
// guards, and a retry may reach another process: no record can promise
// that such a limit counts the call once. It wraps
// ErrInvalidIdempotencyKey, so callers answer it as a client error.
var ErrLocalIdempotency = fmt.Errorf("%w: a limit with a sync_rate other than 0 is counted in each process's memory, where no idempotency record can be kept; send the batch without an idempotency key", ErrInvalidIdempotencyKey)

// WithLocal has the Limiter count window limits whose sync_rate is not 0
// in local, in front of its source. Wire it only when the source is shared
// by several processes: on a source of one process (memory) every
// sync_rate behaves as 0, and such limits are decided on the source like
// any other.
func WithLocal(local Local) Option {
	return func(l *Limiter) { l.local = local }
}

// Sync runs one sync cycle of every limit whose sync_rate is above 0 and
// answers once it is done. Without a local layer (the source is not
// shared) there is nothing to sync and the result is zero. A failed push
// is kept and pushed again at the next cycle; the error wraps
// ErrSourceUnavailable.
func (l *Limiter) Sync(ctx context.Context) (SyncResult, error) {
	if l.local == nil {
		return SyncResult{}, nil
	}
	res, err := l.local.Sync(ctx)
	if err != nil {
		return res, sourceFailure(err)
	}
	return res, nil
}

// spendMixed decides a batch with a local part: the local part first; when
// it is denied nothing is sent to the source; otherwise the source part
// runs, and the local part is written only when the source part was
// allowed too. The source part of a batch the local part denied is not
// decided: its outcomes stay zero (denied, nothing remaining, no
// durations), and the local denial, whose retry time is never 0, decides
// the batch.
func (l *Limiter) spendMixed(ctx context.Context, b *batch) (*BatchDecision, error) {
	now := l.now()
	ops, outcomes := b.sourceOps(now)
	localOps, localOutcomes := b.localPart(now)
	if len(ops) == 0 {
		l.local.Spend(now, localOps, localOutcomes)
		return b.decisions(), nil
	}
	if !l.local.Decide(now, localOps, localOutcomes) {
		clear(outcomes)
		return b.decisions(), nil
	}
	ctx, cancel := l.sourceContext(ctx)
	defer cancel()
	if err := l.source.Spend(ctx, now, ops, outcomes); err != nil {
		return nil, sourceFailure(err)
	}
	if batchAllowed(ops, outcomes) {
		l.local.Commit(now, localOps, localOutcomes)
	}
	return b.decisions(), nil
}

// refundMixed refunds a batch with a local part: the source part first,
// so that a failure of the source leaves the local part untouched too and
// the whole refund can be retried.
func (l *Limiter) refundMixed(ctx context.Context, b *batch) (*BatchDecision, error) {
	now := l.now()
	ops, outcomes := b.sourceOps(now)
	localOps, localOutcomes := b.localPart(now)
	if len(ops) > 0 {
		ctx, cancel := l.sourceContext(ctx)
		defer cancel()
		if err := l.source.Refund(ctx, now, ops, outcomes); err != nil {
			return nil, sourceFailure(err)
		}
	}
	l.local.Refund(now, localOps, localOutcomes)
	return b.decisions(), nil
}

// resetMixed resets a batch with local counters: the local layer forgets
// them and, in the same call, the source resets every key stored there
// (limits of sync_rate 0 and above 0).
func (l *Limiter) resetMixed(ctx context.Context, ops []bucket.Op, localOps []LocalOp) (int, error) {
	now := l.now()
	n, err := l.local.Reset(ctx, now, localOps, func(ctx context.Context) (int, error) {
		if len(ops) == 0 {
			return 0, nil
		}
		ctx, cancel := l.sourceContext(ctx)
		defer cancel()
		return l.source.Reset(ctx, now, ops)
	})
	if err != nil {
		return 0, sourceFailure(err)
	}
	return n, nil
}

// batchAllowed reports whether a decided part of a batch is allowed: every
// op that counts toward the decision was allowed.
func batchAllowed(ops []bucket.Op, outcomes []bucket.Outcome) bool {
	for i := range ops {
		if ops[i].Mode.Counts() && !outcomes[i].Allowed {
			return false
		}
	}
	return true
}
