package redis

import (
	"errors"
	"strconv"
)

// A GCRA bucket's TAT (unix nanoseconds) is stored in one of two forms,
// and the script and this package read both: decimal text, as
// strconv.FormatInt writes it, or with Options.BinaryTATs 10 bytes of
// binary: binaryTATTag, then the TAT's two limbs (the floored quotient and
// remainder by limbBase) as big-endian integers, the quotient in 5 signed
// bytes and the remainder in 4 unsigned ones (struct '>i5I4' in the
// script). The script reads and writes that with one call of Redis's
// struct library, where text takes several conversions. No other stored
// value is 10 bytes starting with the tag: text starts with a digit or
// '-', a window counter with a digit, a lease set with 'L', and a rate
// counter with its seconds' top byte (rate.go).
//
//	54 00 6a b1 3b 80 07 5b cd 15   1790000000123456789

// binaryTATTag is a binary TAT's first byte, and binaryTATLen its size.
const (
	binaryTATTag = 'T'
	binaryTATLen = 10
)

// errNotTAT is a stored value that is neither form of a TAT.
var errNotTAT = errors.New("not a TAT")

// isBinaryTAT reports whether s has a binary TAT's form.
func isBinaryTAT(s string) bool {
	return len(s) == binaryTATLen && s[0] == binaryTATTag
}

// parseTAT reads a stored TAT in either form.
func parseTAT(s string) (int64, error) {
	if !isBinaryTAT(s) {
		return strconv.ParseInt(s, 10, 64)
	}
	hi := int64(s[1])<<32 | int64(s[2])<<24 | int64(s[3])<<16 | int64(s[4])<<8 | int64(s[5])
	hi = hi << 24 >> 24 // the sign of 40 bits
	lo := int64(s[6])<<24 | int64(s[7])<<16 | int64(s[8])<<8 | int64(s[9])
	const maxHi, minHi = 9_223_372_036, -9_223_372_037 // math.MaxInt64's and MinInt64's limbs
	if lo >= limbBase || hi > maxHi || hi < minHi || (hi == maxHi && lo > 854_775_807) || (hi == minHi && lo < 145_224_192) {
		return 0, errNotTAT
	}
	if hi < 0 {
		// (hi + 1) * limbBase stays within int64 where hi * limbBase may not.
		return (hi+1)*limbBase + (lo - limbBase), nil
	}
	return hi*limbBase + lo, nil
}
