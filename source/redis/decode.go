package redis

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// scriptReply is the script's answer to one call, decoded.
type scriptReply struct {
	// allowed is the verdict of a spend or check batch (and of the batch a
	// record answers for); a refund is always allowed.
	allowed bool
	// ops are the batch's ops, one per key: each value read is decoded as
	// its op's algorithm stores it.
	ops []bucket.Op
	// boxes are the names of the ops' box entries (scriptCall.boxes): the
	// value read of a key with one is its box entry's and its own.
	boxes []string
	// states holds, per key, the state read before the call: a GCRA
	// bucket's TAT (gcra.Missing for a missing bucket or one full at
	// decidedAt), a window counter as stored (the zero Counter for none),
	// or a rate counter (nil for none, or one with no hit in the last
	// minute), and the box entry's expiry (0 when the id is not in the box
	// at decidedAt). It is the slice passed to decode.
	states []bucket.State
	// decidedAt is the now the batch was decided at: the call's own, or,
	// for a call answered from its idempotency record, the first call's.
	decidedAt int64
	// replayed is set when the answer comes from an idempotency record.
	replayed bool
	// busy is how many buckets a reset found still counting something.
	busy int
	// claim is the live claim an opClaim found, or nil when it made one.
	claim *claimed
}

// claimed is a live claim of an idempotency key on a cluster: its
// fingerprint, and the record of its call once that has a known outcome.
type claimed struct {
	fingerprint string
	record      []string // the record's words, nil while pending
}

// decode reads the script's reply to c. states must hold one slot per
// op of c (nil for a reset, a claim or a sync); a claim's reply is nil
// when Redis answered nil. A sync's counters go into c.extra.pushes.
func decode(c *scriptCall, reply any, states []bucket.State) (scriptReply, error) {
	r := scriptReply{decidedAt: c.now, ops: c.ops, boxes: c.boxes, states: states}
	switch {
	case c.op == opClaim:
		return r, r.decodeClaim(reply)
	case c.op == opReset:
		n, ok := reply.(int64)
		if !ok {
			return r, fmt.Errorf("%w: reset answered %T", ErrBadReply, reply)
		}
		r.busy = int(n)
		return r, nil
	case c.record != nil:
		return r, r.decodeOnce(reply)
	}
	items, ok := reply.([]any)
	if !ok {
		return r, fmt.Errorf("%w: %T for %d buckets", ErrBadReply, reply, len(c.keys))
	}
	switch c.op {
	case opSync:
		return r, decodeSync(c, items)
	case opCall:
		return r, decodeCall(c, items)
	case opSyncRates:
		return r, decodeSyncRates(c, items)
	}
	return r, r.decodeBatch(items)
}

// decodeBatch reads a batch's {verdict, v_1..v_n}.
func (r *scriptReply) decodeBatch(items []any) error {
	if len(items) != len(r.states)+1 {
		return fmt.Errorf("%w: %d items for %d buckets", ErrBadReply, len(items), len(r.states))
	}
	v, ok := items[0].(int64)
	if !ok || (v != 0 && v != 1) {
		return fmt.Errorf("%w: verdict %v", ErrBadReply, items[0])
	}
	r.allowed = v == 1
	for i, item := range items[1:] {
		s, ok := item.(string)
		if !ok {
			return fmt.Errorf("%w: a bucket's value %v", ErrBadReply, item)
		}
		if err := r.setState(i, s); err != nil {
			return err
		}
	}
	return nil
}

// setState stores the state the script read for bucket i, from its stored
// string ("" for none), as op i's algorithm reads it. A GCRA op reads a
// TAT not after decidedAt, or a window counter, as a missing bucket; a
// window op reads a TAT as an empty counter (the limit's algorithm
// changed). The value read of an op with a box is its box entry's, a
// space, and its own; a concurrency op's is its lease id, "=", and its
// lease set (leaseItem).
func (r *scriptReply) setState(i int, s string) error {
	if r.boxes == nil || r.boxes[i] == "" {
		return r.setBucket(i, s)
	}
	b, v, ok := strings.Cut(s, " ")
	if !ok {
		return fmt.Errorf("%w: a boxed op's values %q", ErrBadReply, s)
	}
	box, err := parseBox(b, r.decidedAt)
	if err != nil {
		return err
	}
	err = r.setBucket(i, v)
	r.states[i].BoxExpires = box
	return err
}

