// Package table is the memory source's hash tables: one shard's GCRA
// buckets and window counters, each a key and what is stored under it,
// bounded in number together. It does no locking (its caller holds the
// shard's lock) and decides nothing (its caller runs the bucket package on
// the states it reads).
//
// A Table is open addressing with linear probing, at most three quarters
// full, and holds no pointer: the key's hash, the entry's expiry, its value
// and the key itself share one slot (keys longer than 16 bytes live in an
// arena of bytes beside it), so that finding an entry and reading it touch
// one slot, and the garbage collector never scans the entries. A GCRA
// bucket's slot is 32 bytes (its TAT is its expiry and it has no other
// value); a window counter's is 56.
//
// Every entry has an expiry: the instant from which it counts nothing in
// any decision, which is also what a missing entry means. A GCRA bucket
// expires at its TAT, when it is full again; a window counter when its
// last window with hits stops being read (window.Counter.Expires). Expired
// entries are forgotten: when read, when written expired, and by a sweep
// that each insert moves on. A Store at its capacity evicts, from a sample
// of each table, an expired entry if any, else the one closest to expiring
// (see Store.evict).
//
// Rates and Boxes hold one limit name's rate counters and penalty box
// entries, bounded per name. Their entries live in a boundedtable's dense
// slices, linked by int32 positions into a recency list or a heap, so that
// eviction takes exactly the entry the rules name (the least recently
// incremented counter, the box entry with the least time left) in O(1) or
// O(log n), without pointers.
package table

import "github.com/limiter-dev/limiter/internal/boundedtable"

// None is the position of a key a table does not hold.
const None = boundedtable.None

// minTable is the smallest table allocated, in slots.
const minTable = 8

// A slot's meta word is its key's tag (boundedtable.KeyOf: the hash with
// flags and the key's length in its low byte) with the pinned flag.
const (
	// used marks a slot that holds an entry; an empty slot's meta is 0.
	used = boundedtable.Used
	// pinned marks an entry of the batch being applied under the shard's
	// lock, which eviction must not choose: a batch that stores two new
	// entries in a shard at its bound would otherwise lose the first to
	// make room for the second, after deciding on both. Only batches of
	// more than one op set it, and clear it before they unlock.
	pinned = 1 << 1
	// maxInline is the longest key kept in a slot itself.
	maxInline = boundedtable.MaxInline
)

// slot is one position of a table: an entry, or empty (meta 0). It holds
// no pointer (V must hold none either), so the garbage collector never
// looks inside a table. The key's hash, the expiry, the value and the key
// itself (or, when longer than maxInline, where it sits in the arena)
// share the slot, so finding an entry and reading it touch one slot and
// nothing else. With V = none the slot is 32 bytes: a field of size
// zero takes no room when another field follows it.
type slot[V any] struct {
	// meta is the key's hash with its low byte replaced by the flags above.
	meta uint64
	// exp is when the entry stops counting, in its table's unit of time:
	// an entry with exp <= now is as good as missing.
	exp int64
	val V
	// k0, k1 are the key itself for a key of up to maxInline bytes (see
	// boundedtable.KeyOf); for a longer one, its offset in the arena and its length.
	k0, k1 uint64
}

// value is what a table keeps beside each entry's expiry.
type value interface {
	// hits is how much the entry holds, compared only between entries
	// that expire at the same instant: eviction takes the one with fewer.
	hits() int64
}

// none is a GCRA bucket's value: its TAT, the slot's expiry, is all of it.
type none struct{}

func (none) hits() int64 { return 0 }

// Table is one kind of entry of a shard, each a key, an expiry and a value
// V. It has no bound of its own: the Store that holds it makes room
// before an insert. Its zero value holds nothing; the Store initialises
// it.
type Table[V value] struct {
	table []slot[V] // grown by doubling up to limit slots, or empty
	// arena holds the keys longer than maxInline, one after another, and
	// deadBytes how many of its bytes belong to keys no longer held. It is
	// rebuilt with only the live keys once those are the minority.
	arena     []byte
	deadBytes int
	count     int
	hand      int // where the next eviction sample looks first
	sweep     int // where the sweep for expired entries goes on from
	limit     int // the largest table: the shard's capacity at three quarters full
	stride    int // the step of the eviction hand (see candidate and strideFor)
}

// init makes t able to hold capacity entries.
func (t *Table[V]) init(capacity int) {
	// The table holds capacity entries at most three quarters full, and
	// always has an empty slot (which ends every probe).
	t.limit = (capacity*4 + 2) / 3
}

// Len returns how many entries t holds, some of which may have expired
// since they were last touched.
func (t *Table[V]) Len() int { return t.count }

// Find returns the position of key, whose hash is h, or None.
func (t *Table[V]) Find(key string, h uint64) int {
	if len(t.table) == 0 {
		return None
	}
	tag, k0, k1 := boundedtable.KeyOf(key, h)
	long := len(key) > maxInline
	for i := t.home(h); ; {
		sl := &t.table[i]
		if sl.meta&^pinned == tag {
			if !long {
				if sl.k0 == k0 && sl.k1 == k1 {
					return i
				}
			} else if int(sl.k1) == len(key) && string(t.arena[sl.k0:sl.k0+sl.k1]) == key {
				return i
			}
		}
		if sl.meta == 0 {
			return None
		}
		if i++; i == len(t.table) {
			i = 0
		}
	}
}

// get returns the position, expiry and value of key, whose hash is h, or
// None. An entry that has expired at now counts nothing, which is what a
// missing one means too, so it is forgotten on the spot.
func (t *Table[V]) get(key string, h uint64, now int64) (i int, exp int64, v V) {
	i = t.Find(key, h)
	if i == None {
		return None, 0, v
	}
	sl := &t.table[i]
	if sl.exp <= now {
		t.removeAt(i)
		return None, 0, v
	}
	return i, sl.exp, sl.val
}

// insert stores a new entry, which the table does not hold, with the
// flags given (pinned, or 0). The Store has made room for it.
func (t *Table[V]) insert(key string, h uint64, exp int64, v V, flags uint64) {
	if (t.count+1)*4 > len(t.table)*3 {
		t.grow()
	}
	tag, k0, k1 := boundedtable.KeyOf(key, h)
	sl := slot[V]{meta: tag | flags, exp: exp, val: v, k0: k0, k1: k1}
	if len(key) > maxInline {
		t.compactArena(len(key))
		sl.k0, sl.k1 = uint64(len(t.arena)), uint64(len(key))
		t.arena = append(t.arena, key...)
	}
	t.table[t.firstEmpty(h)] = sl
	t.count++
}
