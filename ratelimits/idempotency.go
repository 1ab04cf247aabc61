package ratelimits

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
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
	b, err := l.prepare(txns, true)
	if err != nil {
		return nil, err
	}
	bd, err := l.runOnce(ctx, b, key, 'S', l.source.SpendOnce)
	if err != nil && l.failOpen && errors.Is(err, ErrSourceUnavailable) {
		return degradedDecision(b.prepared, err), nil
	}
	return bd, err
}

// RefundOnce is Refund made safe to retry, as SpendOnce is Spend.
func (l *Limiter) RefundOnce(ctx context.Context, key string, txns []Transaction) (*BatchDecision, error) {
	b, err := l.prepare(txns, true)
	if err != nil {
		return nil, err
	}
	return l.runOnce(ctx, b, key, 'R', l.source.RefundOnce)
}

// onceFunc is a Source method that decides a batch under a record.
type onceFunc func(ctx context.Context, now int64, rec once.Record, ops []gcra.Op, outcomes []gcra.Outcome) (bool, error)

// runOnce is run for SpendOnce and RefundOnce: the record's expiry counts
// from the batch's now, and a replayed answer is marked.
func (l *Limiter) runOnce(ctx context.Context, b *batch, key string, op byte, apply onceFunc) (*BatchDecision, error) {
	if key == "" || len(key) > MaxIdempotencyKeyBytes {
		return nil, fmt.Errorf("%w: want 1 to %d bytes, got %d", ErrInvalidIdempotencyKey, MaxIdempotencyKeyBytes, len(key))
	}
	ttl := l.idempotencyTTL
	if ttl <= 0 {
		ttl = DefaultIdempotencyTTL
	}
	rec := once.Record{Key: key, Fingerprint: fingerprint(op, b.prepared)}
	replayed := false
	bd, err := l.run(ctx, b, func(ctx context.Context, now int64, ops []gcra.Op, outcomes []gcra.Outcome) error {
		rec.Expires = now + int64(ttl)
		var err error
		replayed, err = apply(ctx, now, rec, ops, outcomes)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrIdempotencyMismatch) || errors.Is(err, ErrIdempotencyUnsettled) {
			// The source answered: these are the caller's, not an outage.
			return nil, unwrapSourceUnavailable(err)
		}
		return nil, err
	}
	bd.Replayed = replayed
	return bd, nil
}

// unwrapSourceUnavailable drops the ErrSourceUnavailable that run wraps
// every source error in, for the source errors that are answers.
func unwrapSourceUnavailable(err error) error {
	for _, target := range []error{ErrIdempotencyMismatch, ErrIdempotencyUnsettled} {
		if errors.Is(err, target) {
			return target
		}
	}
	return err
}

// fingerprint identifies a request for its idempotency record: the
// operation, and per transaction the limit name, canonical id, cost, mode
// and the effective limit. Including the limit means that a retry after a
// reload changed it is not answered with numbers the new limit would not
// give; it is refused as another request instead.
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
		if p.unlimited {
			buf = append(buf, 0)
		} else {
			buf = append(buf, 1)
			if p.limit.Override {
				buf = append(buf, 1)
			} else {
				buf = append(buf, 0)
			}
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
