package redis

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/calendar"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// The bucket script's arguments: their positions are declared in
// protocol.go, and docs/redis.md, "The script's arguments", describes
// every operation's arguments and reply. A window counter is stored as
// formatCounter writes it, a rate counter as formatRate does, and a box
// entry as its expiry, a decimal integer.

// limbBase splits an int64 into the two limbs the script computes with.
const limbBase = 1_000_000_000

// Operation letters of the script (ARGV[1], and a packed batch's first
// argument).
const (
	scriptSpend  = "S"
	scriptCheck  = "C"
	scriptRefund = "R"
	scriptReset  = "D"
	scriptOnce   = "O"
	scriptClaim  = "Q"
	scriptSync   = "A"
	scriptERL    = "E"
	scriptRates  = "Y"
	// scriptPacked carries several batches, their keys declared.
	scriptPacked = "M"
	// scriptPackedInline carries several one-key batches, their keys in
	// ARGV and none declared.
	scriptPackedInline = "P"
)

// Key formats (ARGV[3]), followed by scriptBinaryTATs when the script is
// to write TATs in binary (Options.BinaryTATs); it reads both forms.
const (
	scriptFormatV1   = "1"
	scriptFormatV2   = "2"
	scriptBinaryTATs = "b"
)

// windowToken returns a window op's token in a spend or check: its
// algorithm and its mode in one argument. The tokens are constants, so
// appending one allocates nothing.
func windowToken(op *bucket.Op) any {
	tokens := [3]any{"W0", "W1", "W2"}
	switch op.Algorithm {
	case bucket.FixedWindow:
		tokens = [3]any{"F0", "F1", "F2"}
	case bucket.Calendar:
		tokens = [3]any{"K0", "K1", "K2"}
	}
	return tokens[op.Mode]
}

// windowPeriod is what a window op passes as its period: a window's
// length, or a calendar counter's period end at now (calendar.go), both
// in ms.
func windowPeriod(op *bucket.Op, now int64) int64 {
	if op.Algorithm == bucket.Calendar {
		return calendarPeriod(op, now).End
	}
	return op.Window.Period
}

// windowCount is a window or calendar op's count.
func windowCount(op *bucket.Op) int64 {
	if op.Algorithm == bucket.Calendar {
		return op.Calendar.Count
	}
	return op.Window.Count
}

// leaseToken returns a concurrency op's token in a spend or check: "L"
// and its mode. The tokens are constants, so appending one allocates
// nothing.
func leaseToken(op *bucket.Op) any {
	return [3]any{"L0", "L1", "L2"}[op.Mode]
}

// leaseKind returns a concurrency op's token in a refund: "LR" for a
// release, "LN" for a renewal.
func leaseKind(op *bucket.Op) any {
	if op.LeaseAction == bucket.Renew {
		return "LN"
	}
	return "LR"
}

// boxToken starts the values of an op with a penalty box.
const boxToken = "BOX"

// rateToken returns a rate-counter op's token in a spend or check: "R"
// and its mode. The tokens are constants, so appending one allocates
// nothing.
func rateToken(op *bucket.Op) any {
	return [3]any{"R0", "R1", "R2"}[op.Mode]
}

// callAction returns the script's letter of a box action.
func callAction(a bucket.BoxAction) string {
	return [...]string{
		bucket.BoxNone: "N", bucket.BoxRead: "R", bucket.BoxWhenAbove: "A",
		bucket.BoxReplace: "P", bucket.BoxRemove: "X", bucket.BoxExtend: "E",
	}[a]
}

// windowKind returns a window op's letter in a refund: W for a sliding
// window, F for a fixed one, K for a calendar counter.
func windowKind(op *bucket.Op) string {
	switch op.Algorithm {
	case bucket.FixedWindow:
		return "F"
	case bucket.Calendar:
		return "K"
	}
	return "W"
}

