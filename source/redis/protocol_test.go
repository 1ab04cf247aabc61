package redis

import (
	"context"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/internal/redistest"
)

// protocolLua returns lua/protocol.lua as protocolLayouts declare it.
func protocolLua() string {
	var b strings.Builder
	b.WriteString("-- The positions of the script's arguments, generated from\n" +
		"-- protocolLayouts (protocol.go) by go generate: not to be edited here.\n" +
		"-- docs/redis.md, \"The script's arguments\", describes them.\n")
	for _, l := range protocolLayouts {
		var names, values []string
		for _, f := range l.fields {
			names = append(names, l.prefix+"_"+f.name)
			values = append(values, fmt.Sprint(f.at))
		}
		if l.size > 0 {
			names = append(names, l.prefix+"_SIZE")
			values = append(values, fmt.Sprint(l.size))
		}
		fmt.Fprintf(&b, "local %s = %s\n", strings.Join(names, ", "), strings.Join(values, ", "))
	}
	for _, c := range foldedConstants {
		fmt.Fprintf(&b, "local %s = %s\n", c.name, c.value)
	}
	return b.String()
}

// TestProtocolLua holds lua/protocol.lua to protocolLayouts. With
// LIMITER_UPDATE_PROTOCOL set it writes the file instead (go generate).
func TestProtocolLua(t *testing.T) {
	want := protocolLua()
	if os.Getenv("LIMITER_UPDATE_PROTOCOL") != "" {
		if err := os.WriteFile("lua/protocol.lua", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := scriptFiles.ReadFile("lua/protocol.lua")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("lua/protocol.lua is not what protocol.go declares: run go generate ./source/redis\n--- want\n%s", want)
	}
}

// TestProtocolNames checks that the joined script holds no name of a
// position left unreplaced: every one the fragments use is declared.
func TestProtocolNames(t *testing.T) {
	for _, w := range regexp.MustCompile(`\b[A-Z]+_[A-Z]+\b`).FindAllString(bucketLua, -1) {
		for _, c := range foldedConstants {
			prefix, _, _ := strings.Cut(c.name, "_")
			if strings.HasPrefix(w, prefix+"_") {
				t.Errorf("the joined script still names a folded batch's constant: %s", w)
				break
			}
		}
		for _, l := range protocolLayouts {
			if strings.HasPrefix(w, l.prefix+"_") {
				t.Errorf("the joined script still names a position: %s", w)
			}
		}
	}
}

// TestProtocolLayouts checks the declaration itself: each run's fields
// follow one another and its size counts them.
func TestProtocolLayouts(t *testing.T) {
	seen := map[string]bool{}
	for _, l := range protocolLayouts {
		if seen[l.prefix] {
			t.Errorf("%s declared twice", l.prefix)
		}
		seen[l.prefix] = true
		for i, f := range l.fields {
			if f.at != l.fields[0].at+i {
				t.Errorf("%s_%s at %d, want %d", l.prefix, f.name, f.at, l.fields[0].at+i)
			}
		}
		if l.size != 0 && l.size != len(l.fields) {
			t.Errorf("%s: size %d for %d fields from %d", l.prefix, l.size, len(l.fields), l.fields[0].at)
		}
	}
	// The script tells an op's kind, and a packed batch's, by its first
	// argument, and steps over a window op and a rate counter alike.
	for _, first := range []int{gcraMode, windowTokenAt, rateTokenAt, boxTokenAt, rboxTokenAt,
		refundGCRADecrement, refundWindowKind, refundRateKind, resetSpec, packOp} {
		if first != 0 {
			t.Error("an op's or a packed batch's first argument is not its token")
		}
	}
	if windowSize != rateSize {
		t.Error("a window op and a rate counter take different numbers of arguments")
	}
	if onceOp != headerArgs+1 || claimFingerprint != headerArgs+1 {
		t.Error("O and Q do not start right after the header")
	}
}

// TestFoldedBatchesReadInLua hands folded batches to Redis's own Lua,
// which reads each with struct.unpack and its format as the script does.
// A GCRA batch: every code, and nows, increments and burst offsets at the
// int64 edges, before 1970 and on limb boundaries, come back exactly as
// limbs. A rate batch: codes, nows and box expiries as limbs, and costs,
// windows and rates, doubles, up to 2^53 (Redis answers a Lua number as
// an integer, so they come back whole: the values are).
func TestFoldedBatchesReadInLua(t *testing.T) {
	srv := redistest.Standalone(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer c.Close()
	// luaReads checks a batch's length and returns what struct.unpack
	// reads of it, the position after it last.
	luaReads := func(format, batch string, length int) []int64 {
		t.Helper()
		if len(batch) != length {
			t.Fatalf("a folded batch of %d bytes, want %d", len(batch), length)
		}
		got, err := c.Eval(context.Background(), "return {struct.unpack('"+format+"', ARGV[1])}", nil, batch).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	times := []int64{0, 1, limbBase - 1, limbBase, -1, -limbBase, -limbBase - 1, 1_790_000_000_123_456_789,
		-3_000_000_000_123_456_789, math.MaxInt64, math.MinInt64, 36_000_000_000}
	counts := []int64{0, 1, 10, 60, 4_294_967_295, 1 << 53}
	for i, now := range times {
		nh, nl := limbs(now)
		increment, burst := times[(i+3)%len(times)], times[(i+7)%len(times)]
		ih, il := limbs(increment)
		bh, bl := limbs(burst)
		cost, window, rate := counts[i%len(counts)], counts[(i+2)%len(counts)], counts[(i+4)%len(counts)]
		for code := range byte(2 * foldedCheck) {
			got := luaReads(foldedFormat, foldedBatch(code, now, increment, burst), foldedLen)
			if want := []int64{int64(code), nh, nl, ih, il, bh, bl, foldedLen + 1}; !slices.Equal(got, want) {
				t.Errorf("GCRA, code %d, now %d, increment %d, burst %d: Lua reads %v, want %v", code, now, increment, burst, got, want)
			}
			// the burst offset's place taken by a box expiry
			got = luaReads(foldedRateFormat, foldedRateBatch(code, now, burst, cost, window, rate), foldedRateLen)
			if want := []int64{int64(code), nh, nl, bh, bl, cost, window, rate, foldedRateLen + 1}; !slices.Equal(got, want) {
				t.Errorf("rate, code %d, now %d, until %d, cost %d, window %d, rate %d: Lua reads %v, want %v", code, now, burst, cost, window, rate, got, want)
			}
		}
	}
}
