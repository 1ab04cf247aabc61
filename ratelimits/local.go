package ratelimits

import (
	"context"
	"fmt"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// Local counts, in this process's memory, the window and rate-counter
// limits whose sync_rate is not 0, and keeps the penalty boxes of such
// limits, when the Source is shared by several processes (docs/design.md,
// "Where the counting happens"). A limit with sync_rate below 0 is counted
// and boxed here only; one above 0 is counted and boxed here and pushed to
// the shared source every sync_rate, which also reads back what every
// process counted and boxed together. source/local implements it.
//
// The Limiter decides a batch's local part before its source part, and
// writes the local part's window costs only once the source part is
// allowed too; rate-counter hits and box entries are written whatever the
// batch's fate (bucket.SpendBatch). That takes two steps, Decide then
// Commit, where a batch with no source part takes one (Spend). Between the
// two steps other batches may decide on the same counters: this counting
// is approximate by design, and each step is atomic on its own.
//
// The in-memory calls take no context and return no error: they never
// wait on I/O. Reset and Sync talk to the source and take one.
type Local interface {
	// Decide decides ops as one batch (bucket.SpendBatch) from the local
	// counters at now, and writes nothing. It returns whether the batch
	// is allowed; outcomes say which ops Commit must write.
	Decide(now int64, ops []LocalOp, outcomes []bucket.Outcome) bool

	// Commit writes what outcomes ask for: it adds the cost of every op
	// whose outcome says Write to its counter at now (a window's, or a
	// rate counter's second), and boxes the id of every op whose outcome
	// says WriteBox until New.BoxExpires at least, whatever other batches
	// wrote since Decide (an add, never a replacement by the state Decide
	// saw, so their hits and boxings stay). The caller clears the Write of
	// window ops whose batch the source part denied.
	Commit(now int64, ops []LocalOp, outcomes []bucket.Outcome)

	// Spend is Decide and Commit of its outcomes in one atomic step: for
	// a batch with no source part. As bucket.SpendBatch says, a denied
	// batch still writes its rate-counter hits and box entries.
	Spend(now int64, ops []LocalOp, outcomes []bucket.Outcome) bool

	// Refund gives each op's cost back (bucket.RefundBatch rules) from the
	// hits this process counted and has not pushed: hits already pushed to
	// the source are everyone's and stay counted until their window ends.
	// For a limit counted locally only, that is every hit.
	Refund(now int64, ops []LocalOp, outcomes []bucket.Outcome)

	// Reset forgets the local counters and box entries of ops and calls
	// source, which resets the source's part (the keys of limits above 0
	// among them), while no sync of those limits runs, so that no push in
	// flight brings back hits the reset removed. The local counters are forgotten only
	// when source succeeds. It returns how many of the counters still
	// counted something: source's count, plus those of ops the source
	// could not know about (below 0, or hits not pushed yet).
	Reset(ctx context.Context, now int64, ops []LocalOp, source func(context.Context) (int, error)) (int, error)

	// Call applies an Edge Rate Limiting call whose counters and box are
	// all kept in this process (their limits' sync_rate is not 0), as one
	// atomic step (bucket.ApplyCall). A counter above 0 has its hits pushed
	// at the next sync, as a window's are; a box entry boxed or extended
	// here reaches the source at the next sync of its limit. A removal,
	// and an add that shortens an entry, cannot be pushed (a sync keeps
	// the later expiry): above 0 they are applied on the source at once,
	// which is the one case where Call waits on I/O and may fail.
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

// WithLocal has the Limiter count window and rate-counter limits whose
// sync_rate is not 0, and keep their boxes, in local, in front of its
// source. Wire it only when the source is shared by several processes: on
// a source of one process (memory) every sync_rate behaves as 0, and such
// limits are decided on the source like any other.
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

// spendMixed decides a batch with a local part: the local part first;
// when it is denied, the source part is not decided; otherwise the source
// part runs, and the local part's window costs are written only when the
// source part was allowed too. The local part's rate-counter hits and box
// entries are written in every case, as bucket.SpendBatch writes them in a
// denied batch.
//
// When the local part denies the batch, the local denial, whose retry
// time is never 0, decides it. The source part's rate-counter ops that
// write (check-and-spend, spend-only) are still sent, alone, so that the
// source counts their hits and boxes their ids as in any denied batch
// (observeSource). Its GCRA and window ops are not sent to be written,
// since a source writes those whenever their own batch is allowed:
// spend-only ones are read (as check-only ones) for their answers, the
// others' outcomes stay zero (denied, nothing remaining, no durations),
// and an id such an op would have boxed is not boxed.
func (l *Limiter) spendMixed(ctx context.Context, b *batch) (*BatchDecision, error) {
	now := l.now()
	ops, outcomes := b.sourceOps(now)
	localOps, localOutcomes := b.localPart(now)
	if len(ops) == 0 {
		l.local.Spend(now, localOps, localOutcomes)
		return b.decisions(), nil
	}
	if !l.local.Decide(now, localOps, localOutcomes) {
		if writes(localOutcomes) {
			l.local.Commit(now, localOps, localOutcomes) // hits and boxings only: the batch is denied
		}
		clear(outcomes)
		l.observeSource(ctx, now, ops, outcomes)
		return b.decisions(), nil
	}
	ctx, cancel := l.sourceContext(ctx)
	defer cancel()
	if err := l.source.Spend(ctx, now, ops, outcomes); err != nil {
		return nil, sourceFailure(err)
	}
	if !batchAllowed(ops, outcomes) {
		for i := range localOps {
			if localOps[i].Op.Algorithm != RateCounter {
				localOutcomes[i].Write = false
			}
		}
	}
	l.local.Commit(now, localOps, localOutcomes)
	return b.decisions(), nil
}

// observeSource sends the rate-counter ops of a source part that a local
// denial left undecided, in a batch of their own, and fills their
// outcomes: their hits are counted and their ids boxed as in any denied
// batch. Spend-only GCRA and window ops (shadow limits' among them), which
// do not take part in the batch decision, go in that batch as check-only
// ones, so that their answers are their own decisions while nothing of
// theirs is written, as the denied batch requires. The batch is denied
// whatever they say, so a failure of the source changes nothing in the
// answer: their hits are then not counted, as no hit is while the source
// is down.
func (l *Limiter) observeSource(ctx context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome) {
	var idx []int
	for i := range ops {
		switch {
		case ops[i].Algorithm == RateCounter && ops[i].Mode != CheckOnly:
			idx = append(idx, i)
		case ops[i].Algorithm != RateCounter && ops[i].Mode == SpendOnly:
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	part, partOut := make([]bucket.Op, len(idx)), make([]bucket.Outcome, len(idx))
	for j, i := range idx {
		part[j] = ops[i]
		if part[j].Algorithm != RateCounter {
			part[j].Mode = CheckOnly
		}
	}
	ctx, cancel := l.sourceContext(ctx)
	defer cancel()
	if err := l.source.Spend(ctx, now, part, partOut); err != nil {
		return
	}
	for j, i := range idx {
		outcomes[i] = partOut[j]
	}
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

// writes reports whether any outcome asks for a write.
func writes(outcomes []bucket.Outcome) bool {
	for i := range outcomes {
		if outcomes[i].Write || outcomes[i].WriteBox {
			return true
		}
	}
	return false
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