// foldedCode returns the code of a one-key GCRA spend or check in a
// folded batch (foldedFormat), or false for another operation or a mode
// the code cannot say.
func foldedCode(op operation, mode bucket.Mode) (byte, bool) {
	if mode < 0 || int(mode) >= foldedCheck {
		return 0, false
	}
	switch op {
	case opSpend:
		return byte(mode), true
	case opCheck:
		return byte(mode) + foldedCheck, true
	}
	return 0, false
}

// foldedBatch returns a folded batch's argument: code, then now,
// increment and burst as foldedFormat lays them out.
func foldedBatch(code byte, now, increment, burst int64) string {
	var b [foldedLen]byte
	b[0] = code
	putLimbs(b[1:], now)
	putLimbs(b[10:], increment)
	putLimbs(b[19:], burst)
	return string(b[:])
}

// foldedRateBatch returns a folded rate batch's argument, as
// foldedRateFormat lays it out.
func foldedRateBatch(code byte, now, until, cost, window, rate int64) string {
	var b [foldedRateLen]byte
	b[0] = code
	putLimbs(b[1:], now)
	putLimbs(b[10:], until)
	for i, v := range [3]int64{cost, window, rate} {
		binary.BigEndian.PutUint64(b[19+8*i:], math.Float64bits(float64(v)))
	}
	return string(b[:])
}

// putLimbs writes v's limbs (limbs) at b: the high one as a signed
// integer of 5 bytes, the low one as an unsigned integer of 4, big-endian
// (the struct library's ">i5I4").
func putLimbs(b []byte, v int64) {
	hi, lo := limbs(v)
	b[0], b[1], b[2], b[3], b[4] = byte(hi>>32), byte(hi>>24), byte(hi>>16), byte(hi>>8), byte(hi)
	binary.BigEndian.PutUint32(b[5:], uint32(lo))
}

// wire is what every call of one source says alike, and the encoder of its
// calls.
type wire struct {
	marginMS int64
	// margin and format are the header's second and third arguments,
	// boxed once so that a call's header allocates nothing.
	margin, format any
	// v1 is the key format's: the script's fast path takes only v1.
	v1 bool
}

// newWire returns the encoder of a source's calls: format is
// scriptFormatV1 or scriptFormatV2, and binary asks for binary TATs.
func newWire(marginMS int64, format string, binary bool) wire {
	w := wire{marginMS: marginMS, margin: marginMS, format: format, v1: format == scriptFormatV1}
	if binary {
		w.format = format + scriptBinaryTATs
	}
	return w
}

// scriptOp is the letter of an operation.
func scriptOp(op operation) string {
	switch op {
	case opSpend:
		return scriptSpend
	case opCheck:
		return scriptCheck
	case opRefund:
		return scriptRefund
	case opReset:
		return scriptReset
	case opClaim:
		return scriptClaim
	case opSync:
		return scriptSync
	case opCall:
		return scriptERL
	case opSyncRates:
		return scriptRates
	}
	panic(fmt.Sprintf("redis source: no script operation for %d", op))
}

// limbs splits v into (hi, lo) with v = hi*1e9 + lo and 0 <= lo < 1e9, the
// exact representation the script uses. Now travels as two limbs: two
// plain numbers are cheaper for the script than a 19-digit string.
func limbs(v int64) (hi, lo int64) {
	hi, lo = v/limbBase, v%limbBase
	if lo < 0 {
		hi, lo = hi-1, lo+limbBase
	}
	return hi, lo
}

func (w wire) header(args []any, op string) []any {
	var h [headerArgs]any
	h[argOp-1], h[argMargin-1], h[argFormat-1] = op, w.margin, w.format
	return append(args, h[:]...)
}

