package redis

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
	"github.com/limiter-dev/limiter/ratelimits/once"
)

// scriptReply is the script's answer to one call, decoded.
type scriptReply struct {
	// allowed is the verdict of a spend or check batch (and of the batch a
	// record answers for); a refund is always allowed.
	allowed bool
	// tats holds, per key, the TAT read before the call, or gcra.Missing
	// for a missing bucket or one full at decidedAt. It is the slice
	// passed to decode.
	tats []int64
	// decidedAt is the now the batch was decided at: the call's own, or,
	// for a call answered from its idempotency record, the first call's.
	decidedAt int64
	// replayed is set when the answer comes from an idempotency record.
	replayed bool
	// notFull is how many buckets a reset found not full.
	notFull int
	// claim is the live claim an opClaim found, or nil when it made one.
	claim *claimed
}

// claimed is a live claim of an idempotency key on a cluster: its
// fingerprint, and the record of its call once that has a known outcome.
type claimed struct {
	fingerprint string
	record      []string // the record's words, nil while pending
}

// decode reads the script's reply to c. tats must hold one slot per bucket
// of c; a claim's reply is nil when Redis answered nil.
func decode(c *scriptCall, reply any, tats []int64) (scriptReply, error) {
	r := scriptReply{decidedAt: c.now, tats: tats}
	switch {
	case c.op == opClaim:
		return r, r.decodeClaim(reply)
	case c.op == opReset:
		n, ok := reply.(int64)
		if !ok {
			return r, fmt.Errorf("%w: reset answered %T", ErrBadReply, reply)
		}
		r.notFull = int(n)
		return r, nil
	case c.record != nil:
		return r, r.decodeOnce(reply)
	}
	items, ok := reply.([]any)
	if !ok {
		return r, fmt.Errorf("%w: %T for %d buckets", ErrBadReply, reply, len(tats))
	}
	return r, r.decodeBatch(items)
}

// decodeBatch reads a batch's {verdict, tat_1..tat_n}.
func (r *scriptReply) decodeBatch(items []any) error {
	if len(items) != len(r.tats)+1 {
		return fmt.Errorf("%w: %d items for %d buckets", ErrBadReply, len(items), len(r.tats))
	}
	v, ok := items[0].(int64)
	if !ok || (v != 0 && v != 1) {
		return fmt.Errorf("%w: verdict %v", ErrBadReply, items[0])
	}
	r.allowed = v == 1
	for i, item := range items[1:] {
		s, ok := item.(string)
		if !ok {
			return fmt.Errorf("%w: TAT %v", ErrBadReply, item)
		}
		if err := r.setTAT(i, s); err != nil {
			return err
		}
	}
	return nil
}

// setTAT stores the TAT the script read for bucket i, as its decimal
// string: "" for a missing bucket. A TAT not after decidedAt is a full
// bucket.
func (r *scriptReply) setTAT(i int, s string) error {
	if s == "" {
		r.tats[i] = gcra.Missing
		return nil
	}
	tat, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: TAT %q", ErrBadReply, s)
	}
	if tat <= r.decidedAt {
		tat = gcra.Missing
	}
	r.tats[i] = tat
	return nil
}

// decodeOnce reads the reply of a call under an idempotency record:
// {0, "", verdict, tat_1..tat_n} when decided now, {1, first now, verdict,
// tat_1..tat_n} when answered from the record, {2} when the record is
// another request's.
func (r *scriptReply) decodeOnce(reply any) error {
	items, ok := reply.([]any)
	if !ok || len(items) < 1 {
		return fmt.Errorf("%w: %T from an idempotent call", ErrBadReply, reply)
	}
	switch items[0] {
	case int64(2):
		return once.ErrMismatch
	case int64(1):
		first, err := strconv.ParseInt(fmt.Sprint(items[1]), 10, 64)
		if err != nil || len(items) != 3+len(r.tats) {
			return fmt.Errorf("%w: a record's reply %v", ErrBadReply, items)
		}
		r.replayed, r.decidedAt = true, first
	case int64(0):
		if len(items) != 3+len(r.tats) {
			return fmt.Errorf("%w: %d items for %d buckets", ErrBadReply, len(items), len(r.tats))
		}
	default:
		return fmt.Errorf("%w: an idempotent call answered %v", ErrBadReply, items[0])
	}
	return r.decodeBatch(items[2:])
}

// decodeClaim reads a claim's reply: nil when a pending claim was made,
// else the live claim's text (recordText, or the fingerprint, the expiry
// and "P" while pending).
func (r *scriptReply) decodeClaim(reply any) error {
	if reply == nil {
		return nil
	}
	v, ok := reply.(string)
	w := strings.Fields(v)
	if !ok || len(w) < 3 {
		return fmt.Errorf("%w: a claim %v", ErrBadReply, reply)
	}
	r.claim = &claimed{fingerprint: w[0]}
	if w[2] != "P" {
		r.claim.record = w
	}
	return nil
}

// decodeRecord reads a record's words (recordText) into r, whose tats
// hold one slot per bucket of the recorded batch.
func (r *scriptReply) decodeRecord(w []string) error {
	if len(w) != 4+len(r.tats) {
		return fmt.Errorf("%w: a record %q", ErrBadReply, strings.Join(w, " "))
	}
	first, err := strconv.ParseInt(w[2], 10, 64)
	if err != nil || (w[3] != "0" && w[3] != "1") {
		return fmt.Errorf("%w: a record %q", ErrBadReply, strings.Join(w, " "))
	}
	r.replayed, r.decidedAt, r.allowed = true, first, w[3] == "1"
	for i, t := range w[4:] {
		if t == "-" { // a missing bucket
			t = ""
		}
		if err := r.setTAT(i, t); err != nil {
			return err
		}
	}
	return nil
}

// replyWidth is how many items c's batch takes in a packed call's reply
// (pack.go): a reset answers one number, the other operations a verdict
// and a TAT per key.
func replyWidth(c *scriptCall) int {
	if c.op == opReset {
		return 1
	}
	return 1 + len(c.keys)
}

// gcraStates turns TATs read into the states bucket decides on.
func gcraStates(tats []int64) []bucket.State {
	states := make([]bucket.State, len(tats))
	for i, t := range tats {
		states[i] = bucket.State{TAT: t}
	}
	return states
}
