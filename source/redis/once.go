package redis

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
	"github.com/limiter-dev/limiter/ratelimits/once"
)

// RecordKeyPrefix starts the keys of idempotency records (docs/redis.md,
// "Idempotency records").
const RecordKeyPrefix = "lim:once:"

// SpendOnce implements ratelimits.Source: the batch and its record are
// decided and written by one script call (operation O of bucket.lua). On a
// cluster, a batch across hash slots is recorded beside a claim instead
// (see onceAcrossSlots).
func (s *Source) SpendOnce(ctx context.Context, now int64, rec once.Record, ops []gcra.Op, outcomes []gcra.Outcome) (bool, error) {
	return s.applyOnce(ctx, now, rec, ops, outcomes, opSpend)
}

// RefundOnce implements ratelimits.Source, as SpendOnce.
func (s *Source) RefundOnce(ctx context.Context, now int64, rec once.Record, ops []gcra.Op, outcomes []gcra.Outcome) (bool, error) {
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
	return max((rec.Expires-now+999_999)/1_000_000, 1) + s.marginMS
}

// applyOnce runs a spend or refund (op) under rec.
func (s *Source) applyOnce(ctx context.Context, now int64, rec once.Record, ops []gcra.Op, outcomes []gcra.Outcome, op string) (bool, error) {
	keys, err := s.keys(ops)
	if err != nil {
		return false, notApplied(err)
	}
	id := recordID(rec.Key)
	rkey, ok := s.recordKey(id, keys[0])
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
		if !ok || !sameSlot(keys) || Slot(rkey) != Slot(keys[0]) {
			return s.onceAcrossSlots(ctx, now, rec, id, claimed, ops, keys, outcomes, op)
		}
	}
	args := make([]any, 0, 8+spendArgsPerKey*len(ops))
	hi, lo := limbs(now)
	args = append(args, opOnce, s.marginMS, op, rec.Fingerprint, rec.Expires, s.recordLifetime(now, rec), hi, lo)
	if op == opSpend {
		for i := range ops {
			args = appendSpendOp(args, &ops[i])
		}
	} else {
		for i := range ops {
			args = append(args, refundDecrement(&ops[i]))
		}
	}
	reply, err := s.runAlone(ctx, append(keys, rkey), args)
	if err != nil {
		return false, fmt.Errorf("redis source: %s once: %w", op, err)
	}
	items, ok := reply.([]any)
	if !ok || len(items) < 1 {
		return false, fmt.Errorf("%w: %T from an idempotent call", ErrBadReply, reply)
	}
	switch items[0] {
	case int64(2):
		return false, once.ErrMismatch
	case int64(1):
		first, err := strconv.ParseInt(fmt.Sprint(items[1]), 10, 64)
		if err != nil || len(items) != 3+len(ops) {
			return false, fmt.Errorf("%w: a record's reply %v", ErrBadReply, items)
		}
		return true, s.outcomesFrom(first, items[2:], ops, outcomes, op)
	case int64(0):
		if len(items) != 3+len(ops) {
			return false, fmt.Errorf("%w: %d items for %d buckets", ErrBadReply, len(items), len(ops))
		}
		return false, s.outcomesFrom(now, items[2:], ops, outcomes, op)
	}
	return false, fmt.Errorf("%w: an idempotent call answered %v", ErrBadReply, items[0])
}

// outcomesFrom computes the outcomes of a batch decided at now from the
// script's {verdict, tat_1..tat_n} reply, as Spend and Refund do.
func (s *Source) outcomesFrom(now int64, reply []any, ops []gcra.Op, outcomes []gcra.Outcome, op string) error {
	var buf [smallBatch]int64
	tats := tatBuffer(buf[:], len(ops))
	verdict, err := parseReply(reply, now, tats)
	if err != nil {
		return err
	}
	if op == opRefund {
		gcra.RefundBatch(now, ops, tats, outcomes)
		return nil
	}
	if gcra.SpendBatch(now, ops, tats, outcomes) != verdict {
		return fmt.Errorf("%w: script says allowed=%v", ErrVerdictMismatch, verdict)
	}
	return nil
}

// runAlone runs the script once on keys (all in one slot), not through
// the coalescer: an idempotent call has an operation of its own that
// packed calls do not carry, and is rare enough not to need sharing.
func (s *Source) runAlone(ctx context.Context, keys []string, args []any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, notApplied(err)
	}
	reply, err := s.script.Run(ctx, s.client, keys, args...).Result()
	if err != nil {
		return nil, classify(err)
	}
	return reply, nil
}

// claimed is a live claim of an idempotency key on a cluster: its
// fingerprint, and the record of its call once that has a known outcome.
type claimed struct {
	fingerprint string
	record      []string // the record's words, nil while pending
}

// claimKey is the key of an idempotency key's claim: in the key's own
// slot (the whole name is hashed; it has no braces).
func (s *Source) claimKey(id string) string {
	return RecordKeyPrefix + s.namespace + "claim:" + id
}

// ClaimKey returns the Redis key that holds the claim of an idempotency
// key (once.Record.Key) on a cluster (docs/redis.md, "Idempotency
// records"), for operators and tests that look into Redis.
func (s *Source) ClaimKey(idempotencyKey string) string {
	return s.claimKey(recordID(idempotencyKey))
}

