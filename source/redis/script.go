package redis

import (
	"embed"
	"strings"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// scriptFragments are the parts of the bucket script, files of lua/, in
// the order they are joined. The script is one Lua chunk cut into named
// parts: a part uses the local functions of the parts before it, so the
// order is fixed. windows.lua opens ext_make, the function that makes the
// functions only some calls need, and sync.lua closes it; the parts from
// the one to the other are its body.
var scriptFragments = []string{
	"prelude.lua", // what the script keeps, and its constants
	"limbs.lua",   // exact two-limb arithmetic, argument parsing
	"store.lua",   // reading and writing buckets, key formats v1 and v2
	"windows.lua", // ext_make opens: window counters
	"rates.lua",   // rate counters
	"boxes.lua",   // penalty boxes, and ops with a box in a spend
	"erl.lua",     // Edge Rate Limiting calls, rate sync
	"sync.lua",    // reset and sweep tests, window sync; ext_make closes
	"batch.lua",   // spend, refund and reset of a batch, and run
	"once.lua",    // idempotency records and claims
	"main.lua",    // the call's operation, and packed calls
}

//go:embed lua/*.lua
var scriptFiles embed.FS

// bucketLua is the script that decides and writes every batch inside
// Redis: scriptFragments joined. One script serves both key formats (the
// format is an argument, see encode.go), so a source loads it once and
// calls it by its SHA-1.
var bucketLua = joinScript()

// joinScript returns the fragments of the bucket script, joined.
func joinScript() string {
	var b strings.Builder
	for _, name := range scriptFragments {
		text, err := scriptFiles.ReadFile("lua/" + name)
		if err != nil {
			panic("redis source: bucket script: " + err.Error())
		}
		b.Write(text)
	}
	return b.String()
}

// smallBatch is the batch size whose states read, and refund amounts,
// live in stack arrays.
const smallBatch = 8

// stateBuffer returns n state slots, from buf when they fit.
func stateBuffer(buf []bucket.State, n int) []bucket.State {
	if n <= len(buf) {
		return buf[:n]
	}
	return make([]bucket.State, n)
}

// amountBuffer returns n int64 slots, from buf when they fit.
func amountBuffer(buf []int64, n int) []int64 {
	if n <= len(buf) {
		return buf[:n]
	}
	return make([]int64, n)
}
