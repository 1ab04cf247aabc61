package memory

import (
	"sync"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
)

// none marks the end of a shard's free list, and a key with no slot.
const none int32 = -1

// entry is one stored bucket, or a free slot. Entries live in one slice per
// shard and refer to each other by index, so a bucket costs no pointer for
// the garbage collector to chase other than its key.
type entry struct {
	key  string
	tat  int64
	next int32 // the next free slot, while this one is free
	used bool
	// ref is CLOCK's reference bit: set when the bucket is read, cleared
	// when the eviction hand passes it. Keeping recency in the entry itself
	// means a spend writes only its own entry and its shard's lock, not the
	// neighbours an LRU list relinks: on two or more cores each such write
	// is a cache line the other core must hand over.
	ref bool
}

// shard is one lock's worth of buckets: a map from key to slot, and the
// slots. A shard never holds more than capacity buckets; adding one more
// evicts one that was not read since the hand last passed it (CLOCK, or
// "second chance", a close approximation of least recently used).
type shard struct {
	mu       sync.Mutex
	slots    map[string]int32
	entries  []entry
	hand     int32 // where the eviction sweep goes on from
	sweep    int32 // where the sweep for full buckets goes on from
	free     int32 // first reusable slot, chained through entry.next
	capacity int
	evicted  uint64
	// Pads a shard to 128 bytes, two cache lines, so that two cores
	// working on neighbouring shards never write to the same line.
	// TestShardIsCacheLinePadded keeps it so.
	_ [56]byte
}

func (s *shard) init(capacity int) {
	s.slots = make(map[string]int32)
	s.free = none
	s.capacity = capacity
}

// get returns the slot and TAT stored under key, or none and gcra.Missing.
// A bucket whose TAT is not after now is full, which is what a missing
// bucket means too, so it is forgotten on the spot. The caller holds s.mu.
func (s *shard) get(key string, now int64) (int32, int64) {
	i, ok := s.slots[key]
	if !ok {
		return none, gcra.Missing
	}
	e := &s.entries[i]
	if e.tat <= now {
		s.remove(key, i)
		return none, gcra.Missing
	}
	if !e.ref {
		e.ref = true
	}
	return i, e.tat
}

// put stores tat under key. A TAT that is not after now describes a full
// bucket, so it is removed instead of stored. The caller holds s.mu.
func (s *shard) put(key string, tat, now int64) {
	i, ok := s.slots[key]
	if !ok {
		i = none
	}
	s.putAt(key, i, tat, now)
}

// putAt is put for a key whose slot get returned under the same hold of
// s.mu (none when it had no bucket), saving a second map lookup.
func (s *shard) putAt(key string, i int32, tat, now int64) {
	if tat <= now {
		if i != none {
			s.remove(key, i)
		}
		return
	}
	if i != none {
		s.entries[i].tat = tat
		return
	}
	s.forgetFull(now)
	if len(s.slots) >= s.capacity {
		s.evict(now)
	}
	i = s.alloc()
	s.entries[i] = entry{key: key, tat: tat, used: true}
	s.slots[key] = i
}

// delete removes key and reports whether it held a bucket that was not
// full at now. The caller holds s.mu.
func (s *shard) delete(key string, now int64) bool {
	i, ok := s.slots[key]
	if !ok {
		return false
	}
	notFull := s.entries[i].tat > now
	s.remove(key, i)
	return notFull
}

// forgetFull looks at the next two slots of a sweep that goes round the
// shard and drops the full buckets among them. Called on every insert, it
// visits every slot once per half as many inserts as the shard has slots,
// so a shard holds few full buckets without a background sweeper; the
// capacity bound holds regardless.
func (s *shard) forgetFull(now int64) {
	n := int32(len(s.entries))
	if n == 0 {
		return
	}
	for range 2 {
		if s.sweep >= n {
			s.sweep = 0
		}
		if e := &s.entries[s.sweep]; e.used && e.tat <= now {
			s.remove(e.key, s.sweep)
		}
		s.sweep++
	}
}

// evict frees one slot of a shard that holds capacity buckets. The hand
// goes round the slots: a full bucket goes at once (no answer can tell it
// from a missing one), a bucket read since the hand last passed loses its
// reference bit and stays, and the first bucket without one is evicted.
// Two rounds at most: the first clears every bit it passes.
func (s *shard) evict(now int64) {
	n := int32(len(s.entries))
	for {
		if s.hand >= n {
			s.hand = 0
		}
		i := s.hand
		s.hand++
		e := &s.entries[i]
		switch {
		case !e.used:
		case e.tat <= now:
			s.remove(e.key, i)
			return
		case e.ref:
			e.ref = false
		default:
			s.remove(e.key, i)
			s.evicted++
			return
		}
	}
}

func (s *shard) alloc() int32 {
	if s.free != none {
		i := s.free
		s.free = s.entries[i].next
		return i
	}
	s.entries = append(s.entries, entry{})
	return int32(len(s.entries) - 1)
}

func (s *shard) remove(key string, i int32) {
	delete(s.slots, key)
	s.entries[i] = entry{next: s.free} // drop the key so its memory can go
	s.free = i
}
