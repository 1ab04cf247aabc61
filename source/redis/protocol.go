package redis

import "strconv"

// The bucket script's arguments are declared here, once: each run of
// arguments (the header, now, an op's values in each operation, ...) as
// Go constants of its fields' positions, which the encoder (encode.go)
// writes through, and in protocolLayouts under the names the script reads
// them by. lua/protocol.lua is generated from protocolLayouts
// (TestProtocolLua fails when it is not what they produce), so neither
// side changes a position without the other. docs/redis.md, "The
// script's arguments", describes the protocol.
//
//go:generate env LIMITER_UPDATE_PROTOCOL=1 go test -count=1 -run ^TestProtocolLua$ .

// The header of every call: ARGV[1..3].
const (
	argOp     = iota + 1 // operation, one letter (scriptOp), or M or P
	argMargin            // expiry margin, whole milliseconds
	argFormat            // key format, "1" or "2"
	// headerArgs is how many arguments the header takes.
	headerArgs = argFormat
)

// Under an idempotency record (O): after the header.
const (
	onceOp          = headerArgs + 1 + iota // the batch's operation, S or R
	onceFingerprint                         // the request's fingerprint
	onceExpires                             // the record's expiry, unix ns
	onceLifetime                            // its key's lifetime, ms
	onceNow                                 // the batch: now, then its values
)

// A claim (Q): after the header.
const (
	claimFingerprint = headerArgs + 1 + iota // the request's fingerprint
	claimExpires                             // the claim's expiry, unix ns
	claimLifetime                            // its key's lifetime, ms
	claimNow                                 // now
)

// Now, as two limbs (limbs), before a batch's values.
const (
	nowHi = iota
	nowLo
	nowSize
)

// A batch in a packed call (M, P), unless folded: its operation and
// number of keys, then its keys when inline (P), then now and its values.
const (
	packOp = iota
	packKeyCount
	packSize
)

// A folded batch in a packed call: a one-key GCRA spend or check in one
// argument of foldedLen bytes (foldedBatch), then its key when inline
// (P). The bytes are foldedFormat as Lua's struct library reads it: a
// code, the operation and mode (foldedCode: the mode for a spend, the mode
// plus foldedCheck for a check), then now, the increment and the burst
// offset, each as its two limbs (limbs): the high one a signed integer of
// 5 bytes, the low one an unsigned integer of 4, big-endian. One argument
// in place of five, and one struct.unpack in place of four conversions
// from text: Redis copies every argument into ARGV, and a folded batch is
// the commonest.
const (
	foldedFormat = ">Bi5I4i5I4i5I4"
	foldedLen    = 1 + 3*(5+4)
	foldedCheck  = 3
)

// A folded rate batch in a packed call in key format v1: a one-key spend
// or check of a rate counter with its box (a check_rate) in one argument
// of foldedRateLen bytes (foldedRateBatch), then its key when inline (P),
// then its box entry's name. The bytes are foldedRateFormat: a code as a
// folded batch's (the op's mode, plus foldedCheck for a check), now and
// BoxUntil as limbs, then the cost, the window (s) and the rate as
// doubles, which is what the script makes of them from text too. One
// argument and the name in place of eleven.
const (
	foldedRateFormat = ">Bi5I4i5I4ddd"
	foldedRateLen    = 1 + 2*(5+4) + 3*8
)

// foldedConstants are the folded batches' constants as the script names
// them, with their values as Lua literals: the join of the script puts
// each in its place (protocolValues), and lua/protocol.lua lists them.
var foldedConstants = []struct{ name, value string }{
	{"FOLDED_FORMAT", "'" + foldedFormat + "'"},
	{"FOLDED_LEN", strconv.Itoa(foldedLen)},
	{"FOLDED_CHECK", strconv.Itoa(foldedCheck)},
	{"FRATE_FORMAT", "'" + foldedRateFormat + "'"},
	{"FRATE_LEN", strconv.Itoa(foldedRateLen)},
}

// A GCRA op in a spend or check.
const (
	gcraMode      = iota // 0 check-and-spend, 1 check-only, 2 spend-only
	gcraIncrement        // EmissionInterval * Cost
	gcraBurst            // BurstOffset
	gcraSize
)

// A window op in a spend or check.
const (
	windowTokenAt = iota // windowToken
	windowCost
	windowCountAt  // the count
	windowPeriodAt // ms: a window's period, a calendar counter's period end (unix)
	windowSize
)

// A rate-counter op in a spend or check.
const (
	rateTokenAt = iota // rateToken
	rateCost
	rateWindow // s
	rateRate
	rateSize
)

// A concurrency op (an acquire) in a spend or check.
const (
	leaseTokenAt = iota // leaseToken
	leaseCost
	leaseCount
	leaseTTL  // ms
	leaseIDAt // the lease id an acquire takes ("" for none)
	leaseSize
)

// The box of an op with one, before its values, in a spend or check.
const (
	boxTokenAt = iota // boxToken
	boxEntry          // the box entry's name (keyFormat.boxName)
	boxUntil          // BoxUntil
	boxSize
)

// The box of an op with one, before its values, in a refund or reset.
const (
	rboxTokenAt = iota // boxToken
	rboxEntry          // the box entry's name
	rboxSize
)

// A GCRA op in a refund.
const (
	refundGCRADecrement = iota // refundAmount
	refundGCRASize
)

