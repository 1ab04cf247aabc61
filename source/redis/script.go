package redis

import (
	"bytes"
	"embed"
	"regexp"
	"strconv"
	"strings"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// scriptFragments are the parts of the bucket script, files of lua/, in
// the order they are joined. lua/protocol.lua, the positions of the
// arguments as Lua constants, is not among them: the parts read every
// argument through those names, and the join puts each one's value in its
// place (protocolValues), so that the script Redis runs holds plain
// numbers, as cheap as written by hand (Redis's Lua has no constants, and
// a function that reads a local of the chunk pays for it on every call).
// The order is fixed. The script is one Lua chunk cut into named
// parts: a part uses the local functions of the parts before it, so the
// order is fixed. fast.lua opens the fast path's block and fastpack.lua
// closes it; windows.lua opens ext_make, the function that makes the
// functions only some calls need, and sync.lua closes it; the parts from
// the one to the other are its body.
var scriptFragments = []string{
	"fast.lua",      // packed one-key spends in format v1, before anything is made: opens the fast path
	"fastrates.lua", // the fast path's rate counters and box entries
	"fastpack.lua",  // the fast path's loop over the batches; closes it
	"prelude.lua",   // what the script keeps, and its constants
	"limbs.lua",     // exact two-limb arithmetic, argument parsing
	"store.lua",     // reading and writing buckets, key formats v1 and v2
	"windows.lua",   // ext_make opens: window counters
	"rates.lua",     // rate counters
	"boxes.lua",     // penalty boxes, and ops with a box in a spend
	"erl.lua",       // Edge Rate Limiting calls, rate sync
	"leases.lua",    // lease sets of concurrency limits, made on a call's first concurrency op
	"sync.lua",      // reset and sweep tests, window sync; ext_make closes
	"batch.lua",     // spend, refund and reset of a batch, and run
	"once.lua",      // idempotency records and claims
	"main.lua",      // the call's operation, and packed calls
}

//go:embed lua/*.lua
var scriptFiles embed.FS

// bucketLua is the script that decides and writes every batch inside
// Redis: scriptFragments joined. One script serves both key formats (the
// format is an argument, see encode.go), so a source loads it once and
// calls it by its SHA-1.
var bucketLua = joinScript()

// protocolName matches a name that may be one of protocolLayouts', with
// the " + " before it, if any.
var protocolName = regexp.MustCompile(`( \+ )?\b[A-Z]+_[A-Z]+\b`)

// joinScript returns the fragments of the bucket script, joined, each
// argument position's name replaced by its value; an offset of 0 added
// ("ARGV[b + GCRA_MODE]") is left out with its "+" ("ARGV[b]"), which
// spares the script an addition.
func joinScript() string {
	values := protocolValues()
	var b strings.Builder
	for _, name := range scriptFragments {
		text, err := scriptFiles.ReadFile("lua/" + name)
		if err != nil {
			panic("redis source: bucket script: " + err.Error())
		}
		b.Write(protocolName.ReplaceAllFunc(text, func(w []byte) []byte {
			name, plus := bytes.CutPrefix(w, []byte(" + "))
			v, ok := values[string(name)]
			switch {
			case !ok:
				return w
			case plus && v == "0":
				return nil
			case plus:
				return []byte(" + " + v)
			}
			return []byte(v)
		}))
	}
	return b.String()
}

// protocolValues returns the Lua constants of protocolLayouts and
// foldedConstants by name, as Lua literals.
func protocolValues() map[string]string {
	m := map[string]string{}
	for _, c := range foldedConstants {
		m[c.name] = c.value
	}
	for _, l := range protocolLayouts {
		for _, f := range l.fields {
			m[l.prefix+"_"+f.name] = strconv.Itoa(f.at)
		}
		if l.size > 0 {
			m[l.prefix+"_SIZE"] = strconv.Itoa(l.size)
		}
	}
	return m
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
