package table

import "github.com/limiter-dev/limiter/internal/boundedtable"

// home is where a key whose hash (or meta) is h starts probing. The shard
// was chosen by the hash's low bits; the table uses its high 32, scaled to
// the table's length, which need not be a power of two.
func (t *Table[V]) home(h uint64) int {
	return int((h >> 32) * uint64(len(t.table)) >> 32)
}

// firstEmpty is where a new entry of hash h goes: the first empty slot
// from its home on. The table is never full, so there is one.
func (t *Table[V]) firstEmpty(h uint64) int {
	i := t.home(h)
	for t.table[i].meta != 0 {
		if i++; i == len(t.table) {
			i = 0
		}
	}
	return i
}

// removeAt empties position i and moves later entries of the same probe
// run back into the gap (backward-shift deletion), so that lookups need no
// tombstones and every run stays unbroken.
func (t *Table[V]) removeAt(i int) {
	if sl := &t.table[i]; boundedtable.IsLong(sl.meta) {
		t.deadBytes += int(sl.k1)
	}
	n := len(t.table)
	// distance is how far position b lies after position a, going round.
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
		if t.table[j].meta == 0 {
			break
		}
		// The entry at j may fill the gap at i unless its home lies
		// cyclically in (i, j]: then probing from home reaches j before i.
		if distance(t.home(t.table[j].meta), j) >= distance(i, j) {
			t.table[i] = t.table[j]
			i = j
		}
	}
	t.table[i] = slot[V]{}
	t.count--
}

// grow doubles the table (or makes the first one), up to limit slots, and
// puts every entry back at its place in the new one.
func (t *Table[V]) grow() {
	old := t.table
	t.table = make([]slot[V], min(max(minTable, 2*len(old)), t.limit))
	for k := range old {
		if old[k].meta != 0 {
			t.table[t.firstEmpty(old[k].meta)] = old[k]
		}
	}
	t.hand, t.sweep = 0, 0
	t.stride = strideFor(len(t.table))
}

// compactArena makes room for a key of extra bytes, rebuilding the arena
// with only the keys still held once the bytes of keys no longer held are
// the majority (and worth a rebuild). The arena thus stays within about
// twice the bytes of the long keys held, and each rebuild is paid for by
// as many bytes of removed keys as it copies.
func (t *Table[V]) compactArena(extra int) {
	t.arena, t.deadBytes = boundedtable.RebuildArena(t.arena, t.deadBytes, extra, func(keep func(meta uint64, k0 *uint64, k1 uint64)) {
		for i := range t.table {
			sl := &t.table[i]
			keep(sl.meta, &sl.k0, sl.k1)
		}
	})
}