// encode returns the KEYS and ARGV of c sent as a script call of its own.
func (w wire) encode(c *scriptCall) (keys []string, args []any) {
	hi, lo := limbs(c.now)
	switch {
	case c.op == opClaim:
		r := c.record
		var v [claimNow + nowSize - claimFingerprint]any
		v[claimFingerprint-claimFingerprint], v[claimExpires-claimFingerprint] = r.fingerprint, r.expires
		v[claimLifetime-claimFingerprint] = r.lifetimeMS
		v[claimNow+nowHi-claimFingerprint], v[claimNow+nowLo-claimFingerprint] = hi, lo
		return c.keys, append(w.header(make([]any, 0, headerArgs+len(v)), scriptClaim), v[:]...)
	case c.record != nil:
		r := c.record
		var v [onceNow + nowSize - onceOp]any
		v[onceOp-onceOp], v[onceFingerprint-onceOp], v[onceExpires-onceOp] = scriptOp(c.op), r.fingerprint, r.expires
		v[onceLifetime-onceOp], v[onceNow+nowHi-onceOp], v[onceNow+nowLo-onceOp] = r.lifetimeMS, hi, lo
		args = w.header(make([]any, 0, headerArgs+len(v)+4*len(c.keys)), scriptOnce)
		args = append(args, v[:]...)
		keys = make([]string, 0, len(c.keys)+1)
		return append(append(keys, c.keys...), r.key), c.appendValues(args)
	}
	args = w.header(make([]any, 0, headerArgs+nowSize+4*len(c.keys)), scriptOp(c.op))
	return c.keys, c.appendValues(appendNow(args, hi, lo))
}

// appendNow appends now's two limbs.
func appendNow(args []any, hi, lo int64) []any {
	var v [nowSize]any
	v[nowHi], v[nowLo] = hi, lo
	return append(args, v[:]...)
}

// appendValues appends the values per key of a spend, check, refund,
// reset or sync.
func (c *scriptCall) appendValues(args []any) []any {
	switch c.op {
	case opSpend, opCheck:
		for i := range c.ops {
			op := &c.ops[i]
			if c.boxed(i) {
				var b [boxSize]any
				b[boxTokenAt], b[boxEntry], b[boxUntil] = boxToken, c.boxes[i], op.BoxUntil
				args = append(args, b[:]...)
			}
			switch op.Algorithm {
			case bucket.GCRA:
				// The script splits the int64s into limbs itself.
				var v [gcraSize]any
				v[gcraMode], v[gcraIncrement], v[gcraBurst] = int64(op.Mode), op.EmissionInterval*op.Cost, op.BurstOffset
				args = append(args, v[:]...)
			case bucket.RateCounter:
				var v [rateSize]any
				v[rateTokenAt], v[rateCost], v[rateWindow], v[rateRate] = rateToken(op), op.Cost, op.Rate.Window, op.Rate.Rate
				args = append(args, v[:]...)
			case bucket.Concurrency:
				var v [leaseSize]any
				v[leaseTokenAt], v[leaseCost], v[leaseCount], v[leaseTTL], v[leaseIDAt] = leaseToken(op), op.Cost, op.Lease.Count, op.Lease.TTL, op.LeaseID
				args = append(args, v[:]...)
			default:
				var v [windowSize]any
				v[windowTokenAt], v[windowCost], v[windowCountAt], v[windowPeriodAt] = windowToken(op), op.Cost, windowCount(op), windowPeriod(op, c.now)
				args = append(args, v[:]...)
			}
		}
	case opRefund:
		for i := range c.ops {
			op := &c.ops[i]
			args = c.appendBox(args, i)
			switch op.Algorithm {
			case bucket.GCRA:
				var v [refundGCRASize]any
				v[refundGCRADecrement] = c.amounts[i]
				args = append(args, v[:]...)
			case bucket.RateCounter:
				var v [refundRateSize]any
				v[refundRateKind], v[refundRateHits] = "T", c.amounts[i]
				args = append(args, v[:]...)
			case bucket.Concurrency:
				var v [refundLeaseSize]any
				v[refundLeaseKind], v[refundLeaseTTL], v[refundLeaseID] = leaseKind(op), op.Lease.TTL, op.LeaseID
				args = append(args, v[:]...)
			default:
				var v [refundWindowSize]any
				v[refundWindowKind], v[refundWindowHits], v[refundWindowPeriod] = windowKind(op), c.amounts[i], windowPeriod(op, c.now)
				args = append(args, v[:]...)
			}
		}
	case opReset:
		for i := range c.ops {
			op := &c.ops[i]
			args = c.appendBox(args, i)
			var v [resetSize]any
			switch op.Algorithm {
			case bucket.GCRA:
				v[resetSpec] = "G"
			case bucket.RateCounter:
				v[resetSpec] = "T"
			case bucket.Concurrency:
				v[resetSpec] = "L"
			default:
				v[resetSpec] = windowKind(op) + strconv.FormatInt(windowPeriod(op, c.now), 10)
			}
			args = append(args, v[:]...)
		}
	case opSync:
		for i := range c.extra.pushes {
			p := &c.extra.pushes[i]
			var v [syncSize]any
			v[syncPeriod], v[syncIndex], v[syncHits], v[syncPrev] = p.Period, p.Start/p.Period, p.Hits, p.PrevHits
			args = append(args, v[:]...)
		}
	case opCall:
		var h [callSize]any
		h[callCounters] = len(c.extra.call.Counters)
		args = append(args, h[:]...)
		for _, cc := range c.extra.call.Counters {
			var v [counterSize]any
			v[counterDelta], v[counterWindow], v[counterRate] = cc.Delta, cc.Limit.Window, cc.Limit.Rate
			args = append(args, v[:]...)
		}
		var a [actionSize]any
		a[actionKind], a[actionUntil] = callAction(c.extra.call.Action), c.extra.call.Until
		args = append(args, a[:]...)
	case opSyncRates:
		for i := range c.extra.ratePushes {
			p := &c.extra.ratePushes[i]
			hits := "-"
			if p.Key != "" {
				hits = formatRate(&p.Hits)
			}
			var v [pushSize]any
			v[pushHits], v[pushBox], v[pushExpiry] = hits, c.boxes[i], p.BoxExpires
			args = append(args, v[:]...)
		}
	}
	return args
}

