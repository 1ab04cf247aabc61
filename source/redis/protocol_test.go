package redis

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
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
		for _, l := range protocolLayouts {
			if strings.HasPrefix(w, l.prefix+"_") {
				t.Errorf("the joined script still names a position: %s", w)
			}
		}
	}
}

// TestProtocolLayouts checks the declaration itself: each run's fields
// follow one another, its size counts them, and a folded batch's values
// are a GCRA op's from its increment on, as spend1 reads both.
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
	if foldIncrement != gcraIncrement-gcraIncrement || foldBurst != gcraBurst-gcraIncrement || foldSize != gcraSize-gcraIncrement {
		t.Error("a folded batch's values are not a GCRA op's from its increment on")
	}
	// The script tells an op's kind, and a packed batch's, by its first
	// argument, and steps over a window op and a rate counter alike.
	for _, first := range []int{gcraMode, windowTokenAt, rateTokenAt, boxTokenAt, rboxTokenAt,
		refundGCRADecrement, refundWindowKind, refundRateKind, resetSpec, packOp, foldToken} {
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
