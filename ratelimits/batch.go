package ratelimits

import "github.com/limiter-dev/limiter/ratelimits/bucket"

// batch is everything one spend, check or refund needs while it runs. A
// batch of one, the common case, keeps it all in one allocation instead of
// five.
type batch struct {
	bd       BatchDecision
	prepared []preparedTxn
	ops      []bucket.Op
	outcomes []bucket.Outcome
	// withLocal says that the Limiter has a local layer: window limits
	// whose sync_rate is not 0 are then decided there, in localOps, and
	// never reach the source. localOps and localOutcomes are made only for
	// a batch that has such a limit.
	withLocal     bool
	localOps      []LocalOp
	localOutcomes []bucket.Outcome
	// leaseAction is what the concurrency ops of a release or renew do.
	leaseAction bucket.LeaseAction
	single      struct {
		prepared  [1]preparedTxn
		ops       [1]bucket.Op
		outcomes  [1]bucket.Outcome
		decisions [1]Decision
	}
}

// newBatch makes room for n transactions.
func newBatch(n int) (*batch, error) {
	if n == 0 {
		return nil, ErrEmptyBatch
	}
	b := &batch{}
	if n == 1 {
		b.prepared, b.ops, b.outcomes, b.bd.Decisions = b.single.prepared[:], b.single.ops[:0], b.single.outcomes[:0], b.single.decisions[:]
	} else {
		b.prepared, b.ops, b.outcomes, b.bd.Decisions = make([]preparedTxn, n), make([]bucket.Op, 0, n), make([]bucket.Outcome, 0, n), make([]Decision, n)
	}
	return b, nil
}

// checkAll makes every transaction check-only, for Check: the batch is
// decided as a spend would be and nothing is written.
func (b *batch) checkAll() {
	for i := range b.prepared {
		b.prepared[i].mode = CheckOnly
	}
}

// local reports whether p is decided by the local layer: a limited window
// transaction whose sync_rate is not 0, in a Limiter that has one.
func (b *batch) local(p *preparedTxn) bool {
	return b.withLocal && !p.unlimited && p.limit.SyncRate != 0
}

// hasLocal reports whether any transaction of the batch is decided by the
// local layer, and the first one's index.
func (b *batch) hasLocal() (int, bool) {
	if !b.withLocal {
		return 0, false
	}
	for i := range b.prepared {
		if b.local(&b.prepared[i]) {
			return i, true
		}
	}
	return 0, false
}

// sourceOps returns the ops of the limited transactions the source
// decides, in request order, and room for the source's outcomes.
// Unlimited transactions have no bucket and never reach the source, nor
// do those of the local layer.
//
// now is the instant the batch is decided at, which sets when an id boxed
// by it leaves its box.
func (b *batch) sourceOps(now int64) ([]bucket.Op, []bucket.Outcome) {
	b.ops = b.ops[:0]
	for i := range b.prepared {
		p := &b.prepared[i]
		if p.unlimited || b.local(p) {
			continue
		}
		b.ops = append(b.ops, p.limit.op(p.key, p.cost, p.mode, now))
		if p.limit.Algorithm == Concurrency {
			b.leaseOp(p, &b.ops[len(b.ops)-1])
		}
	}
	b.outcomes = b.outcomes[:len(b.ops)]
	return b.ops, b.outcomes
}

// localPart returns the ops of the transactions the local layer decides,
// in request order, with their sync_rate, and room for its outcomes.
func (b *batch) localPart(now int64) ([]LocalOp, []bucket.Outcome) {
	b.localOps, b.localOutcomes = b.localOps[:0], b.localOutcomes[:0]
	for i := range b.prepared {
		p := &b.prepared[i]
		if !b.local(p) {
			continue
		}
		if b.localOps == nil {
			b.localOps, b.localOutcomes = make([]LocalOp, 0, len(b.prepared)), make([]bucket.Outcome, 0, len(b.prepared))
		}
		b.localOps = append(b.localOps, LocalOp{Op: p.limit.op(p.key, p.cost, p.mode, now), SyncRate: p.limit.SyncRate})
	}
	b.localOutcomes = b.localOutcomes[:len(b.localOps)]
	return b.localOps, b.localOutcomes
}

// decisions builds the batch decision from the outcomes of the source
// and of the local layer.
func (b *batch) decisions() *BatchDecision {
	next, nextLocal := 0, 0
	for i, p := range b.prepared {
		switch {
		case p.unlimited:
			b.bd.Decisions[i] = unlimitedDecision(p)
		case b.local(&p):
			b.bd.Decisions[i] = limitedDecision(p, b.localOutcomes[nextLocal].Decision)
			nextLocal++
		default:
			b.bd.Decisions[i] = limitedDecision(p, b.outcomes[next].Decision)
			next++
		}
	}
	combine(&b.bd, b.prepared)
	return &b.bd
}
