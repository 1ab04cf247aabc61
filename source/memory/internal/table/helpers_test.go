package table

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/limiter-dev/limiter/internal/boundedtable"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// putTAT stores a GCRA bucket's TAT under key, finding its position first.
func (s *Store) putTAT(key string, h uint64, tat, now int64) bool {
	return s.PutTAT(key, h, s.gcra.Find(key, h), tat, now, false)
}

// putWindow stores a window counter under key, finding its position first.
func (s *Store) putWindow(key string, h uint64, c window.Counter, now int64) bool {
	return s.PutWindow(key, h, s.windows.Find(key, h), &c, now, false)
}

// counterExpiring returns a window counter with hits that expires at expMs
// (unix ms): a period of 1 to 5,000 ms, and hits in the current window,
// the previous one, or both.
func counterExpiring(rng *rand.Rand, expMs int64) window.Counter {
	c := window.Counter{Period: 1 + rng.Int64N(5000)}
	switch rng.IntN(3) {
	case 0:
		c.Cur = 1 + rng.Int64N(50)
	case 1:
		c.Prev = 1 + rng.Int64N(50)
	default:
		c.Cur, c.Prev = 1+rng.Int64N(50), 1+rng.Int64N(50)
	}
	c.Start = expMs - c.Period
	if c.Cur > 0 {
		c.Start -= c.Period
	}
	return c
}

// keyAt returns the key of the entry at position i, undoing
// boundedtable.KeyOf.
func (t *Table[V]) keyAt(i int) string {
	sl := &t.table[i]
	n := boundedtable.InlineLen(sl.meta)
	if n < 0 {
		return string(t.arena[sl.k0 : sl.k0+sl.k1])
	}
	b := make([]byte, 8+n)
	switch {
	case n >= 8:
		binary.LittleEndian.PutUint64(b[n-8:], sl.k1)
		binary.LittleEndian.PutUint64(b, sl.k0)
	case n >= 4:
		binary.LittleEndian.PutUint32(b[n-4:], uint32(sl.k0>>32))
		binary.LittleEndian.PutUint32(b, uint32(sl.k0))
	case n > 0:
		b[n-1], b[n/2], b[0] = byte(sl.k0>>16), byte(sl.k0>>8), byte(sl.k0)
	}
	return string(b[:n])
}

// arenaLive counts the arena bytes of the long keys the table holds.
func (t *Table[V]) arenaLive() int {
	n := 0
	for i := range t.table {
		if sl := &t.table[i]; boundedtable.IsLong(sl.meta) {
			n += int(sl.k1)
		}
	}
	return n
}

// missProbe is the mean number of slots a lookup of an absent key reads,
// over every home: the length of the run from there to an empty slot.
func (t *Table[V]) missProbe() float64 {
	total, n := 0, len(t.table)
	for k := range n {
		for j := k; t.table[j].meta != 0; j = (j + 1) % n {
			total++
		}
	}
	return float64(total)/float64(n) + 1
}

// find returns the position of key's entry of the kind given, or None.
func (s *Store) find(key string, h uint64, windowed bool) int {
	if windowed {
		return s.FindWindow(key, h)
	}
	return s.FindTAT(key, h)
}
