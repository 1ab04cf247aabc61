package redis

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// A rate counter is stored as one string of decimal integers separated by
// commas: the newest second counted into (ratecounter.Counter.Last, unix
// seconds), then the hits of that second and of each second before it, up
// to the oldest second of the last ratecounter.Seconds that holds a hit:
//
//	1790000000,3          3 hits in second 1790000000
//	1790000007,2,0,0,5    2 hits in second 1790000007, 5 in 1790000004
//
// The first count may be 0 (a refund took that second's hits back); the
// others end with a hit. A window counter ("<period>:<index>:<cur>:<prev>")
// has colons and no comma, and a TAT or a box entry's expiry is one
// integer, so the three never read as one another. bucket.lua reads and
// writes the same form (rparse, rformat).

// isRate reports whether a stored value is a rate counter: the only
// values with a comma.
func isRate(s string) bool { return strings.IndexByte(s, ',') >= 0 }

// formatRate returns c as stored, or "" when it holds no hit (how a push
// that only reads says so).
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
	b := make([]byte, 0, 16+4*(top+1))
	b = strconv.AppendInt(b, c.Last, 10)
	for j := 0; j <= top; j++ {
		b = append(b, ',')
		b = strconv.AppendInt(b, c.At(c.Last-int64(j)), 10)
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
	last, rest, ok := strings.Cut(s, ",")
	l, err := strconv.ParseInt(last, 10, 64)
	if !ok || err != nil {
		return c, fmt.Errorf("%w: rate counter %q", ErrBadReply, s)
	}
	c.Last = l
	parts := strings.Split(rest, ",")
	if len(parts) > ratecounter.Seconds {
		return ratecounter.Counter{}, fmt.Errorf("%w: rate counter %q", ErrBadReply, s)
	}
	for j, part := range parts {
		n, err := strconv.ParseUint(part, 10, 32)
		if err != nil {
			return ratecounter.Counter{}, fmt.Errorf("%w: rate counter %q", ErrBadReply, s)
		}
		c.Hits[slotOf(l-int64(j))] = uint32(n)
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
