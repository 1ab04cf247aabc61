package redis

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// A rate counter is stored packed: the newest second counted into
// (ratecounter.Counter.Last, unix seconds) as a 5-byte signed big-endian
// integer, the width w of its counts (1, 2 or 4 bytes: the fewest that
// hold the largest), then the hits of that second and of each second
// before it as w-byte unsigned big-endian integers, up to the oldest
// second of the last ratecounter.Seconds that holds a hit (the first
// count may be 0: a refund took that second's hits back):
//
//	00 6a b1 3b 80  01  03                  3 hits in second 1790000000
//	00 6a b1 3b 87  02  00 02  00 00  01 2c
//	                    2 hits in second 1790000007, 300 in 1790000005
//
// 7 bytes for a second of fewer than 256 hits, 246 at most. The first
// byte of any second an int64 of nanoseconds holds (|second| < 2^34) is
// 0x00 to 0x02 or 0xfd to 0xff, never a digit nor '-', which every text
// TAT, window counter and box entry starts with, nor the 'T' of a binary
// TAT (tat.go), so no value reads as
// another's. The script reads and writes the same form (rparse, rwrite)
// with Redis's struct library, in one call for the whole counter.

// rateHeader is the size of a packed counter's second and width.
const rateHeader = 6

// isRate reports whether a stored value is a rate counter.
func isRate(s string) bool {
	if len(s) <= rateHeader {
		return false
	}
	b, w, n := s[0], int(s[5]), len(s)-rateHeader
	return b != '-' && b != binaryTATTag && (b < '0' || b > '9') && (w == 1 || w == 2 || w == 4) && n%w == 0 && n <= w*ratecounter.Seconds
}

// formatRate returns c packed as stored, or "" when it holds no hit (how
// a push that only reads says so).
func formatRate(c *ratecounter.Counter) string {
	top, most := -1, int64(0)
	for j := range ratecounter.Seconds {
		if h := c.At(c.Last - int64(j)); h > 0 {
			top, most = j, max(most, h)
		}
	}
	if top < 0 {
		return ""
	}
	w := 1
	switch {
	case most > 0xffff:
		w = 4
	case most > 0xff:
		w = 2
	}
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+w*(top+1)), uint64(c.Last))[8-5:]
	b = append(b, byte(w))
	for j := 0; j <= top; j++ {
		h := uint32(c.At(c.Last - int64(j)))
		switch w {
		case 1:
			b = append(b, byte(h))
		case 2:
			b = binary.BigEndian.AppendUint16(b, uint16(h))
		default:
			b = binary.BigEndian.AppendUint32(b, h)
		}
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
	copy(last[3:], s[:5])
	c.Last = int64(binary.BigEndian.Uint64(last[:]))
	w := int(s[5])
	for j, at := 0, rateHeader; at < len(s); j, at = j+1, at+w {
		var h uint32
		for _, b := range []byte(s[at : at+w]) {
			h = h<<8 | uint32(b)
		}
		c.Hits[slotOf(c.Last-int64(j))] = h
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
