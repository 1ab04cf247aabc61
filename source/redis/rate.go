package redis

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// A rate counter is stored packed: the newest second counted into
// (ratecounter.Counter.Last, unix seconds) as a 5-byte signed big-endian
// integer, then the hits of that second and of each second before it as
// 4-byte unsigned big-endian integers, up to the oldest second of the
// last ratecounter.Seconds that holds a hit (the first count may be 0: a
// refund took that second's hits back):
//
//	00 6a b3 f4 80  00 00 00 03                 3 hits in second 1790000000
//	00 6a b3 f4 87  00 00 00 02  00 00 00 00  00 00 00 05
//	                2 hits in second 1790000007, 5 in 1790000005
//
// 9 bytes for one second, 245 at most. The first byte of any second an
// int64 of nanoseconds holds (|second| < 2^34) is 0x00 to 0x02 or 0xfd to
// 0xff, never a digit nor '-', which every TAT, window counter and box
// entry starts with, so no value reads as another's. bucket.lua reads and
// writes the same form (rparse, rwrite) with Redis's struct library, in
// one call for the whole counter.

// rateHeader and rateSlot are the sizes of a packed counter's second and
// of each count.
const (
	rateHeader = 5
	rateSlot   = 4
)

// isRate reports whether a stored value is a rate counter.
func isRate(s string) bool {
	n := len(s)
	if n < rateHeader+rateSlot || n > rateHeader+rateSlot*ratecounter.Seconds || (n-rateHeader)%rateSlot != 0 {
		return false
	}
	b := s[0]
	return b != '-' && (b < '0' || b > '9')
}

// formatRate returns c packed as stored, or "" when it holds no hit (how
// a push that only reads says so).
func formatRate(c *ratecounter.Counter) string {
	top := -1
	for j := range ratecounter.Seconds {
		if c.At(c.Last-int64(j)) > 0 {
			top = j
		}
	}
	if top < 0 {
		return ""
	}
	b := make([]byte, rateHeader+rateSlot*(top+1))
	var last [8]byte
	binary.BigEndian.PutUint64(last[:], uint64(c.Last))
	copy(b, last[8-rateHeader:])
	for j := 0; j <= top; j++ {
		binary.BigEndian.PutUint32(b[rateHeader+rateSlot*j:], uint32(c.At(c.Last-int64(j))))
	}
	return string(b)
}

// parseRate reads a rate counter as stored. The empty string is the zero
// Counter, as a counter never stored reads.
func parseRate(s string) (ratecounter.Counter, error) {
	var c ratecounter.Counter
	if s == "" {
		return c, nil
	}
	if !isRate(s) {
		return c, fmt.Errorf("%w: rate counter %q", ErrBadReply, s)
	}
	var last [8]byte
	if s[0]&0x80 != 0 {
		last = [8]byte{0xff, 0xff, 0xff}
	}
	copy(last[8-rateHeader:], s[:rateHeader])
	c.Last = int64(binary.BigEndian.Uint64(last[:]))
	for j := 0; rateHeader+rateSlot*j < len(s); j++ {
		c.Hits[slotOf(c.Last-int64(j))] = binary.BigEndian.Uint32([]byte(s[rateHeader+rateSlot*j : rateHeader+rateSlot*(j+1)]))
	}
	return c, nil
}

// slotOf is the index of second t in ratecounter.Counter.Hits.
func slotOf(t int64) int {
	m := t % ratecounter.Seconds
	if m < 0 {
		m += ratecounter.Seconds
	}
	return int(m)
}

// parseBox reads a box entry's stored expiry (unix ns, "" when none) as
// bucket.State.BoxExpires holds it at now: 0 when the entry is missing or
// its expiry is not after now (the id is out of the box, and Redis
// deletes the entry a margin later).
func parseBox(s string, now int64) (int64, error) {
	if s == "" {
		return 0, nil
	}
	e, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: box entry %q", ErrBadReply, s)
	}
	if e <= now {
		return 0, nil
	}
	return e, nil
}
