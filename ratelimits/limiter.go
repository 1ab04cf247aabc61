package ratelimits

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
)

// Limiter answers spend, check, refund and reset for batches of
// transactions. It resolves each transaction's effective limit from the
// current configuration snapshot, hands the batch to its Source (which
// decides and writes atomically) and combines the answers. It knows no
// HTTP and no storage details, and is safe for concurrent use.
type Limiter struct {
	source        Source
	clock         clock.Clock
	sourceTimeout time.Duration
	failOpen      bool
	// idempotencyTTL is how long SpendOnce and RefundOnce remember a call.
	idempotencyTTL time.Duration
	config         atomic.Pointer[Config]
}

// Option configures a Limiter.
type Option func(*Limiter)

// WithSourceTimeout bounds every source call: a limiter that waits long
// for its store is worse than none, so a slow source fails the call with
// ErrSourceUnavailable instead. Zero (the default) leaves the caller's
// context deadline alone.
func WithSourceTimeout(d time.Duration) Option {
	return func(l *Limiter) { l.sourceTimeout = d }
}

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
	return l.decide(ctx, txns, false)
}

// Check decides a batch exactly as Spend would, but every transaction is
// treated as check-only: nothing is written.
func (l *Limiter) Check(ctx context.Context, txns []Transaction) (*BatchDecision, error) {
	return l.decide(ctx, txns, true)
}

// Refund gives each transaction's cost back to its bucket (check-only
// transactions give back nothing). Missing buckets are not created.
// Decisions report per transaction whether anything was given back; the
// batch fields are combined as for a spend.
func (l *Limiter) Refund(ctx context.Context, txns []Transaction) (*BatchDecision, error) {
	b, err := l.prepare(txns, true)
	if err != nil {
		return nil, err
	}
	return l.run(ctx, b, l.source.Refund)
}

// Reset deletes the buckets of the transactions (their cost and mode are
// ignored), so they read as full, and returns how many were not full.
func (l *Limiter) Reset(ctx context.Context, txns []Transaction) (int, error) {
	b, err := l.prepare(txns, false)
	if err != nil {
		return 0, err
	}
	keys := make([]string, len(b.prepared))
	for i, p := range b.prepared {
		keys[i] = p.key
	}
	ctx, cancel := l.sourceContext(ctx)
	defer cancel()
	n, err := l.source.Reset(ctx, l.now(), keys)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrSourceUnavailable, err)
	}
	return n, nil
}

// Inspect returns the effective limit for one subscriber and its bucket's
// state, as a cost-0 check: nothing is written.
func (l *Limiter) Inspect(ctx context.Context, limit, id string) (Decision, error) {
	bd, err := l.Check(ctx, []Transaction{{Limit: limit, ID: id, Cost: 0}})
	if err != nil {
		return Decision{}, err
	}
	return bd.Decisions[0], nil
}

// Ready reports whether the source answers.
func (l *Limiter) Ready(ctx context.Context) error {
	ctx, cancel := l.sourceContext(ctx)
	defer cancel()
	if err := l.source.Ping(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrSourceUnavailable, err)
	}
	return nil
}

// decide runs a spend, or a check when checkOnly is set.
func (l *Limiter) decide(ctx context.Context, txns []Transaction, checkOnly bool) (*BatchDecision, error) {
	b, err := l.prepare(txns, true)
	if err != nil {
		return nil, err
	}
	if checkOnly {
		for i := range b.prepared {
			b.prepared[i].mode = CheckOnly
		}
	}
	bd, err := l.run(ctx, b, l.source.Spend)
	if err != nil && checkOnly && !errors.Is(err, ErrNotApplied) {
		// A check writes nothing, whatever became of the call.
		err = fmt.Errorf("%w (%w)", err, ErrNotApplied)
	}
	if err != nil && l.failOpen && errors.Is(err, ErrSourceUnavailable) {
		return degradedDecision(b.prepared, err), nil
	}
	return bd, err
}

// batch is everything one batch needs while it runs. A batch of one, the
// common case, keeps it all in one allocation instead of five.
type batch struct {
	bd       BatchDecision
	prepared []preparedTxn
	ops      []gcra.Op
	outcomes []gcra.Outcome
	single   struct {
		prepared  [1]preparedTxn
		ops       [1]gcra.Op
		outcomes  [1]gcra.Outcome
		decisions [1]Decision
	}
}

// prepare validates txns against the current configuration snapshot, read
// once so the whole batch decides on one configuration.
func (l *Limiter) prepare(txns []Transaction, checkCost bool) (*batch, error) {
	n := len(txns)
	if n == 0 {
		return nil, ErrEmptyBatch
	}
	b := &batch{}
	if n == 1 {
		b.prepared, b.ops, b.outcomes, b.bd.Decisions = b.single.prepared[:], b.single.ops[:0], b.single.outcomes[:0], b.single.decisions[:]
	} else {
		b.prepared, b.ops, b.outcomes, b.bd.Decisions = make([]preparedTxn, n), make([]gcra.Op, 0, n), make([]gcra.Outcome, 0, n), make([]Decision, n)
	}
	if err := prepareBatch(l.config.Load(), txns, checkCost, b.prepared); err != nil {
		return nil, err
	}
	return b, nil
}

// batchFunc is a Source method that decides a batch of ops.
type batchFunc func(ctx context.Context, now int64, ops []gcra.Op, outcomes []gcra.Outcome) error

// run hands the limited transactions of a validated batch to the source in
// one call and builds the batch decision. Unlimited transactions never
// reach the source.
func (l *Limiter) run(ctx context.Context, b *batch, apply batchFunc) (*BatchDecision, error) {
	for _, p := range b.prepared {
		if p.unlimited {
			continue
		}
		b.ops = append(b.ops, gcra.Op{
			Key:              p.key,
			EmissionInterval: p.limit.EmissionInterval(),
			BurstOffset:      p.limit.BurstOffset(),
			Cost:             p.cost,
			Mode:             p.mode,
		})
	}
	b.outcomes = b.outcomes[:len(b.ops)]
	if len(b.ops) > 0 {
		ctx, cancel := l.sourceContext(ctx)
		defer cancel()
		if err := apply(ctx, l.now(), b.ops, b.outcomes); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSourceUnavailable, err)
		}
	}
	next := 0
	for i, p := range b.prepared {
		if p.unlimited {
			b.bd.Decisions[i] = unlimitedDecision(p)
			continue
		}
		b.bd.Decisions[i] = limitedDecision(p, b.outcomes[next].Decision)
		next++
	}
	combine(&b.bd, b.prepared)
	return &b.bd, nil
}

// now reads the clock once per batch, so every bucket of a batch is decided
// at the same instant.
func (l *Limiter) now() int64 { return l.clock.Now().UnixNano() }

func (l *Limiter) sourceContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.sourceTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, l.sourceTimeout)
}