// setBucket stores the state the script read for bucket i, its box
// aside. Each algorithm reads the values of the others as empty, as the
// script does: a rate op a TAT or a window counter, a GCRA or window op a
// rate counter. A state that counts nothing at decidedAt is read as none
// (a TAT not after it, a window counter past its windows, a rate counter
// with no hit in the last minute): Redis may have forgotten it already,
// and nothing may tell.
func (r *scriptReply) setBucket(i int, s string) error {
	if r.ops[i].Algorithm == bucket.Concurrency {
		return r.setLeases(i, s)
	}
	if r.ops[i].Algorithm == bucket.RateCounter {
		r.states[i] = bucket.State{TAT: gcra.Missing}
		if !isRate(s) {
			return nil
		}
		c, err := parseRate(s)
		if err == nil && !c.Empty(ratecounter.Second(r.decidedAt)) {
			r.states[i].Rate = &c
		}
		return err
	}
	if r.ops[i].Algorithm == bucket.Calendar {
		if isRate(s) || isLeases(s) {
			s = ""
		}
		c, err := parseCounter(s)
		r.states[i] = bucket.State{TAT: gcra.Missing, Calendar: calendarRead(&r.ops[i], r.decidedAt, c)}
		return err
	}
	if r.ops[i].Algorithm.Windowed() {
		if isRate(s) || isLeases(s) {
			s = ""
		}
		c, err := parseCounter(s)
		if c.Expires() <= bucket.Millis(r.decidedAt) {
			c = window.Counter{} // counts nothing any more
		}
		r.states[i] = bucket.State{TAT: gcra.Missing, Window: c}
		return err
	}
	r.states[i] = bucket.Empty
	if s == "" {
		return nil
	}
	tat, err := parseTAT(s)
	if err != nil {
		if _, werr := parseCounter(s); werr == nil || isRate(s) || isLeases(s) {
			return nil // a window or rate counter, or a lease set
		}
		return fmt.Errorf("%w: TAT %q", ErrBadReply, s)
	}
	if tat > r.decidedAt {
		r.states[i].TAT = tat
	}
	return nil
}

// parseCounter reads a window counter as the script stores it
// ("<period>:<index>:<cur>:<prev>", formatCounter). The empty string, and
// a GCRA bucket's TAT, read as the zero Counter.
func parseCounter(s string) (window.Counter, error) {
	if s == "" || isBinaryTAT(s) {
		return window.Counter{}, nil
	}
	if strings.IndexByte(s, ':') < 0 {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return window.Counter{}, nil
		}
	}
	var n [4]int64
	rest, ok := s, true
	for i := range n {
		part := rest
		if i < len(n)-1 {
			part, rest, ok = strings.Cut(rest, ":")
		}
		v, err := strconv.ParseInt(part, 10, 64)
		if !ok || err != nil {
			return window.Counter{}, fmt.Errorf("%w: window counter %q", ErrBadReply, s)
		}
		n[i] = v
	}
	period, index, cur, prev := n[0], n[1], n[2], n[3]
	start := index * period
	if period < 1 || cur < 0 || prev < 0 || start/period != index {
		return window.Counter{}, fmt.Errorf("%w: window counter %q", ErrBadReply, s)
	}
	return window.Counter{Period: period, Start: start, Cur: cur, Prev: prev}, nil
}

