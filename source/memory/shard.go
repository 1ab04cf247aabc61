package memory

import (
	"sync"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
)

// none is the position of a key a shard does not hold.
const none = -1

// minTable is the smallest table a shard allocates, in slots.
const minTable = 8

// slot is one position of a shard's table: a bucket, or empty (hash 0).
// The key's hash, the TAT and the key's header share the slot, so finding
// a bucket and reading its TAT touch one slot, and the key's bytes only
// when the hashes match: at a million buckets each of those is a cache
// miss, and a Go map with a slice of entries beside it cost two more.
type slot struct {
	hash uint64 // the key's hash with its lowest bit set; 0 marks an empty slot
	tat  int64
	key  string
	// ref is CLOCK's reference bit: set when the bucket is read, cleared
	// when the eviction hand passes it. Keeping recency in the slot itself
	// means a spend writes only its own slot and its shard's lock, not the
	// neighbours an LRU list relinks: on two or more cores each such write
	// is a cache line the other core must hand over.
	ref bool
}

// shard is one lock's worth of buckets, in an open-addressing table with
// linear probing, at most three quarters full. A shard never holds more
// than capacity buckets; adding one more evicts one that was not read since
// the hand last passed it (CLOCK, or "second chance", a close approximation
// of least recently used).
type shard struct {
	mu       sync.Mutex
	table    []slot // a power of two long, or empty
	count    int
	hand     int // where the eviction sweep goes on from
	sweep    int // where the sweep for full buckets goes on from
	capacity int
	evicted  uint64
	// Pads a shard to 128 bytes, two cache lines, so that two cores
	// working on neighbouring shards never write to the same line.
	// TestShardIsCacheLinePadded keeps it so.
	_ [56]byte
}

func (s *shard) init(capacity int) {
	s.capacity = capacity
}

// home is where a key of hash h starts probing. The shard was chosen by
// the hash's low bits; the table uses its high ones.
func (s *shard) home(h uint64) int {
	return int(h>>32) & (len(s.table) - 1)
}

// find returns the position of key, whose hash is h, or none.
func (s *shard) find(key string, h uint64) int {
	if len(s.table) == 0 {
		return none
	}
	tag := h | 1
	mask := len(s.table) - 1
	for i := s.home(h); ; i = (i + 1) & mask {
		sl := &s.table[i]
		if sl.hash == tag && sl.key == key {
			return i
		}
		if sl.hash == 0 {
			return none
		}
	}
}

// get returns the position and TAT of key, whose hash is h, or none and
// gcra.Missing. A bucket whose TAT is not after now is full, which is what
// a missing bucket means too, so it is forgotten on the spot. The caller
// holds s.mu.
func (s *shard) get(key string, h uint64, now int64) (int, int64) {
	i := s.find(key, h)
	if i == none {
		return none, gcra.Missing
	}
	sl := &s.table[i]
	if sl.tat <= now {
		s.removeAt(i)
		return none, gcra.Missing
	}
	if !sl.ref {
		sl.ref = true
	}
	return i, sl.tat
}

// put stores tat under key, whose hash is h. A TAT that is not after now
// describes a full bucket, so it is removed instead of stored. The caller
// holds s.mu.
func (s *shard) put(key string, h uint64, tat, now int64) {
	s.putAt(key, h, s.find(key, h), tat, now)
}

// putAt is put for a key whose position get returned under the same hold
// of s.mu (none when it had no bucket), saving a second probe.
func (s *shard) putAt(key string, h uint64, i int, tat, now int64) {
	if tat <= now {
		if i != none {
			s.removeAt(i)
		}
		return
	}
	if i != none {
		s.table[i].tat = tat
		return
	}
	s.forgetFull(now)
	if s.count >= s.capacity {
		s.evict(now)
	}
	if (s.count+1)*4 > len(s.table)*3 {
		s.grow()
	}
	s.table[s.firstEmpty(h)] = slot{hash: h | 1, tat: tat, key: key}
	s.count++
}

// firstEmpty is where a new bucket of hash h goes: the first empty slot
// from its home on. The table is never full, so there is one.
func (s *shard) firstEmpty(h uint64) int {
	mask := len(s.table) - 1
	i := s.home(h)
	for s.table[i].hash != 0 {
		i = (i + 1) & mask
	}
	return i
}

// delete removes key, whose hash is h, and reports whether it held a
// bucket that was not full at now. The caller holds s.mu.
func (s *shard) delete(key string, h uint64, now int64) bool {
	i := s.find(key, h)
	if i == none {
		return false
	}
	notFull := s.table[i].tat > now
	s.removeAt(i)
	return notFull
}

// forgetFull looks at the next two positions of a sweep that goes round the
// table and drops the full buckets there. Called on every insert, it
// visits every position once per half as many inserts as the table has
// positions, so a shard holds few full buckets without a background
// sweeper; the capacity bound holds regardless.
func (s *shard) forgetFull(now int64) {
	for range 2 {
		if s.sweep >= len(s.table) {
			s.sweep = 0
			if len(s.table) == 0 {
				return
			}
		}
		if sl := &s.table[s.sweep]; sl.hash != 0 && sl.tat <= now {
			// The bucket shifted into this position by the removal is
			// looked at by a later sweep.
			s.removeAt(s.sweep)
		}
		s.sweep++
	}
}

// evict frees room in a shard that holds capacity buckets. The hand goes
// round the table: a full bucket goes at once (no answer can tell it from
// a missing one), a bucket read since the hand last passed loses its
// reference bit and stays, and the first bucket without one is evicted.
// Two rounds at most: the first clears every bit it passes.
func (s *shard) evict(now int64) {
	for {
		if s.hand >= len(s.table) {
			s.hand = 0
		}
		i := s.hand
		s.hand++
		sl := &s.table[i]
		switch {
		case sl.hash == 0:
		case sl.tat <= now:
			s.removeAt(i)
			return
		case sl.ref:
			sl.ref = false
		default:
			s.removeAt(i)
			s.evicted++
			return
		}
	}
}

// removeAt empties position i and moves later buckets of the same probe
// run back into the gap (backward-shift deletion), so that lookups need no
// tombstones and every run stays unbroken.
func (s *shard) removeAt(i int) {
	mask := len(s.table) - 1
	for j := (i + 1) & mask; s.table[j].hash != 0; j = (j + 1) & mask {
		// The bucket at j may fill the gap at i unless its home lies
		// cyclically in (i, j]: then probing from home reaches j before i.
		home := s.home(s.table[j].hash)
		if (j-home)&mask >= (j-i)&mask {
			s.table[i] = s.table[j]
			i = j
		}
	}
	s.table[i] = slot{} // drops the key so its memory can go
	s.count--
}

// grow doubles the table (or makes the first one) and puts every bucket
// back at its place in the new one.
func (s *shard) grow() {
	old := s.table
	s.table = make([]slot, max(minTable, 2*len(old)))
	for k := range old {
		if old[k].hash != 0 {
			s.table[s.firstEmpty(old[k].hash)] = old[k]
		}
	}
	s.hand, s.sweep = 0, 0
}
