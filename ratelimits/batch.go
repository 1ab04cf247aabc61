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

// sourceOps returns the ops of the limited transactions, in request
// order, and room for the source's outcomes. Unlimited transactions have
// no bucket and never reach the source.
//
// now is the instant the batch is decided at, which sets when an id boxed
// by it leaves its box.
func (b *batch) sourceOps(now int64) ([]bucket.Op, []bucket.Outcome) {
	b.ops = b.ops[:0]
	for i := range b.prepared {
		p := &b.prepared[i]
		if p.unlimited {
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

// decisions builds the batch decision from the source's outcomes.
func (b *batch) decisions() *BatchDecision {
	next := 0
	for i, p := range b.prepared {
		switch {
		case p.unlimited:
			b.bd.Decisions[i] = unlimitedDecision(p)
		default:
			b.bd.Decisions[i] = limitedDecision(p, b.outcomes[next].Decision)
			next++
		}
	}
	combine(&b.bd, b.prepared)
	return &b.bd
}
