// Package table is the memory source's hash table: one shard's buckets,
// each a key and its TAT, bounded in number. It does no locking (its
// caller holds the shard's lock) and decides nothing (its caller runs the
// gcra package on the TATs it reads).
//
// The table is open addressing with linear probing, at most three quarters
// full, and holds no pointer: the key's hash, the TAT and the key itself
// share one 32-byte slot (keys longer than 16 bytes live in an arena of
// bytes beside it), so that finding a bucket and reading its TAT touch one
// slot, and the garbage collector never scans the buckets.
//
// A bucket whose TAT is not after now is full, which is also what a
// missing bucket means, so full buckets are forgotten: when read, when
// written full, and by a sweep that each insert moves on. A table at its
// capacity evicts, from a sample of buckets, a full one if any, else the
// one closest to full (see evict).
package table

import "github.com/limiter-dev/limiter/ratelimits/gcra"

// None is the position of a key the table does not hold.
const None = -1

// minTable is the smallest table allocated, in slots.
const minTable = 8

// The low byte of a slot's meta word is not hash: the shard was chosen by
// the hash's low bits, so within a shard they say little (nothing, with
// 256 shards or more), and the byte holds the slot's flags instead.
const (
	// used marks a slot that holds a bucket; an empty slot's meta is 0.
	used = 1 << 0
	// pinned marks a bucket of the batch being applied under the shard's
	// lock, which eviction must not choose: a batch that stores two new
	// buckets in a shard at its bound would otherwise lose the first to
	// make room for the second, after deciding on both. Only batches of
	// more than one op set it, and clear it before they unlock.
	pinned = 1 << 1
	// The six bits from lengthShift up give the length of a key held in
	// the slot itself (0 to maxInline), or longKey for a key in the
	// arena.
	lengthShift = 2
	longKey     = 63
	flagBits    = 0xFF
	// maxInline is the longest key kept in a slot: "<enum>:<id>" with an
	// id of up to 13 characters (account numbers, IPv4 addresses, short
	// domains) needs no other memory.
	maxInline = 16
)

// slot is one position of the table: a bucket, or empty (meta 0). It
// holds no pointer, so the garbage collector never looks inside a table.
// The key's hash, the TAT and the key itself (or, when longer than
// maxInline, where it sits in the arena) share the slot, so finding a
// bucket and reading its TAT touch one slot and nothing else.
type slot struct {
	// meta is the key's hash with its low byte replaced by the flags above.
	meta uint64
	tat  int64
	// k0, k1 are the key itself for a key of up to maxInline bytes (see
	// keyOf); for a longer one, its offset in the arena and its length.
	k0, k1 uint64
}

// Table is one shard's buckets. It never holds more than its capacity;
// adding one more evicts the one of a few whose loss gives least away.
// Its zero value holds nothing; call Init before use.
type Table struct {
	table []slot // grown by doubling up to limit slots, or empty
	// arena holds the keys longer than maxInline, one after another, and
	// deadBytes how many of its bytes belong to keys no longer held. It is
	// rebuilt with only the live keys once those are the minority.
	arena     []byte
	deadBytes int
	count     int
	hand      int // where the next eviction looks first
	sweep     int // where the sweep for full buckets goes on from
	capacity  int
	limit     int // the largest table: capacity buckets at three quarters full
	stride    int // the step of the eviction hand (see evict and strideFor)
	// evicted counts the buckets removed to stay within capacity, and
	// evictedNotFull those of them that were not full: a subscriber's
	// spent tokens given back.
	evicted        uint64
	evictedNotFull uint64
}

// Init sets the most buckets t holds.
func (t *Table) Init(capacity int) {
	t.capacity = capacity
	// The table holds capacity buckets at most three quarters full, and
	// always has an empty slot (which ends every probe).
	t.limit = (capacity*4 + 2) / 3
}

// Capacity returns the most buckets t holds.
func (t *Table) Capacity() int { return t.capacity }

// Len returns how many buckets t holds, some of which may have become
// full since they were last touched.
func (t *Table) Len() int { return t.count }

// Evicted returns how many buckets were removed to stay within capacity.
func (t *Table) Evicted() uint64 { return t.evicted }

// EvictedNotFull returns how many of the evicted buckets were not full.
func (t *Table) EvictedNotFull() uint64 { return t.evictedNotFull }

// Find returns the position of key, whose hash is h, or None.
func (t *Table) Find(key string, h uint64) int {
	if len(t.table) == 0 {
		return None
	}
	tag, k0, k1 := keyOf(key, h)
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

// Get returns the position and TAT of key, whose hash is h, or None and
// gcra.Missing. A bucket whose TAT is not after now is full, which is what
// a missing bucket means too, so it is forgotten on the spot.
func (t *Table) Get(key string, h uint64, now int64) (int, int64) {
	i := t.Find(key, h)
	if i == None {
		return None, gcra.Missing
	}
	sl := &t.table[i]
	if sl.tat <= now {
		t.removeAt(i)
		return None, gcra.Missing
	}
	return i, sl.tat
}

// Put stores tat under key, whose hash is h. A TAT that is not after now
// describes a full bucket, so it is removed instead of stored. It reports
// whether making room evicted a bucket that was not full.
func (t *Table) Put(key string, h uint64, tat, now int64) bool {
	return t.putAt(key, h, t.Find(key, h), tat, now, 0)
}

// PutAt is Put for a key at position i, which Get or Find returned since
// the table last changed (None when it had no bucket), saving a probe.
func (t *Table) PutAt(key string, h uint64, i int, tat, now int64) bool {
	return t.putAt(key, h, i, tat, now, 0)
}

// PutPinnedAt is PutAt for a key of a batch whose buckets are pinned: a
// new bucket is stored pinned too.
func (t *Table) PutPinnedAt(key string, h uint64, i int, tat, now int64) bool {
	return t.putAt(key, h, i, tat, now, pinned)
}

// putAt stores a bucket, giving a new one's meta the flags given (pinned,
// or 0).
func (t *Table) putAt(key string, h uint64, i int, tat, now int64, flags uint64) (evictedNotFull bool) {
	if tat <= now {
		if i != None {
			t.removeAt(i)
		}
		return false
	}
	if i != None {
		t.table[i].tat = tat
		return false
	}
	t.forgetFull(now)
	if t.count >= t.capacity {
		evictedNotFull = t.evict(now)
	}
	if (t.count+1)*4 > len(t.table)*3 {
		t.grow()
	}
	tag, k0, k1 := keyOf(key, h)
	sl := slot{meta: tag | flags, tat: tat, k0: k0, k1: k1}
	if len(key) > maxInline {
		t.compactArena(len(key))
		sl.k0, sl.k1 = uint64(len(t.arena)), uint64(len(key))
		t.arena = append(t.arena, key...)
	}
	t.table[t.firstEmpty(h)] = sl
	t.count++
	return evictedNotFull
}

// Pin marks the bucket at position i (None: no bucket) as one eviction
// must not choose, until Unpin.
func (t *Table) Pin(i int) {
	if i != None {
		t.table[i].meta |= pinned
	}
}

// Unpin lets eviction choose key's bucket again, if it has one.
func (t *Table) Unpin(key string, h uint64) {
	if i := t.Find(key, h); i != None {
		t.table[i].meta &^= pinned
	}
}

// Delete removes key, whose hash is h, and reports whether it held a
// bucket that was not full at now.
func (t *Table) Delete(key string, h uint64, now int64) bool {
	i := t.Find(key, h)
	if i == None {
		return false
	}
	notFull := t.table[i].tat > now
	t.removeAt(i)
	return notFull
}
