package redis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
)

// RecordKeyPrefix starts the keys of idempotency records (docs/redis.md,
// "Idempotency records").
const RecordKeyPrefix = "lim:once:"

// SpendOnce implements ratelimits.Source: the batch and its record are
// decided and written by one script call (a scriptCall with a record). On a
// cluster, a batch across hash slots is recorded beside a claim instead
// (see onceAcrossSlots).
func (s *Source) SpendOnce(ctx context.Context, now int64, rec once.Record, ops []bucket.Op, outcomes []bucket.Outcome) (bool, error) {
	return s.applyOnce(ctx, now, rec, ops, outcomes, opSpend)
}

// RefundOnce implements ratelimits.Source, as SpendOnce.
func (s *Source) RefundOnce(ctx context.Context, now int64, rec once.Record, ops []bucket.Op, outcomes []bucket.Outcome) (bool, error) {
	return s.applyOnce(ctx, now, rec, ops, outcomes, opRefund)
}

// recordID is the part of a record's key that stands for the caller's
// idempotency key: a hash, so that any key is a fixed-length name with no
// braces in it.
func recordID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// recordKey returns the key of a record. On one Redis any name will do;
// on a cluster the record must share its batch's slot, so it takes the
// hash tag of the batch's first key (its bucket in format v1, its group in
// v2). ok is false when that key has no hash tag to share.
func (s *Source) recordKey(id, first string) (key string, ok bool) {
	prefix := RecordKeyPrefix + s.namespace
	if !s.cluster {
		return prefix + id, true
	}
	open := strings.IndexByte(first, '{')
	if open < 0 {
		return "", false
	}
	n := strings.IndexByte(first[open+1:], '}')
	if n <= 0 {
		return "", false
	}
	return prefix + first[open:open+n+2] + id, true
}

// recordLifetime is how long Redis keeps a record: until it expires on the
// service's clock, and the expiry margin after, so that a record is never
// gone from Redis while the service's clock still says it answers.
func (s *Source) recordLifetime(now int64, rec once.Record) int64 {
	return max((rec.Expires-now+999_999)/1_000_000, 1) + s.wire.marginMS
}

// applyOnce runs a spend or refund (op) under rec.
func (s *Source) applyOnce(ctx context.Context, now int64, rec once.Record, ops []bucket.Op, outcomes []bucket.Outcome, op operation) (bool, error) {
	keys, boxes, err := s.keys(ops, now)
	if err == nil && boxes != nil {
		// A batch with a box writes even when denied, and a record cannot
		// replay the box's answer as it stood (ratelimits refuses such
		// batches before they get here).
		err = fmt.Errorf("%w: an idempotent batch with a penalty box or a rate counter", ErrInvalidOp)
	}
	if err != nil {
		return false, notApplied(err)
	}
	id := recordID(rec.Key)
	// A batch of no bucket (every transaction unlimited) writes nothing but
	// its record: on one Redis the script writes it alone; on a cluster
	// its claim holds it, in the key's own slot.
	first := ""
	if len(keys) > 0 {
		first = keys[0]
	}
	rkey, ok := s.recordKey(id, first)
	if s.cluster {
		// The record lives in the batch's slot, so another batch under the
		// same key may have its record elsewhere: a claim in the key's own
		// slot tells such a reuse.
		claimed, err := s.claim(ctx, now, rec, id)
		if err != nil {
			return false, err
		}
		if claimed != nil && claimed.fingerprint != rec.Fingerprint {
			return false, once.ErrMismatch
		}
		if len(keys) == 0 || !ok || !sameSlot(keys) || Slot(rkey) != Slot(keys[0]) {
			return s.onceAcrossSlots(ctx, now, rec, id, claimed, ops, keys, outcomes, op)
		}
	}
	c := &scriptCall{op: op, now: now, keys: keys, record: &recordArgs{
		key: rkey, fingerprint: rec.Fingerprint, expires: rec.Expires, lifetimeMS: s.recordLifetime(now, rec),
	}}
	c.ops = ops
	if op == opRefund {
		c.amounts = make([]int64, len(ops))
		for i := range ops {
			c.amounts[i] = refundAmount(&ops[i])
		}
	}
	var buf [smallBatch]bucket.State
	r, err := s.run(ctx, c, stateBuffer(buf[:], len(ops)))
	if err != nil {
		return false, err
	}
	return r.replayed, r.outcomes(outcomes, op)
}

