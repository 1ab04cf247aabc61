package memory

import (
	"sync"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
)

// none marks the end of a shard's LRU list and of its free list.
const none int32 = -1

// entry is one stored bucket. Entries live in one slice per shard and link
// to each other by index, so a bucket costs no pointer for the garbage
// collector to chase other than its key.
type entry struct {
	key        string
	tat        int64
	prev, next int32 // LRU neighbours: prev is more recently used
}

// shard is one lock's worth of buckets: a map from key to slot, and a list
// of slots from most to least recently used. A shard never holds more than
// capacity buckets; adding one more evicts the least recently used.
type shard struct {
	mu       sync.Mutex
	slots    map[string]int32
	entries  []entry
	head     int32 // most recently used, or none
	tail     int32 // least recently used, or none
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
	s.head, s.tail, s.free = none, none, none
	s.capacity = capacity
}

// get returns the TAT stored under key, or gcra.Missing. A bucket whose TAT
// is not after now is full, which is what a missing bucket means too, so it
// is forgotten on the spot. The caller holds s.mu.
func (s *shard) get(key string, now int64) int64 {
	i, ok := s.slots[key]
	if !ok {
		return gcra.Missing
	}
	if s.entries[i].tat <= now {
		s.remove(key, i)
		return gcra.Missing
	}
	s.touch(i)
	return s.entries[i].tat
}

// put stores tat under key. A TAT that is not after now describes a full
// bucket, so it is removed instead of stored. The caller holds s.mu.
func (s *shard) put(key string, tat, now int64) {
	i, ok := s.slots[key]
	if tat <= now {
		if ok {
			s.remove(key, i)
		}
		return
	}
	if ok {
		s.entries[i].tat = tat
		s.touch(i)
		return
	}
	s.forgetFullTail(now)
	if len(s.slots) >= s.capacity {
		s.remove(s.entries[s.tail].key, s.tail)
		s.evicted++
	}
	i = s.alloc()
	s.entries[i] = entry{key: key, tat: tat, prev: none, next: s.head}
	s.linkFront(i)
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

// forgetFullTail drops up to two full buckets from the cold end of the LRU
// list. Called on every insert, it keeps a shard close to holding only
// buckets that are not full without a background sweeper; the capacity
// bound holds regardless.
func (s *shard) forgetFullTail(now int64) {
	for range 2 {
		if s.tail == none || s.entries[s.tail].tat > now {
			return
		}
		s.remove(s.entries[s.tail].key, s.tail)
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
	s.unlink(i)
	s.entries[i] = entry{next: s.free} // drop the key so its memory can go
	s.free = i
}

// touch moves slot i to the front of the LRU list.
func (s *shard) touch(i int32) {
	if s.head == i {
		return
	}
	s.unlink(i)
	s.entries[i].prev, s.entries[i].next = none, s.head
	s.linkFront(i)
}

// linkFront makes slot i, whose next is already the old head, the head.
func (s *shard) linkFront(i int32) {
	if s.head != none {
		s.entries[s.head].prev = i
	}
	s.head = i
	if s.tail == none {
		s.tail = i
	}
}

func (s *shard) unlink(i int32) {
	e := &s.entries[i]
	if e.prev != none {
		s.entries[e.prev].next = e.next
	} else {
		s.head = e.next
	}
	if e.next != none {
		s.entries[e.next].prev = e.prev
	} else {
		s.tail = e.prev
	}
}
