package ratelimits

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/concurrency"
)

// A concurrency limit bounds how many slots an id holds at once. A spend
// acquires a lease, named by an id the Limiter makes; Release ends it and
// Renew extends it; a lease neither released nor renewed within its
// limit's period ends by itself, so a client that crashes never keeps a
// slot. docs/semantics.md states the rules.

// The bounds of a concurrency limit: its count (slots) and its period (a
// lease's time to live, a whole number of milliseconds).
const (
	MaxLeaseCount  = concurrency.MaxCount
	MinLeasePeriod = time.Second
	MaxLeasePeriod = 24 * time.Hour
)

// ErrInvalidLease refuses a release or renew whose lease is not an id
// the service could have made (concurrency.ValidID).
var ErrInvalidLease = errors.New("invalid lease")

// ErrNotConcurrency refuses a release or renew of a limit that is not a
// concurrency limit.
var ErrNotConcurrency = errors.New("not a concurrency limit")

// ErrConcurrencyRefund refuses a refund of a concurrency limit: a refund
// does not say which lease to end; a release does.
var ErrConcurrencyRefund = errors.New("a concurrency limit takes no refund: release the lease instead")

// NewConcurrencyLimit validates a concurrency limit of count slots whose
// leases live period: count from 1 to MaxLeaseCount, period a whole number
// of milliseconds from MinLeasePeriod to MaxLeasePeriod. Its Burst is
// count, the most one transaction may cost. Errors wrap ErrInvalidLimit.
func NewConcurrencyLimit(count int64, period time.Duration) (Limit, error) {
	switch {
	case count < 1 || count > MaxLeaseCount:
		return Limit{}, fmt.Errorf("%w: count must be from 1 to %d, got %d", ErrInvalidLimit, MaxLeaseCount, count)
	case period%time.Millisecond != 0:
		return Limit{}, fmt.Errorf("%w: period must be a whole number of milliseconds, got %s", ErrInvalidLimit, period)
	case period < MinLeasePeriod || period > MaxLeasePeriod:
		return Limit{}, fmt.Errorf("%w: period must be from 1s to 24h, got %s", ErrInvalidLimit, period)
	}
	return Limit{Algorithm: Concurrency, Burst: count, Count: count, Period: period}, nil
}

// lease returns a concurrency limit as the concurrency package takes it.
func (l Limit) lease() concurrency.Limit {
	return concurrency.Limit{Count: l.Count, TTL: l.Period.Milliseconds()}
}

// LeaseTransaction names one lease to release or renew: the limit and id
// of its bucket, and the lease's id as the spend that took it answered.
type LeaseTransaction struct {
	Limit string
	ID    string
	Lease string
}

// Release ends each transaction's lease, as one atomic batch. Each
// decision's Allowed says whether a live lease was released (false for
// one unknown, expired or already released: releasing is idempotent);
// its figures are those of a cost-0 acquire after the batch.
func (l *Limiter) Release(ctx context.Context, txns []LeaseTransaction) (*BatchDecision, error) {
	return l.leases(ctx, "", txns, bucket.Release)
}

// Renew sets each transaction's live lease to end its limit's period
// after now, as one atomic batch. Allowed says whether the lease was live:
// an expired lease is not renewed (acquire again).
func (l *Limiter) Renew(ctx context.Context, txns []LeaseTransaction) (*BatchDecision, error) {
	return l.leases(ctx, "", txns, bucket.Renew)
}

// ReleaseOnce is Release made safe to retry under key, as SpendOnce is
// Spend.
func (l *Limiter) ReleaseOnce(ctx context.Context, key string, txns []LeaseTransaction) (*BatchDecision, error) {
	return l.leases(ctx, key, txns, bucket.Release)
}

// RenewOnce is Renew made safe to retry under key.
func (l *Limiter) RenewOnce(ctx context.Context, key string, txns []LeaseTransaction) (*BatchDecision, error) {
	return l.leases(ctx, key, txns, bucket.Renew)
}

// leases releases or renews a batch of leases through the source's refund
// (the ops' LeaseAction says which), remembered under key when it is not
// empty. Releases and renewals are never failed open: pretending one
// happened would lie.
func (l *Limiter) leases(ctx context.Context, key string, txns []LeaseTransaction, action bucket.LeaseAction) (*BatchDecision, error) {
	plain := make([]Transaction, len(txns))
	for i, t := range txns {
		plain[i] = Transaction{Limit: t.Limit, ID: t.ID}
	}
	b, err := l.prepareDecision(plain)
	if err != nil {
		return nil, err
	}
	for i := range b.prepared {
		p := &b.prepared[i]
		switch {
		case p.algorithm != Concurrency:
			return nil, &TransactionError{Index: i, Err: fmt.Errorf("%w: %s counts with %s; release and renew take concurrency limits only", ErrNotConcurrency, p.info.Limit, p.algorithm)}
		case !concurrency.ValidID(txns[i].Lease):
			return nil, &TransactionError{Index: i, Err: fmt.Errorf("%w: want %d lowercase hexadecimal characters, as the spend that took the lease answered", ErrInvalidLease, concurrency.IDLength)}
		}
		p.lease = txns[i].Lease
	}
	b.leaseAction = action
	if key != "" {
		op := opRelease
		if action == bucket.Renew {
			op = opRenew
		}
		_, bd, err := l.onceBatch(ctx, key, op, b, l.source.RefundOnce)
		return bd, err
	}
	now := l.now()
	if ops, outcomes := b.sourceOps(now); len(ops) > 0 {
		if err := l.source.Refund(ctx, now, ops, outcomes); err != nil {
			return nil, sourceFailure(err)
		}
	}
	return b.decisions(), nil
}

// refuseConcurrencyRefund refuses a refund batch that names a
// concurrency limit.
func (b *batch) refuseConcurrencyRefund() error {
	for i := range b.prepared {
		if p := &b.prepared[i]; p.algorithm == Concurrency {
			return &TransactionError{Index: i, Err: fmt.Errorf("%w (%s)", ErrConcurrencyRefund, p.info.Limit)}
		}
	}
	return nil
}

// leaseOp fills a concurrency op's lease: the one a release or renew
// names, or for a spend that may take one (not check-only, cost above 0),
// a new id.
func (b *batch) leaseOp(p *preparedTxn, op *bucket.Op) {
	switch {
	case p.lease != "":
		op.LeaseID, op.LeaseAction = p.lease, b.leaseAction
	case op.Mode != CheckOnly && op.Cost > 0:
		op.LeaseID = concurrency.NewID()
	}
}
