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

import "strings"

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
	index map[string]int32 // item → its counter, which never moves
	items []Counter
	// heap orders the counters' positions by Count, least first, and at
	// maps a counter to its place in heap: an increment moves int32s,
	// never the map.
	heap  []int32
	at    []int32
	total uint64
}

// New returns an empty sketch of k counters (at least 1). Memory is taken
// as items arrive, up to k counters and the k items' ids.
func New(k int) *Sketch {
	k = max(k, 1)
	return &Sketch{k: k, index: make(map[string]int32)}
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
	return s.items[s.heap[0]].Count
}

// Add counts one occurrence of id. An item already tracked costs no
// allocation; id is copied only when it takes a counter, so the caller may
// pass a string whose memory it reuses.
func (s *Sketch) Add(id string) {
	s.total++
	if i, ok := s.index[id]; ok {
		s.items[i].Count++
		s.down(int(s.at[i]))
		return
	}
	if len(s.items) < s.k {
		id = strings.Clone(id)
		i := int32(len(s.items))
		s.items = append(s.items, Counter{ID: id, Count: 1})
		s.heap = append(s.heap, i)
		s.at = append(s.at, i)
		s.index[id] = i
		s.up(int(i))
		return
	}
	// The least counted item gives its counter up: the new one may have
	// been seen up to that many times before, unnoticed.
	i := s.heap[0]
	least := &s.items[i]
	delete(s.index, least.ID)
	id = strings.Clone(id)
	*least = Counter{ID: id, Count: least.Count + 1, Error: least.Count}
	s.index[id] = i
	s.down(0)
}

// Reset empties the sketch, keeping its memory for reuse.
func (s *Sketch) Reset() {
	clear(s.index)
	clear(s.items) // drop the ids for the collector
	s.items, s.heap, s.at = s.items[:0], s.heap[:0], s.at[:0]
	s.total = 0
}

// Summary returns the sketch's content, sorted as Summary says.
func (s *Sketch) Summary() Summary {
	out := Summary{Counters: make([]Counter, len(s.items)), Floor: s.Floor(), Total: s.total}
	copy(out.Counters, s.items)
	out.sort()
	return out
}

func (s *Sketch) less(i, j int) bool { return s.items[s.heap[i]].Count < s.items[s.heap[j]].Count }

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