// encodePacked returns the KEYS and ARGV of one packed call carrying the
// batches of calls: their keys declared (M) for packKeys, or passed in
// ARGV with none declared (P) for packInline.
func (w wire) encodePacked(calls []*scriptCall, packing packing) (keys []string, args []any) {
	inline := packing == packInline
	op, nk, na := scriptPacked, 0, headerArgs
	if inline {
		op = scriptPackedInline
	}
	for _, c := range calls {
		nk += len(c.keys)
		na += 4 + 5*len(c.keys)
	}
	if !inline {
		keys = make([]string, 0, nk)
	}
	args = w.header(make([]any, 0, na), op)
	for _, c := range calls {
		if !inline {
			keys = append(keys, c.keys...)
		}
		args = c.appendPacked(args, packing, w.v1)
	}
	return keys, args
}

// appendPacked appends the call's batch to a packed call's arguments: its
// operation, its number of keys, its keys when inline, its now as two
// limbs, then its values. A one-key GCRA spend or check is folded: one
// argument (foldedBatch), then its key when inline; in key format v1 so
// is a check_rate (foldedRateBatch), its box entry's name last.
func (c *scriptCall) appendPacked(args []any, packing packing, v1 bool) []any {
	inline := packing == packInline
	if c.folded() {
		op := &c.ops[0]
		code, _ := foldedCode(c.op, op.Mode)
		args = append(args, foldedBatch(code, c.now, op.EmissionInterval*op.Cost, op.BurstOffset))
		if inline {
			args = append(args, c.keys[0])
		}
		return args
	}
	if v1 && c.foldedRate() {
		op := &c.ops[0]
		code, _ := foldedCode(c.op, op.Mode)
		args = append(args, foldedRateBatch(code, c.now, op.BoxUntil, op.Cost, op.Rate.Window, op.Rate.Rate))
		if inline {
			args = append(args, c.keys[0])
		}
		return append(args, c.boxes[0])
	}
	hi, lo := limbs(c.now)
	var h [packSize]any
	h[packOp], h[packKeyCount] = scriptOp(c.op), len(c.keys)
	args = append(args, h[:]...)
	if inline {
		for _, k := range c.keys {
			args = append(args, k)
		}
	}
	return c.appendValues(appendNow(args, hi, lo))
}

