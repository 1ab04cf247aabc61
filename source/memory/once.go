package memory

import (
	"context"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
)

// SpendOnce implements ratelimits.Source.
func (s *Source) SpendOnce(_ context.Context, now int64, rec once.Record, ops []bucket.Op, outcomes []bucket.Outcome) (bool, error) {
	return s.applyOnce(now, rec, ops, outcomes, spend)
}

// RefundOnce implements ratelimits.Source.
func (s *Source) RefundOnce(_ context.Context, now int64, rec once.Record, ops []bucket.Op, outcomes []bucket.Outcome) (bool, error) {
	return s.applyOnce(now, rec, ops, outcomes, refund)
}

// IdempotencyEvictions returns how many idempotency records were forgotten
// before they expired, to stay within the source's bound on them (a
// quarter of its bucket bound, and at least 1,024). A retry of such a call
// is decided again.
func (s *Source) IdempotencyEvictions() uint64 { return s.records.evictions() }

// applyOnce decides a batch under its record's stripe lock: a live record
// answers from what it kept, and otherwise the batch is applied and its
// record added before the lock is released, so no other call with the
// same key sees the one without the other.
func (s *Source) applyOnce(now int64, rec once.Record, ops []bucket.Op, outcomes []bucket.Outcome, act action) (bool, error) {
	st := s.records.stripe(rec.Key)
	defer st.mu.Unlock()
	if r, ok := st.lookup(rec.Key, now); ok {
		if r.fingerprint != rec.Fingerprint || int(r.n) != len(ops) {
			return false, once.ErrMismatch
		}
		var statesBuf [smallBatch]bucket.State
		states := r.unpackStates(ops, statesBuf[:0])
		r.leased.restore(ops, states)
		act.decide(r.now, ops, states, outcomes)
		return true, nil
	}
	evictedNotFull, words, windowed, leased := s.applyBatch(now, ops, outcomes, act, true)
	st.add(rec.Key, &record{fingerprint: rec.Fingerprint, expires: rec.Expires, now: now, words: words, n: int32(len(ops)), windowed: windowed, leased: leased}, now)
	if evictedNotFull {
		// Called with the record lock held; the callback must not make
		// idempotent calls on this source (the service's only logs).
		s.notFullEvicted()
	}
	return false, nil
}
