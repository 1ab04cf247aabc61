package ratelimits

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
)

// DefaultIdempotencyTTL is how long a spend or refund made with an
// idempotency key is remembered when no WithIdempotencyTTL is given: long
// enough for any client's retries, short enough that the records of a busy
// service stay few.
const DefaultIdempotencyTTL = 10 * time.Minute

// MaxIdempotencyKeyBytes bounds the key SpendOnce and RefundOnce take,
// scope included: the key is stored with every record.
const MaxIdempotencyKeyBytes = 1024

// Errors of SpendOnce and RefundOnce. They are the once package's, so that
// callers of the Limiter need not import it.
var (
	// ErrIdempotencyMismatch: the key was used for another request.
	ErrIdempotencyMismatch = once.ErrMismatch
	// ErrIdempotencyUnsettled: the key's first request has no known
	// outcome yet (see once.ErrUnsettled).
	ErrIdempotencyUnsettled = once.ErrUnsettled
	// ErrNotApplied is wrapped, beside ErrSourceUnavailable, by a source
	// failure that certainly changed nothing: retrying is safe. A source
	// failure without it may have taken effect.
	ErrNotApplied = once.ErrNotApplied
	// ErrInvalidIdempotencyKey: the key is empty or longer than
	// MaxIdempotencyKeyBytes.
	ErrInvalidIdempotencyKey = errors.New("invalid idempotency key")
)

// WithIdempotencyTTL sets how long SpendOnce and RefundOnce remember a
// call (DefaultIdempotencyTTL when d <= 0).
func WithIdempotencyTTL(d time.Duration) Option {
	return func(l *Limiter) { l.idempotencyTTL = d }
}

// SpendOnce is Spend made safe to retry. The first call with key decides
// and spends as Spend does, and the source records the answer in the same
// atomic step. A call with the same key and the same batch within the
// idempotency TTL spends nothing and answers the first call's decision,
// marked Replayed; a call with the same key and another batch (or the same
// batch under changed limits) fails with ErrIdempotencyMismatch.
//
// key is the caller's to scope: two clients that may choose the same key
// must be given different prefixes.
func (l *Limiter) SpendOnce(ctx context.Context, key string, txns []Transaction) (*BatchDecision, error) {
	b, bd, err := l.once(ctx, key, opSpend, txns, l.source.SpendOnce)
	if err != nil && b != nil {
		// A spend fails open like Spend; a refund never does.
		return l.degradeOnSourceFailure(b, nil, err)
	}
	return bd, err
}

// RefundOnce is Refund made safe to retry, as SpendOnce is Spend.
func (l *Limiter) RefundOnce(ctx context.Context, key string, txns []Transaction) (*BatchDecision, error) {
	_, bd, err := l.once(ctx, key, opRefund, txns, l.source.RefundOnce)
	return bd, err
}

// sourceOnce is Source.SpendOnce or Source.RefundOnce.
type sourceOnce func(ctx context.Context, now int64, rec once.Record, ops []bucket.Op, outcomes []bucket.Outcome) (bool, error)

// once validates a batch and its key, and decides it through apply under
// the key's record. When apply fails, the batch is returned with the error
// (and only then), so that SpendOnce can fail open on a source failure.
func (l *Limiter) once(ctx context.Context, key string, op byte, txns []Transaction, apply sourceOnce) (*batch, *BatchDecision, error) {
	b, err := l.prepareDecision(txns)
	if err != nil {
		return nil, nil, err
	}
	if op == opRefund {
		if err := b.refuseConcurrencyRefund(); err != nil {
			return nil, nil, err
		}
	}
	return l.onceBatch(ctx, key, op, b, apply)
}

// onceBatch decides a prepared batch through apply under the record of
// key, as once says.
func (l *Limiter) onceBatch(ctx context.Context, key string, op byte, b *batch, apply sourceOnce) (*batch, *BatchDecision, error) {
	rec, err := l.record(key, op, b)
	if err != nil {
		return nil, nil, err
	}
	if i, ok := b.hasBox(); ok {
		return nil, nil, &TransactionError{Index: i, Err: ErrBoxIdempotency}
	}
	if op == opSpend && b.hasShadowCheck() {
		i, _ := b.firstShadowCheck()
		return nil, nil, &TransactionError{Index: i, Err: ErrShadowCheckIdempotency}
	}
	now := l.now()
	// A batch of no bucket (every transaction unlimited) is recorded too,
	// with no op: a repeat is a replay, and another body under its key is
	// refused, as for any batch.
	ops, outcomes := b.sourceOps(now)
	rec.Expires = now + int64(l.idempotencyTTL)
	replayed, err := apply(ctx, now, rec, ops, outcomes)
	if err != nil {
		if refused := b.refusal(err); refused != nil {
			return nil, nil, refused
		}
		return b, nil, onceFailure(err)
	}
	bd := b.decisions()
	bd.Replayed = replayed
	return nil, bd, nil
}

// refusal is a source's refusal of one op's record (Source.SpendOnce) as
// the refusal of that op's transaction; nil for any other error.
func (b *batch) refusal(err error) error {
	var te *TransactionError
	if !errors.As(err, &te) || !errors.Is(err, ErrInvalidIdempotencyKey) {
		return nil
	}
	op := 0
	for i := range b.prepared {
		if b.prepared[i].unlimited {
			continue
		}
		if op == te.Index {
			return &TransactionError{Index: i, Err: te.Err}
		}
		op++
	}
	return nil
}

