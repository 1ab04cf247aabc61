package boundedtable

// Expiry is a table of entries, each a key, an expiry and a value V, in a
// min-heap by expiry: Min is the entry with the least time left, the
// first to expire, which is the one a full table evicts (of several with
// the same expiry, any one). Its zero value holds nothing.
type Expiry[V any] struct {
	keys Keys
	exp  []int64
	vals []V
	// at is each entry's place in heap; heap holds entry positions.
	at   []int32
	heap []int32
}

// MaxSkip is the most entries MinWhere passes over.
const MaxSkip = 64

// Len returns how many entries e holds.
func (e *Expiry[V]) Len() int { return e.keys.Len() }

// Find returns the position of key, whose hash is h, or None.
func (e *Expiry[V]) Find(key string, h uint64) int { return e.keys.Find(key, h) }

// At returns the value of the entry at position p, to read or change in
// place (until the next Add or Remove).
func (e *Expiry[V]) At(p int) *V { return &e.vals[p] }

// Expires returns the expiry of the entry at position p.
func (e *Expiry[V]) Expires(p int) int64 { return e.exp[p] }

// Add holds key, whose hash is h and which e does not hold, with expiry
// exp and value v, and returns its position.
func (e *Expiry[V]) Add(key string, h uint64, exp int64, v V) int {
	p := e.keys.Add(key, h)
	e.exp = append(e.exp, exp)
	e.vals = append(e.vals, v)
	e.at = append(e.at, int32(len(e.heap)))
	e.heap = append(e.heap, int32(p))
	e.up(len(e.heap) - 1)
	return p
}

// SetExpiry changes the expiry of the entry at position p.
func (e *Expiry[V]) SetExpiry(p int, exp int64) {
	if e.exp[p] == exp {
		return
	}
	e.exp[p] = exp
	e.fix(int(e.at[p]))
}

// Min returns the position of the entry with the least expiry, or None
// when e is empty.
func (e *Expiry[V]) Min() int {
	if len(e.heap) == 0 {
		return None
	}
	return int(e.heap[0])
}

// MinWhere returns the position of the entry with the least expiry of
// those skip does not pass over, or None when there is none, or when it
// would have to pass over more than MaxSkip entries to find it (only the
// entries closer to the heap's top than the one it returns are asked).
func (e *Expiry[V]) MinWhere(skip func(p int) bool) int {
	// The entries skip passes over that are reached from the top through
	// others it passes over form a subtree; the answer is the least of the
	// entries just below it, each the least of its own subtree.
	var stack [2*MaxSkip + 2]int32
	n := 1 // stack[0] is the top, place 0
	best, skipped := None, 0
	for n > 0 {
		n--
		i := int(stack[n])
		if i >= len(e.heap) {
			continue
		}
		p := int(e.heap[i])
		if best != None && e.exp[p] >= e.exp[best] {
			continue // nothing below it expires sooner
		}
		if !skip(p) {
			best = p
			continue
		}
		if skipped++; skipped > MaxSkip {
			return None
		}
		stack[n], stack[n+1] = int32(2*i+2), int32(2*i+1)
		n += 2
	}
	return best
}

// Remove drops the entry at position p, moving the last entry into it.
func (e *Expiry[V]) Remove(p int) {
	i := int(e.at[p])
	n := len(e.heap) - 1
	if i != n {
		e.swap(i, n)
	}
	e.heap = shrink(e.heap[:n])
	if i != n {
		e.fix(i)
	}
	last := e.keys.RemoveAt(p)
	if last != p {
		e.exp[p], e.at[p], e.vals[p] = e.exp[last], e.at[last], e.vals[last]
		e.heap[e.at[p]] = int32(p)
	}
	var zero V
	e.vals[last] = zero
	e.exp = shrink(e.exp[:last])
	e.at = shrink(e.at[:last])
	e.vals = shrink(e.vals[:last])
}

// Footprint returns how many entries e's slices and index have room for:
// what its memory is sized by.
func (e *Expiry[V]) Footprint() (entries, index int) {
	return min(cap(e.exp), cap(e.heap)), len(e.keys.index)
}

// less reports whether heap place i expires before place j.
func (e *Expiry[V]) less(i, j int) bool { return e.exp[e.heap[i]] < e.exp[e.heap[j]] }

// swap exchanges heap places i and j, keeping at in step.
func (e *Expiry[V]) swap(i, j int) {
	e.heap[i], e.heap[j] = e.heap[j], e.heap[i]
	e.at[e.heap[i]] = int32(i)
	e.at[e.heap[j]] = int32(j)
}

// fix restores the heap order around place i after its expiry changed.
func (e *Expiry[V]) fix(i int) {
	if !e.down(i) {
		e.up(i)
	}
}

func (e *Expiry[V]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !e.less(i, parent) {
			return
		}
		e.swap(i, parent)
		i = parent
	}
}

// down moves place i toward the leaves and reports whether it moved.
func (e *Expiry[V]) down(i int) bool {
	start := i
	n := len(e.heap)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && e.less(r, l) {
			j = r
		}
		if !e.less(j, i) {
			break
		}
		e.swap(i, j)
		i = j
	}
	return i > start
}