// decodeSync reads a sync's {1, v_1..v_n} into its pushes' Totals: each
// counter as stored after the add, as window.Counter.At reads it at the
// call's now.
func decodeSync(c *scriptCall, items []any) error {
	if len(items) != len(c.extra.pushes)+1 || items[0] != int64(1) {
		return fmt.Errorf("%w: %d items for %d counters", ErrBadReply, len(items), len(c.extra.pushes))
	}
	nowMs := bucket.Millis(c.now)
	for i, item := range items[1:] {
		s, ok := item.(string)
		if !ok {
			return fmt.Errorf("%w: a counter %v", ErrBadReply, item)
		}
		stored, err := parseCounter(s)
		if err != nil {
			return err
		}
		p := &c.extra.pushes[i]
		start, cur, prev := stored.At(nowMs, p.Period)
		p.Total = window.Counter{Period: p.Period, Start: start, Cur: cur, Prev: prev}
	}
	return nil
}

// decodeCall reads an ERL call's {1, c_1..c_n, box, box after} into
// c.extra: the counters and the box entry as read, and the box entry as
// left ("" for none).
func decodeCall(c *scriptCall, items []any) error {
	x := c.extra
	n := len(x.call.Counters)
	if len(items) != n+3 || items[0] != int64(1) {
		return fmt.Errorf("%w: %d items for a call of %d counters", ErrBadReply, len(items), n)
	}
	var text [bucket.MaxCallCounters + 2]string
	for i, item := range items[1:] {
		s, ok := item.(string)
		if !ok {
			return fmt.Errorf("%w: a call's value %v", ErrBadReply, item)
		}
		text[i] = s
	}
	for i := range n {
		var err error
		if x.counters[i], err = parseRate(text[i]); err != nil {
			return err
		}
	}
	var err error
	if x.box, err = parseBox(text[n], c.now); err != nil {
		return err
	}
	x.boxAfter, err = parseBox(text[n+1], c.now)
	return err
}

// decodeSyncRates reads a rate sync's {1, c_1, b_1, ..., c_n, b_n} into
// its pushes' Total and TotalBox: each counter ("" for none) and box
// entry as stored after the push.
func decodeSyncRates(c *scriptCall, items []any) error {
	if len(items) != 1+2*len(c.extra.ratePushes) || items[0] != int64(1) {
		return fmt.Errorf("%w: %d items for %d rate pushes", ErrBadReply, len(items), len(c.extra.ratePushes))
	}
	for i := range c.extra.ratePushes {
		ctr, ok1 := items[1+2*i].(string)
		box, ok2 := items[2+2*i].(string)
		if !ok1 || !ok2 {
			return fmt.Errorf("%w: a rate push's values %v, %v", ErrBadReply, items[1+2*i], items[2+2*i])
		}
		p := &c.extra.ratePushes[i]
		var err error
		if p.Total, err = parseRate(ctr); err != nil {
			return err
		}
		if p.TotalBox, err = parseBox(box, c.now); err != nil {
			return err
		}
	}
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
		if err != nil || len(items) != 3+len(r.states) {
			return fmt.Errorf("%w: a record's reply %v", ErrBadReply, items)
		}
		r.replayed, r.decidedAt = true, first
	case int64(0):
		if len(items) != 3+len(r.states) {
			return fmt.Errorf("%w: %d items for %d buckets", ErrBadReply, len(items), len(r.states))
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

// decodeRecord reads a record's words (recordText) into r, whose ops and
// states hold one slot per bucket of the recorded batch.
func (r *scriptReply) decodeRecord(w []string) error {
	if len(w) != 4+len(r.states) {
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
		if err := r.setState(i, t); err != nil {
			return err
		}
	}
	return nil
}

// replyWidth is how many items c's batch takes in a packed call's reply
// (pack.go): a reset answers one number, the other operations a verdict
// and a value per key.
func replyWidth(c *scriptCall) int {
	switch c.op {
	case opReset:
		return 1
	case opSyncRates:
		return 1 + 2*len(c.keys)
	case opCall:
		return 3 + len(c.extra.call.Counters)
	}
	return 1 + len(c.keys)
}
