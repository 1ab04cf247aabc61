package redis

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
)

//go:embed bucket.lua
var bucketLua string

// groupedSwitch is the line of bucket.lua that selects key format v2.
const groupedSwitch = "\nlocal GROUPED = false\n"

// scriptFor returns the bucket script for a key format: bucket.lua as it
// is for v1, with GROUPED set for v2. The two are separate scripts (two
// SHA-1s), so the choice costs the script nothing per call.
func scriptFor(groups int) string {
	if groups == 0 {
		return bucketLua
	}
	if strings.Count(bucketLua, groupedSwitch) != 1 {
		panic("redis source: bucket.lua lost its GROUPED line")
	}
	return strings.Replace(bucketLua, groupedSwitch, "\nlocal GROUPED = true\n", 1)
}

// limbBase splits an int64 into the two limbs the script computes with.
const limbBase = 1_000_000_000

// Script operations (ARGV[1]).
const (
	opSpend  = "S"
	opCheck  = "C" // a spend decided but never written
	opRefund = "R"
	opReset  = "D"
	opMulti  = "M" // several batches in one call, see coalesce.go
	// opPackedInline is opMulti for a cluster master: the batches' keys
	// are passed as arguments, none is declared (see packInline).
	opPackedInline = "P"
	// opOnce runs a spend or refund under an idempotency record, opClaim
	// claims an idempotency key (see once.go).
	opOnce  = "O"
	opClaim = "Q"
)

// Parts of Redis's errors for a script's command that the cluster check
// refuses: a key of a slot the node does not serve (Redis 7.0), the same
// in later versions' words, and any key while the node sees the cluster
// down.
const (
	nonLocalKey       = "non local key"
	slotNotServed     = "slot not served"
	scriptClusterDown = "while the cluster is down"
)

// Argument counts of the script: the header, and per key.
const (
	headerArgs      = 4
	spendArgsPerKey = 3
	refundArgsPer   = 1
)

var (
	// ErrBadReply means Redis answered the script with something it never
	// returns: another program wrote under this source's key prefix, or
	// the script and this code are out of step.
	ErrBadReply = errors.New("redis source: unexpected reply from the bucket script")

	// ErrVerdictMismatch means the script and the gcra functions decided
	// a batch differently from the same TATs. It would be a bug in the
	// script; the batch's answer is not trusted.
	ErrVerdictMismatch = errors.New("redis source: the bucket script and gcra disagree on a batch")

	// ErrInvalidOp means an op broke the Source contract (a non-positive
	// emission interval, a negative cost or burst offset, or a cost whose
	// increment overflows int64), or, in key format v2, its bucket key is
	// empty: nothing is sent to Redis.
	ErrInvalidOp = errors.New("redis source: invalid op")
)

// limbs splits v into (hi, lo) with v = hi*1e9 + lo and 0 <= lo < 1e9, the
// exact representation the script uses.
func limbs(v int64) (hi, lo int64) {
	hi, lo = v/limbBase, v%limbBase
	if lo < 0 {
		hi, lo = hi-1, lo+limbBase
	}
	return hi, lo
}

// appendHeader appends the arguments every call starts with: the
// operation, the margin and now (as limbs: the script reads now as two
// plain numbers, cheaper than splitting a 19-digit string).
func appendHeader(args []any, op string, now, marginMS int64) []any {
	hi, lo := limbs(now)
	return append(args, op, marginMS, hi, lo)
}

// checkOp rejects ops outside the Source contract, whose arithmetic gcra
// would wrap and the script would not.
func checkOp(op *gcra.Op) error {
	if op.EmissionInterval <= 0 || op.BurstOffset < 0 || op.Cost < 0 || op.Cost > math.MaxInt64/op.EmissionInterval {
		return fmt.Errorf("%w: %q: emission interval %d, burst offset %d, cost %d",
			ErrInvalidOp, op.Key, op.EmissionInterval, op.BurstOffset, op.Cost)
	}
	return nil
}

// appendSpendOp appends one op's spend arguments. The script splits the
// int64s into limbs itself.
func appendSpendOp(args []any, op *gcra.Op) []any {
	return append(args, int64(op.Mode), op.EmissionInterval*op.Cost, op.BurstOffset)
}

// refundDecrement is how far a refund moves an op's TAT back: its cost in
// time, or nothing for a check-only op, as in gcra.RefundBatch.
func refundDecrement(op *gcra.Op) int64 {
	if op.Mode == gcra.CheckOnly {
		return 0
	}
	return op.EmissionInterval * op.Cost
}

// parseReply reads the script's {verdict, tat_1..tat_n} reply into tats
// (len n), as the Source interface hands TATs to gcra: gcra.Missing for a
// missing bucket or one that is full at now.
func parseReply(reply any, now int64, tats []int64) (verdict bool, err error) {
	items, ok := reply.([]any)
	if !ok || len(items) != len(tats)+1 {
		return false, fmt.Errorf("%w: %T of %d items for %d buckets", ErrBadReply, reply, len(items), len(tats))
	}
	v, ok := items[0].(int64)
	if !ok || (v != 0 && v != 1) {
		return false, fmt.Errorf("%w: verdict %v", ErrBadReply, items[0])
	}
	for i, item := range items[1:] {
		s, ok := item.(string)
		if !ok {
			return false, fmt.Errorf("%w: TAT %v", ErrBadReply, item)
		}
		if s == "" {
			tats[i] = gcra.Missing
			continue
		}
		tat, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return false, fmt.Errorf("%w: TAT %q", ErrBadReply, s)
		}
		if tat <= now {
			tat = gcra.Missing
		}
		tats[i] = tat
	}
	return v == 1, nil
}
