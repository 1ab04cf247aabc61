package ratelimits

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// Limiter answers spend, check, refund and reset for batches of
// transactions. It resolves each transaction's effective limit from the
// current configuration snapshot, hands the batch to its Source (which
// decides and writes atomically) and combines the answers. It knows no
// HTTP and no storage details, and is safe for concurrent use.
type Limiter struct {
	source   Source
	clock    clock.Clock
	failOpen bool
	// idempotencyTTL is how long SpendOnce and RefundOnce remember a call.
	idempotencyTTL time.Duration
	config         atomic.Pointer[Config]
}

// Option configures a Limiter.
type Option func(*Limiter)

// WithFailOpen makes spends and checks whose source fails answer allowed,
// marked Degraded, instead of failing: for callers that would rather let
// traffic through unlimited than stop it while the store is down. Refunds
// and resets still fail, since pretending they happened would lie.
func WithFailOpen() Option {
	return func(l *Limiter) { l.failOpen = true }
}

// NewLimiter returns a Limiter deciding with cfg's limits, storing buckets
// in src, and reading time from clk (a fake clock in tests).
func NewLimiter(cfg *Config, src Source, clk clock.Clock, opts ...Option) (*Limiter, error) {
	if cfg == nil || src == nil || clk == nil {
		return nil, errors.New("ratelimits: NewLimiter needs a config, a source and a clock")
	}
	l := &Limiter{source: src, clock: clk}
	for _, opt := range opts {
		opt(l)
	}
	if l.idempotencyTTL <= 0 {
		l.idempotencyTTL = DefaultIdempotencyTTL
	}
	l.config.Store(cfg)
	return l, nil
}

// Config returns the configuration snapshot in use.
func (l *Limiter) Config() *Config { return l.config.Load() }

// SetConfig replaces the configuration in one atomic swap: every batch
// decides entirely with the old snapshot or entirely with the new one.
// Buckets are kept; a changed limit applies from the next decision.
func (l *Limiter) SetConfig(cfg *Config) {
	if cfg != nil {
		l.config.Store(cfg)
	}
}

// Spend decides a batch and, when it is allowed, takes the tokens.
func (l *Limiter) Spend(ctx context.Context, txns []Transaction) (*BatchDecision, error) {
	b, err := l.prepareDecision(txns)
	if err != nil {
		return nil, err
	}
	bd, err := l.spend(ctx, b)
	return l.degradeOnSourceFailure(b, bd, err)
}

// Check decides a batch exactly as Spend would, but every transaction is
// treated as check-only: nothing is written.
func (l *Limiter) Check(ctx context.Context, txns []Transaction) (*BatchDecision, error) {
	b, err := l.prepareDecision(txns)
	if err != nil {
		return nil, err
	}
	b.checkAll()
	bd, err := l.spend(ctx, b)
	if err != nil && !errors.Is(err, ErrNotApplied) {
		// A check writes nothing, whatever became of the call.
		err = fmt.Errorf("%w (%w)", err, ErrNotApplied)
	}
	return l.degradeOnSourceFailure(b, bd, err)
}

// Refund gives each transaction's cost back to its bucket (check-only
// transactions give back nothing). Missing buckets are not created.
// Decisions report per transaction whether anything was given back; the
// batch fields are combined as for a spend.
func (l *Limiter) Refund(ctx context.Context, txns []Transaction) (*BatchDecision, error) {
	b, err := l.prepareDecision(txns)
	if err != nil {
		return nil, err
	}
	if err := b.refuseConcurrencyRefund(); err != nil {
		return nil, err
	}
	now := l.now()
	if ops, outcomes := b.sourceOps(now); len(ops) > 0 {
		if err := l.source.Refund(ctx, now, ops, outcomes); err != nil {
			return nil, sourceFailure(err)
		}
	}
	return b.decisions(), nil
}