// folded reports whether c is a one-key GCRA spend or check without a
// box, which a packed call carries folded (appendPacked).
func (c *scriptCall) folded() bool {
	if len(c.keys) != 1 || len(c.ops) != 1 || c.ops[0].Algorithm != bucket.GCRA || c.boxed(0) {
		return false
	}
	_, ok := foldedCode(c.op, c.ops[0].Mode)
	return ok
}

// foldedRate reports whether c is a one-key spend or check of a rate
// counter with its box (a check_rate), which a packed call in key format
// v1 carries folded (appendPacked): the script's fast path decides it.
func (c *scriptCall) foldedRate() bool {
	if (c.op != opSpend && c.op != opCheck) || len(c.keys) != 1 || len(c.ops) != 1 ||
		c.ops[0].Algorithm != bucket.RateCounter || !c.boxed(0) {
		return false
	}
	_, ok := foldedCode(c.op, c.ops[0].Mode)
	return ok
}

// fastShape reports whether the script's fast path (lua/fast.lua)
// decides c in a packed call in key format v1: a folded call, an Edge
// Rate Limiting call of one counter, or a one-key spend or check of a
// window without a box or of a rate counter (with its box: a check_rate).
func (c *scriptCall) fastShape() bool {
	switch {
	case c.folded():
		return true
	case c.op == opCall:
		return len(c.extra.call.Counters) == 1
	case (c.op != opSpend && c.op != opCheck) || len(c.keys) != 1 || len(c.ops) != 1:
		return false
	}
	return c.foldedRate() || (c.ops[0].Algorithm.Windowed() && !c.boxed(0))
}

// fast reports whether c, sent alone, goes as a pack of one, which the
// script decides on its fast path without making its other functions.
func (w wire) fast(c *scriptCall) bool {
	return w.v1 && c.fastShape()
}

// appendBox appends the box of op i, if it has one, in a refund or reset.
func (c *scriptCall) appendBox(args []any, i int) []any {
	if !c.boxed(i) {
		return args
	}
	var b [rboxSize]any
	b[rboxTokenAt], b[rboxEntry] = boxToken, c.boxes[i]
	return append(args, b[:]...)
}