// A window op in a refund.
const (
	refundWindowKind   = iota // windowKind
	refundWindowHits          // refundAmount
	refundWindowPeriod        // ms, as windowPeriodAt
	refundWindowSize
)

// A rate-counter op in a refund.
const (
	refundRateKind = iota // "T"
	refundRateHits        // refundAmount
	refundRateSize
)

// A concurrency op in a refund: a release or a renewal.
const (
	refundLeaseKind = iota // leaseKind
	refundLeaseTTL         // ms
	refundLeaseID
	refundLeaseSize
)

// An op in a reset.
const (
	resetSpec = iota // "G", "T", "L", or windowKind and the period ("W60000"), or "K" and a calendar counter's end
	resetSize
)

// A push in a sync (A).
const (
	syncPeriod = iota // ms
	syncIndex         // Start / Period
	syncHits
	syncPrev
	syncSize
)

// An ERL call (E): the number of counters, then each counter's values,
// then the box action's.
const (
	callCounters = iota
	callSize
)

// A counter of an ERL call.
const (
	counterDelta  = iota
	counterWindow // s, 0 for none
	counterRate
	counterSize
)

// An ERL call's box action, after its counters.
const (
	actionKind  = iota // callAction
	actionUntil        // Call.Until
	actionSize
)

// A push in a rate sync (Y).
const (
	pushHits   = iota // formatRate; "" to only read, "-" for no counter
	pushBox           // the box entry's name, "" for none
	pushExpiry        // the expiry to store, 0 to only read
	pushSize
)

// argLayout names one run of arguments for the script: its Lua constants
// are prefix_FIELD, each the position of its field (an index of ARGV
// when the run starts at a fixed place, else an offset from where it
// starts), and prefix_SIZE, how many arguments it takes (size; none when
// 0, for a run that ends in another).
type argLayout struct {
	prefix string
	fields []argField
	size   int
}

// argField is a field's name in Lua and its position.
type argField struct {
	name string
	at   int
}

// protocolLayouts are the runs of arguments the script reads, in the
// order lua/protocol.lua declares them.
var protocolLayouts = []argLayout{
	{"HEAD", []argField{{"OP", argOp}, {"MARGIN", argMargin}, {"FORMAT", argFormat}}, headerArgs},
	{"ONCE", []argField{{"OP", onceOp}, {"FINGERPRINT", onceFingerprint}, {"EXPIRES", onceExpires},
		{"LIFETIME", onceLifetime}, {"NOW", onceNow}}, 0},
	{"CLAIM", []argField{{"FINGERPRINT", claimFingerprint}, {"EXPIRES", claimExpires},
		{"LIFETIME", claimLifetime}, {"NOW", claimNow}}, 0},
	{"NOW", []argField{{"HI", nowHi}, {"LO", nowLo}}, nowSize},
	{"PACK", []argField{{"OP", packOp}, {"KEYS", packKeyCount}}, packSize},
	{"GCRA", []argField{{"MODE", gcraMode}, {"INCREMENT", gcraIncrement}, {"BURST", gcraBurst}}, gcraSize},
	{"WIN", []argField{{"TOKEN", windowTokenAt}, {"COST", windowCost}, {"COUNT", windowCountAt},
		{"PERIOD", windowPeriodAt}}, windowSize},
	{"RATE", []argField{{"TOKEN", rateTokenAt}, {"COST", rateCost}, {"WINDOW", rateWindow},
		{"RATE", rateRate}}, rateSize},
	{"LEASE", []argField{{"TOKEN", leaseTokenAt}, {"COST", leaseCost}, {"COUNT", leaseCount},
		{"TTL", leaseTTL}, {"ID", leaseIDAt}}, leaseSize},
	{"BOX", []argField{{"TOKEN", boxTokenAt}, {"NAME", boxEntry}, {"UNTIL", boxUntil}}, boxSize},
	{"RBOX", []argField{{"TOKEN", rboxTokenAt}, {"NAME", rboxEntry}}, rboxSize},
	{"RGCRA", []argField{{"DECREMENT", refundGCRADecrement}}, refundGCRASize},
	{"RWIN", []argField{{"KIND", refundWindowKind}, {"HITS", refundWindowHits},
		{"PERIOD", refundWindowPeriod}}, refundWindowSize},
	{"RRATE", []argField{{"KIND", refundRateKind}, {"HITS", refundRateHits}}, refundRateSize},
	{"RLEASE", []argField{{"KIND", refundLeaseKind}, {"TTL", refundLeaseTTL}, {"ID", refundLeaseID}}, refundLeaseSize},
	{"RESET", []argField{{"SPEC", resetSpec}}, resetSize},
	{"SYNC", []argField{{"PERIOD", syncPeriod}, {"INDEX", syncIndex}, {"HITS", syncHits},
		{"PREV", syncPrev}}, syncSize},
	{"CALL", []argField{{"COUNTERS", callCounters}}, callSize},
	{"CTR", []argField{{"DELTA", counterDelta}, {"WINDOW", counterWindow}, {"RATE", counterRate}}, counterSize},
	{"ACTION", []argField{{"KIND", actionKind}, {"UNTIL", actionUntil}}, actionSize},
	{"PUSH", []argField{{"HITS", pushHits}, {"BOX", pushBox}, {"EXPIRY", pushExpiry}}, pushSize},
}