// The operations a fingerprint tells apart, so that a key used for a spend
// is refused for a refund.
const (
	opSpend   byte = 'S'
	opRefund  byte = 'R'
	opRelease byte = 'L'
	opRenew   byte = 'N'
)

// record validates key and makes the record of batch b under it. Its
// expiry counts from the batch's now, which the caller sets.
func (l *Limiter) record(key string, op byte, b *batch) (once.Record, error) {
	if key == "" || len(key) > MaxIdempotencyKeyBytes {
		return once.Record{}, fmt.Errorf("%w: want 1 to %d bytes, got %d", ErrInvalidIdempotencyKey, MaxIdempotencyKeyBytes, len(key))
	}
	return once.Record{Key: key, Fingerprint: fingerprint(op, b.prepared)}, nil
}

// onceFailure wraps an error of SpendOnce or RefundOnce. A mismatched or
// unsettled key is the source's answer, and the caller's problem, not an
// outage; anything else is a source failure.
func onceFailure(err error) error {
	for _, answer := range []error{ErrIdempotencyMismatch, ErrIdempotencyUnsettled} {
		if errors.Is(err, answer) {
			return answer
		}
	}
	return sourceFailure(err)
}

// fingerprint identifies a request for its idempotency record: the
// operation, and per transaction the limit name, canonical id, cost, mode
// and the effective limit: its algorithm and numbers (a GCRA limit's
// burst, count and period; a window limit's count, period and sync_rate;
// a calendar limit's count, unit and zone).
// Including the limit means that a retry after a reload changed it is not
// answered with numbers the new limit would not give; it is refused as
// another request instead.
func fingerprint(op byte, prepared []preparedTxn) string {
	h := sha256.New()
	buf := make([]byte, 0, 128)
	buf = append(buf, op)
	for _, p := range prepared {
		buf = binary.AppendUvarint(buf, uint64(p.info.Name))
		buf = binary.AppendUvarint(buf, uint64(len(p.bucketID)))
		buf = append(buf, p.bucketID...)
		buf = binary.AppendVarint(buf, p.cost)
		buf = append(buf, byte(p.mode))
		switch {
		case p.unlimited:
			buf = append(buf, 0)
		case p.limit.Algorithm == Concurrency:
			// The lease a release or renew names is part of the request.
			buf = append(buf, 3, boolByte(p.limit.Override))
			buf = binary.AppendVarint(buf, p.limit.Count)
			buf = binary.AppendVarint(buf, int64(p.limit.Period))
			buf = append(buf, p.lease...)
		case p.limit.Algorithm.Windowed():
			// A window limit is told from a GCRA one by its tag, and
			// from the other window algorithm by its own byte.
			buf = append(buf, 2, byte(p.limit.Algorithm), boolByte(p.limit.Override))
			buf = binary.AppendVarint(buf, p.limit.Count)
			buf = binary.AppendVarint(buf, int64(p.limit.Period))
			buf = binary.AppendVarint(buf, int64(p.limit.SyncRate))
		case p.limit.Algorithm == Calendar:
			// A calendar limit is told by its tag, its count and its
			// calendar's identity (unit and zone).
			buf = append(buf, 3, boolByte(p.limit.Override))
			buf = binary.AppendVarint(buf, p.limit.Count)
			buf = binary.AppendVarint(buf, p.limit.Calendar.Tag())
		default:
			// GCRA's form has not changed since windows were added, so a
			// retry across an upgrade still matches its record.
			buf = append(buf, 1, boolByte(p.limit.Override))
			buf = binary.AppendVarint(buf, p.limit.Burst)
			buf = binary.AppendVarint(buf, p.limit.Count)
			buf = binary.AppendVarint(buf, int64(p.limit.Period))
		}
		h.Write(buf)
		buf = buf[:0]
	}
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:16])
}

// boolByte is 1 for true and 0 for false.
func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// ErrShadowCheckIdempotency refuses SpendOnce of a batch
// in which a check-only transaction of a shadow limit sits beside
// transactions that write: such a batch is decided in two source calls
// (see Limiter.spend), which one idempotency record cannot cover.
var ErrShadowCheckIdempotency = fmt.Errorf("%w: a check-only transaction of a shadow limit beside transactions that write is decided apart from them, which no idempotency record replays; send the batch without an idempotency key", ErrInvalidIdempotencyKey)

// ErrBoxIdempotency refuses SpendOnce and RefundOnce of a batch with a
// rate-counter limit or a limit with a penalty box. Such a batch writes
// even when it is denied (hits counted, ids boxed), and a replay would have
// to give back the box's answer as it stood then; no record keeps that. It
// wraps ErrInvalidIdempotencyKey, so callers answer it as a client error.
var ErrBoxIdempotency = fmt.Errorf("%w: a rate-counter limit, or a limit with a penalty, writes even when denied, which no idempotency record replays; send the batch without an idempotency key", ErrInvalidIdempotencyKey)

// hasBox reports whether a limited transaction of the batch has a penalty
// box (every rate-counter limit has one), and the first one's index.
func (b *batch) hasBox() (int, bool) {
	for i := range b.prepared {
		if p := &b.prepared[i]; !p.unlimited && p.limit.HasBox() {
			return i, true
		}
	}
	return 0, false
}
