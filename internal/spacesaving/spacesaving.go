// Package spacesaving is the Space-Saving heavy-hitters sketch (Metwally,
// Agrawal and El Abbadi, 2005): k counters that follow the most frequent
// items of a stream of any number of distinct items, in bounded memory.
//
// Every tracked item has a Count that never under-counts it and an Error
// such that Count − Error never over-counts it. An item seen more than
// Total/k times is always tracked. The counters always add up to Total,
// which is what lets a reader list the top items with a guarantee (see
// Merge).
//
// The package is pure: no clock, no locks, no I/O. Callers serialise the
// use of one Sketch.
package spacesaving

import "hash/maphash"

// Counter is one tracked item.
type Counter struct {
	ID string `json:"id"`
	// Count is at least the item's true count.
	Count uint64 `json:"count"`
	// Error bounds the over-count: Count − Error is at most the true
	// count.
	Error uint64 `json:"error"`
}

// Sketch tracks at most k items. The zero value is not usable; make one
// with New.
type Sketch struct {
	k     int
	items []counter
	// index finds an item's counter: an open-addressing table (linear
	// probing) of counter numbers plus one, 0 for a free slot, with at
	// least twice as many slots as counters. A map keyed by the item would
	// need a new string each time a counter passes to another item; this
	// table keeps nothing but numbers.
	index []int32
	seed  maphash.Seed
	// heap orders the counters' positions by count, least first, and at
	// maps a counter to its place in heap: an increment moves int32s,
	// never the index.
	heap  []int32
	at    []int32
	total uint64
}

// counter is one tracked item. Its bytes live in a buffer the counter
// keeps when it passes to another item, so that once the buffers have
// grown to the items' lengths, counting allocates nothing.
type counter struct {
	id    []byte
	hash  uint64
	count uint64
	error uint64
}

// New returns an empty sketch of k counters (at least 1). Its index, two
// int32s a counter, is made at once; the counters and their ids' buffers
// as items arrive, up to k of them, each buffer as long as the longest id
// it has held.
func New(k int) *Sketch {
	k = max(k, 1)
	slots := 2
	for slots < 2*k {
		slots *= 2
	}
	return &Sketch{k: k, index: make([]int32, slots), seed: maphash.MakeSeed()}
}

// Cap is k, the most items the sketch tracks.
func (s *Sketch) Cap() int { return s.k }

// Len is how many items the sketch tracks now.
func (s *Sketch) Len() int { return len(s.items) }

// Total is how many items were added since the sketch was made or reset.
func (s *Sketch) Total() uint64 { return s.total }

// Floor is the most an untracked item may have been seen: the smallest
// count once the k counters are taken, else 0 (an untracked item was then
// never seen).
func (s *Sketch) Floor() uint64 {
	if len(s.items) < s.k {
		return 0
	}
	return s.items[s.heap[0]].count
}

// Add counts one occurrence of id. Its bytes are copied into a counter's
// buffer, so the caller may pass a string whose memory it reuses; once
// the buffers are as long as the ids, Add allocates nothing, whether id
// is tracked or takes a counter.
func (s *Sketch) Add(id string) {
	s.total++
	h := maphash.String(s.seed, id)
	if i := s.find(id, h); i >= 0 {
		s.items[i].count++
		s.down(int(s.at[i]))
		return
	}
	if n := len(s.items); n < s.k {
		if n < cap(s.items) {
			s.items = s.items[:n+1] // a buffer Reset left for reuse
		} else {
			s.items = append(s.items, counter{})
		}
		c := &s.items[n]
		c.id, c.hash, c.count, c.error = append(c.id[:0], id...), h, 1, 0
		s.heap = append(s.heap, int32(n))
		s.at = append(s.at, int32(n))
		s.insert(int32(n))
		s.up(n)
		return
	}
	// The least counted item gives its counter up: the new one may have
	// been seen up to that many times before, unnoticed.
	i := s.heap[0]
	s.remove(i)
	c := &s.items[i]
	c.id, c.hash, c.error = append(c.id[:0], id...), h, c.count
	c.count++
	s.insert(i)
	s.down(0)
}

// find returns the counter of id, whose hash is h, or -1.
func (s *Sketch) find(id string, h uint64) int32 {
	mask := uint64(len(s.index) - 1)
	for p := h & mask; ; p = (p + 1) & mask {
		n := s.index[p]
		if n == 0 {
			return -1
		}
		if c := &s.items[n-1]; c.hash == h && string(c.id) == id {
			return n - 1
		}
	}
}

// insert indexes counter i under its hash, in the first free slot from
// the hash's own.
func (s *Sketch) insert(i int32) {
	mask := uint64(len(s.index) - 1)
	p := s.items[i].hash & mask
	for s.index[p] != 0 {
		p = (p + 1) & mask
	}
	s.index[p] = i + 1
}

// remove takes counter i out of the index. The slots after it in its run
// move back where their own hash allows, so that every indexed counter
// stays reachable from its hash's slot without a free slot in between.
func (s *Sketch) remove(i int32) {
	mask := uint64(len(s.index) - 1)
	hole := s.items[i].hash & mask
	for s.index[hole] != i+1 {
		hole = (hole + 1) & mask
	}
	for q := (hole + 1) & mask; s.index[q] != 0; q = (q + 1) & mask {
		home := s.items[s.index[q]-1].hash & mask
		// The counter at q may fill the hole if its home slot is not
		// between the hole and q: it is then at least as far from home
		// in the hole as it was at q.
		if (q-home)&mask >= (q-hole)&mask {
			s.index[hole] = s.index[q]
			hole = q
		}
	}
	s.index[hole] = 0
}

// Reset empties the sketch, keeping its memory for reuse.
func (s *Sketch) Reset() {
	clear(s.index)
	// the counters' buffers stay, at most k of them, for the next items
	s.items, s.heap, s.at = s.items[:0], s.heap[:0], s.at[:0]
	s.total = 0
}

// Summary returns the sketch's content, sorted as Summary says.
func (s *Sketch) Summary() Summary {
	out := Summary{Counters: make([]Counter, len(s.items)), Floor: s.Floor(), Total: s.total}
	for i, c := range s.items {
		out.Counters[i] = Counter{ID: string(c.id), Count: c.count, Error: c.error}
	}
	out.sort()
	return out
}

func (s *Sketch) less(i, j int) bool { return s.items[s.heap[i]].count < s.items[s.heap[j]].count }

func (s *Sketch) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.at[s.heap[i]] = int32(i)
	s.at[s.heap[j]] = int32(j)
}

func (s *Sketch) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *Sketch) down(i int) {
	n := len(s.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			return
		}
		s.swap(i, m)
		i = m
	}
}
