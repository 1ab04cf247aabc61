package table

// Boxes is one penalty box of the memory source: its entries, each an
// expiry (unix ns), bounded in number. It does no locking; its owner holds
// the lock that guards it.
//
// A min-heap of the entries by expiry gives the entry with the least time
// left, which is the first to expire: every insert first removes the
// entries that have expired (all at the top of the heap), and at its
// capacity evicts the top, the one with the smallest remaining time (of
// several with the same expiry, any one). An entry read after its expiry
// is forgotten on the spot. An entry, its key and its place in the heap
// take 40 bytes in dense slices, plus its word in the key index.
type Boxes struct {
	keys keySet
	exp  []int64
	// at is each entry's place in heap; heap holds entry positions.
	at      []int32
	heap    []int32
	evicted uint64
}

// Len returns how many entries b holds, some of which may have expired
// since they were last touched.
func (b *Boxes) Len() int { return b.keys.Len() }

// Evicted returns how many entries were removed to stay within capacity.
func (b *Boxes) Evicted() uint64 { return b.evicted }

// Get returns the expiry of key's entry, whose hash is h, or 0 when b
// holds none that is in the box at now. An expired entry is forgotten on
// the spot.
func (b *Boxes) Get(key string, h uint64, now int64) int64 {
	p := b.keys.find(key, h)
	if p == None {
		return 0
	}
	if exp := b.exp[p]; exp > now {
		return exp
	}
	b.remove(p)
	return 0
}

// Put stores exp as key's expiry. An expiry not after now removes the
// entry instead. A new entry is inserted within capacity (at least 1): see
// Boxes. Put reports whether it evicted an entry that had not expired.
func (b *Boxes) Put(key string, h uint64, exp, now int64, capacity int) (evicted bool) {
	p := b.keys.find(key, h)
	switch {
	case exp <= now:
		if p != None {
			b.remove(p)
		}
		return false
	case p != None:
		b.exp[p] = exp
		b.fix(int(b.at[p]))
		return false
	}
	evicted = b.makeRoom(now, max(capacity, 1))
	p = b.keys.add(key, h)
	b.exp = append(b.exp, exp)
	b.at = append(b.at, int32(len(b.heap)))
	b.heap = append(b.heap, int32(p))
	b.up(len(b.heap) - 1)
	return evicted
}

// Delete removes key's entry, if b holds one.
func (b *Boxes) Delete(key string, h uint64) {
	if p := b.keys.find(key, h); p != None {
		b.remove(p)
	}
}

// makeRoom removes the expired entries, then evicts the entry with the
// least time left while b holds capacity entries or more.
func (b *Boxes) makeRoom(now int64, capacity int) (evicted bool) {
	for len(b.heap) > 0 && b.exp[b.heap[0]] <= now {
		b.remove(int(b.heap[0]))
	}
	for b.keys.Len() >= capacity {
		b.remove(int(b.heap[0]))
		b.evicted++
		evicted = true
	}
	return evicted
}

// remove drops entry p, moving the last entry into its position.
func (b *Boxes) remove(p int) {
	i := int(b.at[p])
	n := len(b.heap) - 1
	if i != n {
		b.swap(i, n)
	}
	b.heap = shrink(b.heap[:n])
	if i != n {
		b.fix(i)
	}
	last := b.keys.removeAt(p)
	if last != p {
		b.exp[p], b.at[p] = b.exp[last], b.at[last]
		b.heap[b.at[p]] = int32(p)
	}
	b.exp = shrink(b.exp[:last])
	b.at = shrink(b.at[:last])
}

// less reports whether heap place i expires before place j.
func (b *Boxes) less(i, j int) bool { return b.exp[b.heap[i]] < b.exp[b.heap[j]] }

// swap exchanges heap places i and j, keeping at in step.
func (b *Boxes) swap(i, j int) {
	b.heap[i], b.heap[j] = b.heap[j], b.heap[i]
	b.at[b.heap[i]] = int32(i)
	b.at[b.heap[j]] = int32(j)
}

// fix restores the heap order around place i after its expiry changed.
func (b *Boxes) fix(i int) {
	if !b.down(i) {
		b.up(i)
	}
}

func (b *Boxes) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !b.less(i, parent) {
			return
		}
		b.swap(i, parent)
		i = parent
	}
}

// down moves place i toward the leaves and reports whether it moved.
func (b *Boxes) down(i int) bool {
	start := i
	n := len(b.heap)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && b.less(r, l) {
			j = r
		}
		if !b.less(j, i) {
			break
		}
		b.swap(i, j)
		i = j
	}
	return i > start
}
