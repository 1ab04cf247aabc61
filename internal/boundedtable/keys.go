package boundedtable

// Keys gives each of its keys a dense position, 0 to Len()−1, so that a
// table keeps what it stores per key in plain slices indexed by it, and
// links entries to each other (a recency list, a heap) by int32 positions
// instead of pointers. Removing a key moves the last key into its
// position (RemoveAt says which), so the positions stay dense. Its zero
// value holds nothing.
//
// The index is open addressing with linear probing over uint64 words,
// each the high 32 bits of a key's hash beside its position + 1 (0: an
// empty word), at most three quarters full; a probe compares the hash bits
// first and reads the key only when they match. Keys are held as KeyOf
// says: up to MaxInline bytes in the ident itself, longer ones in an arena
// of bytes. Nothing here holds a pointer.
type Keys struct {
	index []uint64
	ids   []ident
	// arena holds the keys longer than MaxInline, and deadBytes how many
	// of its bytes belong to keys no longer held.
	arena     []byte
	deadBytes int
}

// ident is how a Keys holds one key: KeyOf's tag (the hash with the
// key's length and the used flag in its low byte) and two words, which are
// the key itself, or its offset and length in the arena.
type ident struct {
	meta, k0, k1 uint64
}

// None is the position of a key a table does not hold.
const None = -1

// minIndex is the smallest index allocated, in words.
const minIndex = 8

// minDense is the capacity below which the dense slices are never shrunk.
const minDense = 64

// Len returns how many keys k holds.
func (k *Keys) Len() int { return len(k.ids) }

// home is where a key whose hash is h starts probing (h's high 32 bits,
// scaled to the index's length).
func (k *Keys) home(h uint64) int {
	return int((h >> 32) * uint64(len(k.index)) >> 32)
}

// Find returns the position of key, whose hash is h, or None.
func (k *Keys) Find(key string, h uint64) int {
	if len(k.index) == 0 {
		return None
	}
	tag, k0, k1 := KeyOf(key, h)
	hi := h >> 32
	long := len(key) > MaxInline
	for i := k.home(h); ; {
		w := k.index[i]
		if w == 0 {
			return None
		}
		if w>>32 == hi {
			p := int(uint32(w)) - 1
			id := &k.ids[p]
			if id.meta == tag {
				if !long {
					if id.k0 == k0 && id.k1 == k1 {
						return p
					}
				} else if int(id.k1) == len(key) && string(k.arena[id.k0:id.k0+id.k1]) == key {
					return p
				}
			}
		}
		if i++; i == len(k.index) {
			i = 0
		}
	}
}

// Add holds key, whose hash is h and which k does not hold, at position
// Len() and returns it. The caller appends the key's other data at the
// same position.
func (k *Keys) Add(key string, h uint64) int {
	if (len(k.ids)+1)*4 > len(k.index)*3 {
		k.rebuild(max(minIndex, 2*len(k.index)))
	}
	tag, k0, k1 := KeyOf(key, h)
	if len(key) > MaxInline {
		k.compactArena(len(key))
		k0, k1 = uint64(len(k.arena)), uint64(len(key))
		k.arena = append(k.arena, key...)
	}
	p := len(k.ids)
	k.ids = append(k.ids, ident{meta: tag, k0: k0, k1: k1})
	k.index[k.firstEmpty(h)] = h>>32<<32 | uint64(p+1)
	return p
}

// RemoveAt drops the key at position p and moves the last key into p. It
// returns the position that key had (p itself when p was the last): the
// caller moves its data of that position to p and truncates, as RemoveAt
// does with the keys.
func (k *Keys) RemoveAt(p int) (moved int) {
	id := k.ids[p]
	if IsLong(id.meta) {
		k.deadBytes += int(id.k1)
	}
	k.deleteWord(k.wordOf(id.meta, p))
	last := len(k.ids) - 1
	if p != last {
		k.ids[p] = k.ids[last]
		k.index[k.wordOf(k.ids[p].meta, last)] = k.ids[p].meta>>32<<32 | uint64(p+1)
	}
	k.ids[last] = ident{}
	k.ids = shrink(k.ids[:last])
	if len(k.index) > minIndex && len(k.ids)*8 < len(k.index) {
		k.rebuild(len(k.index) / 2)
	}
	return last
}

// wordOf returns where the index holds position p, whose key's hash (or
// meta) is h.
func (k *Keys) wordOf(h uint64, p int) int {
	want := uint64(p + 1)
	for i := k.home(h); ; {
		if uint64(uint32(k.index[i])) == want {
			return i
		}
		if i++; i == len(k.index) {
			i = 0
		}
	}
}

// firstEmpty returns the first empty word from h's home on. The index is
// never full, so there is one.
func (k *Keys) firstEmpty(h uint64) int {
	i := k.home(h)
	for k.index[i] != 0 {
		if i++; i == len(k.index) {
			i = 0
		}
	}
	return i
}

// deleteWord empties word i and moves later words of the same probe run
// back into the gap (backward-shift deletion), so no tombstone is needed.
func (k *Keys) deleteWord(i int) {
	n := len(k.index)
	distance := func(a, b int) int {
		if d := b - a; d >= 0 {
			return d
		}
		return b - a + n
	}
	for j := i + 1; ; j++ {
		if j == n {
			j = 0
		}
		w := k.index[j]
		if w == 0 {
			break
		}
		if distance(k.home(w), j) >= distance(i, j) {
			k.index[i] = w
			i = j
		}
	}
	k.index[i] = 0
}

// rebuild makes an index of size words and puts every key back in it.
func (k *Keys) rebuild(size int) {
	k.index = make([]uint64, size)
	for p := range k.ids {
		h := k.ids[p].meta
		k.index[k.firstEmpty(h)] = h>>32<<32 | uint64(p+1)
	}
}

// compactArena makes room for a key of extra bytes, rebuilding the arena
// with only the keys still held once the bytes of keys no longer held are
// the majority (and worth a rebuild): see RebuildArena.
func (k *Keys) compactArena(extra int) {
	k.arena, k.deadBytes = RebuildArena(k.arena, k.deadBytes, extra, func(keep func(meta uint64, k0 *uint64, k1 uint64)) {
		for p := range k.ids {
			id := &k.ids[p]
			keep(id.meta, &id.k0, id.k1)
		}
	})
}

// shrink returns s, or a copy of it in a smaller array once it uses less
// than a quarter of its array: the dense slices give memory back as their
// keys are removed, at a cost each copy's removals have paid for.
func shrink[T any](s []T) []T {
	if cap(s) <= minDense || len(s)*4 >= cap(s) {
		return s
	}
	c := make([]T, len(s), 2*len(s))
	copy(c, s)
	return c
}