// Reset deletes the buckets of the transactions (their cost and mode are
// ignored), so they read as full, and returns how many were not full.
func (l *Limiter) Reset(ctx context.Context, txns []Transaction) (int, error) {
	ops, err := l.prepareReset(txns)
	if err != nil {
		return 0, err
	}
	if len(ops) == 0 {
		return 0, nil
	}
	n, err := l.source.Reset(ctx, l.now(), ops)
	if err != nil {
		return 0, sourceFailure(err)
	}
	return n, nil
}

// Inspect returns the effective limit for one subscriber and its bucket's
// state, as a cost-0 check: nothing is written. It never fails open: when
// the source fails, so does Inspect.
func (l *Limiter) Inspect(ctx context.Context, limit, id string) (Decision, error) {
	bd, err := l.Check(ctx, []Transaction{{Limit: limit, ID: id, Cost: 0}})
	if err != nil {
		return Decision{}, err
	}
	if bd.Degraded {
		// Failing open lets traffic through without a decision; a view of
		// one bucket would have nothing true to show, so it fails as the
		// source did.
		return Decision{}, bd.Cause
	}
	return bd.Decisions[0], nil
}

// Ready reports whether the source answers.
func (l *Limiter) Ready(ctx context.Context) error {
	if err := l.source.Ping(ctx); err != nil {
		return sourceFailure(err)
	}
	return nil
}

// spend hands the limited transactions of a prepared batch to the source's
// Spend in one call and decides the batch. Unlimited transactions never
// reach the source.
func (l *Limiter) spend(ctx context.Context, b *batch) (*BatchDecision, error) {
	if b.hasShadowCheck() {
		return l.spendShadowChecksApart(ctx, b)
	}
	now := l.now()
	if ops, outcomes := b.sourceOps(now); len(ops) > 0 {
		if err := l.source.Spend(ctx, now, ops, outcomes); err != nil {
			return nil, sourceFailure(err)
		}
	}
	return b.decisions(), nil
}

// degradeOnSourceFailure answers a spend or check whose source failed as allowed, marked
// Degraded, when the Limiter fails open; any other answer passes through.
func (l *Limiter) degradeOnSourceFailure(b *batch, bd *BatchDecision, err error) (*BatchDecision, error) {
	if err != nil && l.failOpen && errors.Is(err, ErrSourceUnavailable) {
		return degradedDecision(b.prepared, err), nil
	}
	return bd, err
}

// sourceFailure wraps an error of the source: whatever the source says,
// the caller learns that the store, not the request, failed.
func sourceFailure(err error) error {
	return fmt.Errorf("%w: %w", ErrSourceUnavailable, err)
}

// prepareDecision validates a spend, check or refund against the current
// configuration snapshot, read once so the whole batch decides on one
// configuration.
func (l *Limiter) prepareDecision(txns []Transaction) (*batch, error) {
	b, err := newBatch(len(txns))
	if err != nil {
		return nil, err
	}
	if err := prepareDecisions(l.config.Load(), txns, b.prepared); err != nil {
		return nil, err
	}
	return b, nil
}

// prepareReset validates a reset, which needs only the buckets: cost and
// mode are ignored. It returns the ops of the limited transactions, in
// request order; an unlimited one has nothing stored to delete.
func (l *Limiter) prepareReset(txns []Transaction) ([]bucket.Op, error) {
	if len(txns) == 0 {
		return nil, ErrEmptyBatch
	}
	prepared := make([]preparedTxn, len(txns))
	if err := prepareResets(l.config.Load(), txns, prepared); err != nil {
		return nil, err
	}
	ops := make([]bucket.Op, 0, len(prepared))
	for _, p := range prepared {
		if !p.unlimited {
			ops = append(ops, p.limit.op(p.key, 0, CheckAndSpend, 0))
		}
	}
	return ops, nil
}

// now reads the clock once per batch, so every bucket of a batch is decided
// at the same instant.
func (l *Limiter) now() int64 { return l.clock.Now().UnixNano() }