// claim makes a pending claim of rec's key, or returns the live one
// (operation Q of bucket.lua).
func (s *Source) claim(ctx context.Context, now int64, rec once.Record, id string) (*claimed, error) {
	hi, lo := limbs(now)
	reply, err := s.runAlone(ctx, []string{s.claimKey(id)},
		[]any{opClaim, s.marginMS, rec.Fingerprint, rec.Expires, s.recordLifetime(now, rec), hi, lo})
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("redis source: claim: %w", err)
	}
	v, ok := reply.(string)
	w := strings.Fields(v)
	if !ok || len(w) < 3 {
		return nil, fmt.Errorf("%w: a claim %v", ErrBadReply, reply)
	}
	c := &claimed{fingerprint: w[0]}
	if w[2] != "P" {
		c.record = w
	}
	return c, nil
}

// onceAcrossSlots runs a cluster batch whose buckets span slots under an
// idempotency key. Such a batch is not one atomic step (cluster.go), so
// neither can its record be: the claim made for it stays pending while
// the batch runs, and takes the batch's record when it is done. A retry
// that finds the record is answered from it; one that finds the claim
// pending fails with once.ErrUnsettled (the first call may still be
// running, or may have failed after spending in part), which never spends
// twice. A batch that certainly changed nothing gives its claim up.
func (s *Source) onceAcrossSlots(ctx context.Context, now int64, rec once.Record, id string, c *claimed, ops []gcra.Op, keys []string, outcomes []gcra.Outcome, op string) (bool, error) {
	if c != nil {
		if c.record == nil {
			return false, once.ErrUnsettled
		}
		w := c.record
		first, err := strconv.ParseInt(w[2], 10, 64)
		if err != nil || len(w) != 4+len(ops) {
			return false, fmt.Errorf("%w: a claim's record %q", ErrBadReply, strings.Join(w, " "))
		}
		reply := make([]any, 0, 1+len(ops))
		verdict, _ := strconv.ParseInt(w[3], 10, 64)
		reply = append(reply, verdict)
		for _, t := range w[4:] {
			if t == "-" {
				t = ""
			}
			reply = append(reply, t)
		}
		return true, s.outcomesFrom(first, reply, ops, outcomes, op)
	}
	tats := make([]int64, len(ops))
	var err error
	verdict := true
	if op == opSpend {
		verdict, err = s.spendSlotsInto(ctx, now, ops, keys, tats, outcomes)
	} else if err = s.refundSlots(ctx, now, ops, keys, tats); err == nil {
		gcra.RefundBatch(now, ops, tats, outcomes)
	}
	ckey := s.claimKey(id)
	if err != nil {
		if errors.Is(err, once.ErrNotApplied) {
			s.client.Del(context.WithoutCancel(ctx), ckey)
		}
		return false, err
	}
	w := make([]string, 0, 4+len(ops))
	v := "0"
	if verdict {
		v = "1"
	}
	w = append(w, rec.Fingerprint, strconv.FormatInt(rec.Expires, 10), strconv.FormatInt(now, 10), v)
	for _, t := range tats {
		if t == gcra.Missing {
			w = append(w, "-")
		} else {
			w = append(w, strconv.FormatInt(t, 10))
		}
	}
	// The batch is done whatever becomes of this write: if it is lost, the
	// claim stays pending and a retry is told the outcome is unknown.
	s.client.SetArgs(context.WithoutCancel(ctx), ckey, strings.Join(w, " "), goredis.SetArgs{Mode: "XX", KeepTTL: true})
	return false, nil
}

// notApplied marks err as a failure that changed nothing.
func notApplied(err error) error {
	return fmt.Errorf("%w: %w", once.ErrNotApplied, err)
}

// classify marks with once.ErrNotApplied the errors of a call that cannot
// have run its script: no connection could be made or had (a refused
// dial, a full pool, a closed client, a TLS handshake that failed
// verification), or Redis answered with an error, which the bucket script
// only raises before it writes (and Redis refuses a script whole, or
// before its first write, for NOSCRIPT, OOM, BUSY, MOVED and the like). A
// timeout or a broken connection after sending says nothing of the kind:
// the script may have run, and err is returned as it is.
func classify(err error) error {
	if err == nil || errors.Is(err, once.ErrNotApplied) {
		return err
	}
	var opErr *net.OpError
	var replyErr goredis.Error
	var certErr *tls.CertificateVerificationError
	var authorityErr x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalidErr x509.CertificateInvalidError
	switch {
	case errors.As(err, &opErr) && opErr.Op == "dial",
		// A TLS handshake that fails verification sends no command.
		errors.As(err, &certErr), errors.As(err, &authorityErr), errors.As(err, &hostErr), errors.As(err, &invalidErr),
		errors.Is(err, goredis.ErrPoolTimeout), errors.Is(err, goredis.ErrPoolExhausted), errors.Is(err, goredis.ErrClosed),
		errors.As(err, &replyErr) && !errors.Is(err, goredis.Nil):
		return notApplied(err)
	}
	return err
}