// checkOp rejects ops outside the Source contract, whose arithmetic the
// gcra, window or ratecounter functions would wrap and the script would
// not: a GCRA op needs a positive emission interval, a burst offset and a
// cost that are not negative, and an increment that fits int64; a window
// op a count and a period of at least 1 whose product is at most
// window.MaxProduct, a cost from 0 to its count, and one of the three
// modes; a rate-counter op a box, a window of 1, 10 or 60 seconds, a rate
// from 0 to maxRate, a cost from 0 to ratecounter.MaxHitsPerSecond, and
// one of the three modes.
func checkOp(op *bucket.Op) error {
	switch op.Algorithm {
	case bucket.RateCounter:
		l := op.Rate
		if op.Box == "" || !ratecounter.ValidWindow(l.Window) || l.Rate < 0 || l.Rate > maxRate ||
			op.Cost < 0 || op.Cost > ratecounter.MaxHitsPerSecond || op.Mode > bucket.SpendOnly {
			return fmt.Errorf("%w: %q: rate counter of window %d s, rate %d, cost %d, mode %d, box %q",
				ErrInvalidOp, op.Key, l.Window, l.Rate, op.Cost, op.Mode, op.Box)
		}
	case bucket.GCRA:
		if op.EmissionInterval <= 0 || op.BurstOffset < 0 || op.Cost < 0 || op.Cost > math.MaxInt64/op.EmissionInterval {
			return fmt.Errorf("%w: %q: emission interval %d, burst offset %d, cost %d",
				ErrInvalidOp, op.Key, op.EmissionInterval, op.BurstOffset, op.Cost)
		}
	case bucket.SlidingWindow, bucket.FixedWindow:
		if err := checkPeriod(op.Key, op.Window.Period); err != nil {
			return err
		}
		l := op.Window
		if l.Count < 1 || l.Count > window.MaxProduct/l.Period || op.Cost < 0 || op.Cost > l.Count || op.Mode > bucket.SpendOnly {
			return fmt.Errorf("%w: %q: window count %d, period %d ms, cost %d, mode %d",
				ErrInvalidOp, op.Key, l.Count, l.Period, op.Cost, op.Mode)
		}
	case bucket.Concurrency:
		return checkLeaseOp(op)
	case bucket.Calendar:
		l := op.Calendar
		if op.Periods == nil || l.Count < 1 || l.Count > calendar.MaxCount || op.Cost < 0 || op.Cost > l.Count || op.Mode > bucket.SpendOnly {
			return fmt.Errorf("%w: %q: calendar count %d, cost %d, mode %d", ErrInvalidOp, op.Key, l.Count, op.Cost, op.Mode)
		}
	default:
		return fmt.Errorf("%w: %q: algorithm %d", ErrInvalidOp, op.Key, op.Algorithm)
	}
	return nil
}

// maxRate bounds a rate counter's rate, so that rate × window (at most
// 60 s) stays an exact integer in the script's doubles (below 2^53).
const maxRate = 1 << 46

// checkPeriod rejects a window period the script cannot count with: below
// 1 ms, or above window.MaxProduct.
func checkPeriod(key string, period int64) error {
	if period < 1 || period > window.MaxProduct {
		return fmt.Errorf("%w: %q: window period %d ms", ErrInvalidOp, key, period)
	}
	return nil
}

// formatCounter writes a window counter as the script stores it:
// "<period>:<index>:<cur>:<prev>", the index being Start / Period (Start
// is always a multiple of Period). It is "-" for the zero Counter, as in a
// record.
func formatCounter(c window.Counter) string {
	if c.Period == 0 {
		return "-"
	}
	b := make([]byte, 0, 48)
	b = strconv.AppendInt(b, c.Period, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, c.Start/c.Period, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, c.Cur, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, c.Prev, 10)
	return string(b)
}

// recordText is an idempotency record as stored in Redis, the same words
// the script's operation O writes: the fingerprint, the expiry, the now
// of the call, its verdict (0 or 1), and the state read of each op's
// bucket: a TAT, a window counter (formatCounter), or a concurrency op's
// lease id and lease set (leaseItem), "-" for a missing or full one. decodeRecord reads it back.
func recordText(fingerprint string, expires, now int64, allowed bool, ops []bucket.Op, states []bucket.State) string {
	w := make([]string, 0, 4+len(states))
	verdict := "0"
	if allowed {
		verdict = "1"
	}
	w = append(w, fingerprint, strconv.FormatInt(expires, 10), strconv.FormatInt(now, 10), verdict)
	for i, st := range states {
		switch {
		case ops[i].Algorithm.Windowed():
			w = append(w, formatCounter(st.Window))
		case ops[i].Algorithm == bucket.Calendar:
			w = append(w, formatCounter(calendarStored(st.Calendar)))
		case ops[i].Algorithm == bucket.Concurrency:
			w = append(w, leaseItem(ops[i].LeaseID, bucket.LeasesOf(st)))
		case st.TAT == gcra.Missing:
			w = append(w, "-")
		default:
			w = append(w, strconv.FormatInt(st.TAT, 10))
		}
	}
	return strings.Join(w, " ")
}