// outcomes computes the outcomes of the spend or refund (op) batch that r
// answers, as Spend and Refund do.
func (r *scriptReply) outcomes(outcomes []bucket.Outcome, op operation) error {
	if op == opRefund {
		bucket.RefundBatch(r.decidedAt, r.ops, r.states, outcomes)
		return nil
	}
	return r.spendOutcomes(outcomes)
}

// claimKey is the key of an idempotency key's claim: in the key's own
// slot (the whole name is hashed; it has no braces).
func (s *Source) claimKey(id string) string {
	return RecordKeyPrefix + s.namespace + "claim:" + id
}

// claim makes a pending claim of rec's key, or returns the live one.
func (s *Source) claim(ctx context.Context, now int64, rec once.Record, id string) (*claimed, error) {
	r, err := s.run(ctx, &scriptCall{op: opClaim, now: now, keys: []string{s.claimKey(id)}, record: &recordArgs{
		fingerprint: rec.Fingerprint, expires: rec.Expires, lifetimeMS: s.recordLifetime(now, rec),
	}}, nil)
	if err != nil {
		return nil, err
	}
	return r.claim, nil
}

// onceAcrossSlots runs a cluster batch whose buckets span slots under an
// idempotency key. Such a batch is not one atomic step (cluster.go), so
// neither can its record be: the claim made for it stays pending while
// the batch runs, and takes the batch's record when it is done. A retry
// that finds the record is answered from it; one that finds the claim
// pending fails with once.ErrUnsettled (the first call may still be
// running, or may have failed after spending in part), which never spends
// twice. A batch that certainly changed nothing gives its claim up.
func (s *Source) onceAcrossSlots(ctx context.Context, now int64, rec once.Record, id string, c *claimed, ops []bucket.Op, keys []string, outcomes []bucket.Outcome, op operation) (bool, error) {
	if c != nil {
		if c.record == nil {
			return false, once.ErrUnsettled
		}
		r := scriptReply{ops: ops, states: make([]bucket.State, len(ops))}
		if err := r.decodeRecord(c.record); err != nil {
			return false, err
		}
		return true, r.outcomes(outcomes, op)
	}
	states := make([]bucket.State, len(ops))
	var err error
	verdict := true
	if op == opSpend {
		verdict, err = s.spendSlotsInto(ctx, now, ops, keys, nil, states, outcomes)
	} else if err = s.refundSlots(ctx, now, ops, keys, nil, states); err == nil {
		// A release or renewal changes its leases in place: the record
		// keeps them as read.
		bucket.RefundBatch(now, ops, cloneLeases(states), outcomes)
	}
	ckey := s.claimKey(id)
	if err != nil {
		if errors.Is(err, once.ErrNotApplied) {
			_ = s.finishApart(ctx, func(ctx context.Context) error { return s.client.Del(ctx, ckey).Err() })
		}
		return false, err
	}
	// The batch is done whatever becomes of this write, which goes on past
	// ctx's end (finishApart): if it is lost, the claim stays pending and
	// a retry is told the outcome is unknown.
	record := recordText(rec.Fingerprint, rec.Expires, now, verdict, ops, states)
	_ = s.finishApart(ctx, func(ctx context.Context) error {
		return s.client.SetArgs(ctx, ckey, record, goredis.SetArgs{Mode: "XX", KeepTTL: true}).Err()
	})
	return false, nil
}
