package redis

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/limiter-dev/limiter/ratelimits/window"
)

// binaryTAT is tat as the script writes it in binary (struct '>Bi5I4'
// of 'T' and its limbs), written here byte by byte.
func binaryTAT(tat int64) string {
	hi, lo := tat/limbBase, tat%limbBase
	if lo < 0 {
		hi, lo = hi-1, lo+limbBase
	}
	return string([]byte{binaryTATTag, byte(hi >> 32), byte(hi >> 24), byte(hi >> 16), byte(hi >> 8), byte(hi),
		byte(lo >> 24), byte(lo >> 16), byte(lo >> 8), byte(lo)})
}

// Both forms of a TAT read back exactly, across int64 (the limbs' edges,
// negative times, its two ends).
func TestParseTATBothForms(t *testing.T) {
	tats := []int64{0, 1, limbBase - 1, limbBase, 1_790_000_000_123_456_789, 1 << 62,
		math.MaxInt64, math.MaxInt64 - 1, -1, -limbBase, -limbBase - 1, -3_000_000_000_123_456_789,
		math.MinInt64, math.MinInt64 + 1}
	for _, tat := range tats {
		for _, s := range []string{strconv.FormatInt(tat, 10), binaryTAT(tat)} {
			if got, err := parseTAT(s); err != nil || got != tat {
				t.Errorf("parseTAT(%q) = %d, %v; want %d", s, got, err, tat)
			}
		}
	}
	if s := binaryTAT(1_790_000_000_123_456_789); s != "T\x00\x6a\xb1\x3b\x80\x07\x5b\xcd\x15" {
		t.Errorf("binary form %q, want the bytes the package doc shows", s)
	}
}

// A 10-byte value starting with 'T' whose limbs are not an int64's is
// refused; a binary TAT is neither a rate counter nor a window counter.
func TestParseTATRefusesBadLimbs(t *testing.T) {
	bad := []string{
		"T\x00\x00\x00\x00\x00\x3b\x9a\xca\x00", // low limb 1e9
		"T\x00\x00\x00\x00\x00\xff\xff\xff\xff", // low limb 2^32 - 1
		"T\x02\x25\xc1\x7d\x05\x00\x00\x00\x00", // high limb 9223372037, one past MaxInt64's
		"T\x7f\xff\xff\xff\xff\x00\x00\x00\x00", // the largest high limb
		"T\x80\x00\x00\x00\x00\x00\x00\x00\x00", // the smallest
	}
	// MaxInt64's high limb with a low limb past its own, and MinInt64's
	// with a low limb below its own.
	bad = append(bad, binaryTAT(math.MaxInt64)[:6]+"\x32\xf2\xd8\x00", binaryTAT(math.MinInt64)[:6]+"\x08\xa7\xf1\xff")
	for _, s := range bad {
		if got, err := parseTAT(s); !errors.Is(err, errNotTAT) {
			t.Errorf("parseTAT(%q) = %d, %v; want errNotTAT", s, got, err)
		}
	}
	for _, tat := range []int64{1_790_000_000_123_456_789, -1, 1<<32 + 0x0102_0400} {
		s := binaryTAT(tat)
		if isRate(s) {
			t.Errorf("%q reads as a rate counter", s)
		}
		if c, err := parseCounter(s); err != nil || c != (window.Counter{}) {
			t.Errorf("parseCounter(%q) = %+v, %v; want the zero Counter", s, c, err)
		}
	}
}

// Every int64 written in binary reads back as itself.
func FuzzBinaryTAT(f *testing.F) {
	for _, tat := range []int64{0, -1, math.MaxInt64, math.MinInt64, 1_790_000_000_123_456_789} {
		f.Add(tat)
	}
	f.Fuzz(func(t *testing.T, tat int64) {
		s := binaryTAT(tat)
		if !isBinaryTAT(s) || isRate(s) {
			t.Fatalf("%q: binary %t, rate %t", s, isBinaryTAT(s), isRate(s))
		}
		if got, err := parseTAT(s); err != nil || got != tat {
			t.Fatalf("parseTAT(binaryTAT(%d)) = %d, %v", tat, got, err)
		}
	})
}
