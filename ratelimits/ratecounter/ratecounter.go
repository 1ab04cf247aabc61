// Package ratecounter holds the rate counter of Fastly's Edge Rate
// Limiting as pure functions on whole unix seconds: an entry's hits per
// second over the last minute, the rates over 1, 10 and 60 seconds, and the
// ten-second buckets.
//
// A Counter keeps one slot per second of the last Seconds seconds, in a
// ring indexed by the second modulo Seconds; Last, the newest second that
// was counted into, says which second each slot holds. Everything is
// integer arithmetic: a rate "goes above" a limit exactly when the hits of
// the window exceed limit × window, never by comparing floats. Like the
// gcra and window packages, nothing here does I/O, reads a clock or
// allocates. docs/erl.md states the rules in prose.
package ratecounter

import "math"

// Seconds is how many seconds of hits a counter keeps: the longest window.
const Seconds = 60

// MaxHitsPerSecond is the most hits one second of one counter holds: more
// are not counted. It is above the largest limit × window (70,000,000 × 60
// = 4.2e9), so a second that holds it already goes above every limit, and
// no decision depends on the hits dropped.
const MaxHitsPerSecond = math.MaxUint32

// The windows a rate is read over, in seconds.
var windows = [...]int64{1, 10, 60}

// ValidWindow reports whether w (seconds) is a window rates are read over:
// 1, 10 or 60.
func ValidWindow(w int64) bool {
	for _, v := range windows {
		if w == v {
			return true
		}
	}
	return false
}

// Counter is one entry's hits per second. Hits[t mod Seconds] holds the
// hits of second t for every t in (Last − Seconds, Last]; slots of other
// seconds are stale and read as 0. The zero Counter holds no hits.
type Counter struct {
	// Last is the newest second counted into, unix seconds.
	Last int64
	Hits [Seconds]uint32
}

// slot returns the index of second t in Hits.
func slot(t int64) int {
	m := t % Seconds
	if m < 0 {
		m += Seconds
	}
	return int(m)
}

// At returns the hits of second t.
func (c *Counter) At(t int64) int64 {
	if t > c.Last || t <= c.Last-Seconds {
		return 0
	}
	return int64(c.Hits[slot(t)])
}

// Sum returns the hits of the seconds from through to, both included.
func (c *Counter) Sum(from, to int64) int64 {
	from = max(from, c.Last-Seconds+1)
	to = min(to, c.Last)
	var sum int64
	for t := from; t <= to; t++ {
		sum += int64(c.Hits[slot(t)])
	}
	return sum
}

// Window returns the hits of the last w seconds at second s, s included:
// the numerator of rate.{w}s.
func (c *Counter) Window(s, w int64) int64 { return c.Sum(s-w+1, s) }

// Bucket returns bucket.{n}s at second s (n a multiple of 10, from 10 to
// 60): the hits since the start of the ten-second block n seconds before
// the end of the block holding s. Every bucket moves on at each ten-second
// mark.
func (c *Counter) Bucket(s, n int64) int64 {
	block := s - mod(s, 10)
	return c.Sum(block-n+10, s)
}

// Newest returns the newest second in [s − w + 1, s] that holds a hit, and
// false when none does.
func (c *Counter) Newest(s, w int64) (int64, bool) {
	for t := min(s, c.Last); t > s-w && t > c.Last-Seconds; t-- {
		if c.Hits[slot(t)] > 0 {
			return t, true
		}
	}
	return 0, false
}

// Empty reports whether no second from s − Seconds + 1 on holds a hit:
// then c counts nothing at s or later, and a source may forget it. A
// counter whose newest second is a minute or more after s (the clock went
// back) is empty too: the next Add starts it afresh.
func (c *Counter) Empty(s int64) bool {
	if s <= c.Last-Seconds {
		return true
	}
	for t := c.Last; t > c.Last-Seconds && t > s-Seconds; t-- {
		if c.Hits[slot(t)] > 0 {
			return false
		}
	}
	return true
}

// Expires returns the first second at which c counts nothing: Seconds
// after its newest counted second. A source may forget the counter then.
func (c *Counter) Expires() int64 { return c.Last + Seconds }

// Add adds delta hits to second s, the current second. A later second
// than Last moves the window on, clearing the slots of the seconds it
// skips; one a minute or more before Last means the clock went back that
// far, and starts the counter afresh at s, since the hits it holds are
// all in a future that the clock no longer shows. A second's hits stop at
// MaxHitsPerSecond. It returns the hits actually added.
func (c *Counter) Add(s, delta int64) int64 {
	if delta <= 0 {
		return 0
	}
	if s <= c.Last-Seconds {
		*c = Counter{Last: s}
	}
	return c.add(s, delta)
}

// add adds delta (> 0) hits to second s, which is dropped when it is a
// minute or more before Last.
func (c *Counter) add(s, delta int64) int64 {
	if s <= c.Last-Seconds {
		return 0
	}
	if s > c.Last {
		c.advance(s)
	}
	i := slot(s)
	old := int64(c.Hits[i])
	c.Hits[i] = uint32(min(old+delta, MaxHitsPerSecond))
	return int64(c.Hits[i]) - old
}

// Remove takes up to delta hits away from second s, never below 0, and
// returns how many it took.
func (c *Counter) Remove(s, delta int64) int64 {
	if delta <= 0 || s > c.Last || s <= c.Last-Seconds {
		return 0
	}
	i := slot(s)
	taken := min(delta, int64(c.Hits[i]))
	c.Hits[i] -= uint32(taken)
	return taken
}

// Merge adds every hit of o that c's window, after moving on to o's newest
// second when that is later, still keeps: how a shared store adds up the
// hits pushed by several processes. Unlike Add, hits a minute or more
// older than c's newest second are dropped: they come from a process whose
// clock is behind, not from a clock that went back.
func (c *Counter) Merge(o *Counter) {
	for t := o.Last - Seconds + 1; t <= o.Last; t++ {
		if n := o.Hits[slot(t)]; n > 0 {
			c.add(t, int64(n))
		}
	}
}

// advance moves the window on to end at s (> Last), clearing the slots of
// the seconds after Last.
func (c *Counter) advance(s int64) {
	if s-c.Last >= Seconds {
		c.Hits = [Seconds]uint32{}
	} else {
		for t := c.Last + 1; t <= s; t++ {
			c.Hits[slot(t)] = 0
		}
	}
	c.Last = s
}

// Limit is a rate limit as a decision needs it: Rate hits per second over
// Window seconds (1, 10 or 60). Callers guarantee Rate × Window fits.
type Limit struct {
	Window int64
	Rate   int64
}

// Capacity is how many hits the window holds before the rate goes above
// the limit: Rate × Window.
func (l Limit) Capacity() int64 { return l.Rate * l.Window }

// Above reports whether hits counted over l's window put the rate above
// the limit: hits > Rate × Window, compared as integers.
func (l Limit) Above(hits int64) bool { return hits > l.Capacity() }

// Second returns the unix second holding now (unix nanoseconds), rounded
// down also before 1970.
func Second(now int64) int64 {
	s := now / 1e9
	if now%1e9 < 0 {
		s--
	}
	return s
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
