package memory

import (
	"sync"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
)

// none is the position of a key a shard does not hold.
const none = -1

// minTable is the smallest table a shard allocates, in slots.
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
	// shard's arena.
	lengthShift = 2
	longKey     = 63
	flagBits    = 0xFF
	// maxInline is the longest key kept in a slot: "<enum>:<id>" with an
	// id of up to 13 characters (account numbers, IPv4 addresses, short
	// domains) needs no other memory.
	maxInline = 16
)

// slot is one position of a shard's table: a bucket, or empty (meta 0).
// It holds no pointer, so the garbage collector never looks inside a
// table: at a million buckets, a table of Go strings cost every collection
// about 30 ms of marking. The key's hash, the TAT and the key itself (or,
// when longer than maxInline, where it sits in the shard's arena) share
// the slot, so finding a bucket and reading its TAT touch one slot and
// nothing else; at a million buckets that is one wait for memory.
type slot struct {
	// meta is the key's hash with its low byte replaced by the flags above.
	meta uint64
	tat  int64
	// k0, k1 are the key itself for a key of up to maxInline bytes (see
	// keyOf); for a longer one, its offset in the arena and its length.
	k0, k1 uint64
}

// shard is one lock's worth of buckets, in an open-addressing table with
// linear probing, at most three quarters full. A shard never holds more
// than capacity buckets; adding one more evicts the one of a few whose
// loss gives least away (see evict).
type shard struct {
	mu    sync.Mutex
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
	// The fields fill 128 bytes, two cache lines, so that two cores
	// working on neighbouring shards never write to the same line; a field
	// more needs padding to 192. TestShardIsCacheLinePadded keeps it so.
}

func (s *shard) init(capacity int) {
	s.capacity = capacity
	// The table holds capacity buckets at most three quarters full, and
	// always has an empty slot (which ends every probe).
	s.limit = (capacity*4 + 2) / 3
}

// keyOf is how a slot holds key, whose hash is h: its tag (meta without
// the pinned bit) and, for a key of up to maxInline bytes, two words that
// together with the key's length (part of the tag) determine it. A key of
// 8 to 16 bytes is its first and its last 8 bytes, which overlap when it
// is shorter than 16; a shorter key is likewise its first and last 4
// bytes, or its first, middle and last byte. Loading them takes a few
// instructions whatever the length, where zero-padding a copy took a loop.
func keyOf(key string, h uint64) (tag, k0, k1 uint64) {
	n := len(key)
	if n > maxInline {
		return h&^flagBits | longKey<<lengthShift | used, 0, 0
	}
	tag = h&^flagBits | uint64(n)<<lengthShift | used
	switch {
	case n >= 8:
		return tag, word(key), word(key[n-8:])
	case n >= 4:
		return tag, uint64(half(key)) | uint64(half(key[n-4:]))<<32, 0
	case n > 0:
		return tag, uint64(key[0]) | uint64(key[n/2])<<8 | uint64(key[n-1])<<16, 0
	}
	return tag, 0, 0
}

// word is the first 8 bytes of s, little-endian (one load: the compiler
// combines the byte reads).
func word(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// half is the first 4 bytes of s, little-endian.
func half(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// isLong reports whether a slot's (or tag's) key lives in the arena.
func isLong(meta uint64) bool {
	return meta>>lengthShift&longKey == longKey
}

// home is where a key whose hash (or meta) is h starts probing. The shard
// was chosen by the hash's low bits; the table uses its high 32, scaled to
// the table's length, which need not be a power of two.
func (s *shard) home(h uint64) int {
	return int((h >> 32) * uint64(len(s.table)) >> 32)
}

// find returns the position of key, whose hash is h, or none.
func (s *shard) find(key string, h uint64) int {
	if len(s.table) == 0 {
		return none
	}
	tag, k0, k1 := keyOf(key, h)
	long := len(key) > maxInline
	for i := s.home(h); ; {
		sl := &s.table[i]
		if sl.meta&^pinned == tag {
			if !long {
				if sl.k0 == k0 && sl.k1 == k1 {
					return i
				}
			} else if int(sl.k1) == len(key) && string(s.arena[sl.k0:sl.k0+sl.k1]) == key {
				return i
			}
		}
		if sl.meta == 0 {
			return none
		}
		if i++; i == len(s.table) {
			i = 0
		}
	}
}

// get returns the position and TAT of key, whose hash is h, or none and
// gcra.Missing. A bucket whose TAT is not after now is full, which is what
// a missing bucket means too, so it is forgotten on the spot. The caller
// holds s.mu.
func (s *shard) get(key string, h uint64, now int64) (int, int64) {
	i := s.find(key, h)
	if i == none {
		return none, gcra.Missing
	}
	sl := &s.table[i]
	if sl.tat <= now {
		s.removeAt(i)
		return none, gcra.Missing
	}
	return i, sl.tat
}

// put stores tat under key, whose hash is h. A TAT that is not after now
// describes a full bucket, so it is removed instead of stored. It reports
// whether making room evicted a bucket that was not full. The caller holds
// s.mu.
func (s *shard) put(key string, h uint64, tat, now int64) bool {
	return s.putAt(key, h, s.find(key, h), tat, now, 0)
}

// putAt is put for a key whose position get returned under the same hold
// of s.mu (none when it had no bucket), saving a second probe. A new
// bucket's meta gets flags too (pinned, or 0).
func (s *shard) putAt(key string, h uint64, i int, tat, now int64, flags uint64) (evictedNotFull bool) {
	if tat <= now {
		if i != none {
			s.removeAt(i)
		}
		return false
	}
	if i != none {
		s.table[i].tat = tat
		return false
	}
	s.forgetFull(now)
	if s.count >= s.capacity {
		evictedNotFull = s.evict(now)
	}
	if (s.count+1)*4 > len(s.table)*3 {
		s.grow()
	}
	tag, k0, k1 := keyOf(key, h)
	sl := slot{meta: tag | flags, tat: tat, k0: k0, k1: k1}
	if len(key) > maxInline {
		s.compactArena(len(key))
		sl.k0, sl.k1 = uint64(len(s.arena)), uint64(len(key))
		s.arena = append(s.arena, key...)
	}
	s.table[s.firstEmpty(h)] = sl
	s.count++
	return evictedNotFull
}

// pin marks the bucket at position i (none: no bucket) as one eviction
// must not choose, until unpin.
func (s *shard) pin(i int) {
	if i != none {
		s.table[i].meta |= pinned
	}
}

// unpin lets eviction choose key's bucket again, if it has one.
func (s *shard) unpin(key string, h uint64) {
	if i := s.find(key, h); i != none {
		s.table[i].meta &^= pinned
	}
}

// firstEmpty is where a new bucket of hash h goes: the first empty slot
// from its home on. The table is never full, so there is one.
func (s *shard) firstEmpty(h uint64) int {
	i := s.home(h)
	for s.table[i].meta != 0 {
		if i++; i == len(s.table) {
			i = 0
		}
	}
	return i
}

// delete removes key, whose hash is h, and reports whether it held a
// bucket that was not full at now. The caller holds s.mu.
func (s *shard) delete(key string, h uint64, now int64) bool {
	i := s.find(key, h)
	if i == none {
		return false
	}
	notFull := s.table[i].tat > now
	s.removeAt(i)
	return notFull
}

// forgetFull looks at the next two positions of a sweep that goes round the
// table and drops the full buckets there. Called on every insert, it
// visits every position once per half as many inserts as the table has
// positions, so a shard holds few full buckets without a background
// sweeper; the capacity bound holds regardless.
func (s *shard) forgetFull(now int64) {
	for range 2 {
		if s.sweep >= len(s.table) {
			s.sweep = 0
			if len(s.table) == 0 {
				return
			}
		}
		if sl := &s.table[s.sweep]; sl.meta != 0 && sl.tat <= now {
			// The bucket shifted into this position by the removal is
			// looked at by a later sweep.
			s.removeAt(s.sweep)
		}
		s.sweep++
	}
}

// evictSample is how many buckets eviction compares. The more it
// compares, the closer its choice comes to the bucket with the least state
// in the whole shard; eight found one in the least-filled eighth about
// two times in three (1 - (7/8)^8), at a cost that stays within a few
// adjacent cache lines.
const evictSample = 8

// evict frees room in a shard that holds capacity buckets, and reports
// whether the bucket it removed was not full. It looks at the buckets in
// the slots from the hand on until it has seen evictSample of them (about
// eleven slots, the table being three quarters full), and removes the
// first full one among them, whose loss no answer can tell, or else the
// one closest to full: the earliest TAT, the least time to refill, so the
// least an evicted subscriber gains. To push out a subscriber who spent a
// whole burst, new buckets must thus each hold more than that subscriber
// does; a flood of cheap spends on fresh ids evicts its own buckets.
//
// Recency plays no part. For subscribers of one limit the earliest TAT is
// the bucket spent on longest ago (it has refilled most), which is what
// least-recently-used eviction chose; across limits, least state lost is
// the better measure, and a read need not write to its slot.
//
// A pinned bucket is passed over, unless every bucket of the shard is
// pinned (a batch with more keys in the shard than its capacity): the
// bound holds even then.
//
// Where it looks matters to the table as much as what it chooses. The
// sampled slots are adjacent, so memory serves them in a few lines, but
// the hand then moves on by stride, not past them: a full shard evicts one
// bucket per insert, and evicting slot after slot emptied one stretch of
// the table while new buckets landed all over it, so the rest packed into
// runs that made lookups read dozens of slots. And the sample starts at
// the first bucket the hand reaches, not at the slot after an empty one:
// starting wherever the hand stood favoured the buckets just after empty
// slots, so evictions emptied the sparse parts of the table while inserts
// went to the ends of its long runs, and lookups read twice as many slots
// (TestChurnKeepsProbesShort). From a bucket, each bucket is in the sample
// of as many starts as any other. Among equal TATs the first is chosen,
// which is the bucket the hand reached.
func (s *shard) evict(now int64) (notFull bool) {
	n := len(s.table)
	if s.hand >= n {
		s.hand = 0
	}
	for s.table[s.hand].meta == 0 {
		s.hand = s.step(s.hand)
	}
	i := s.hand
	s.hand = s.step(s.hand)
	best, fallback := none, none
	var bestTAT, fallbackTAT int64
	for seen, k := 0, 0; seen < evictSample && k < n; k++ {
		sl := &s.table[i]
		switch {
		case sl.meta == 0:
		case sl.meta&pinned != 0:
			// Never full: get removes a full bucket before it is
			// pinned, and put removes one written full.
			if fallback == none || sl.tat < fallbackTAT {
				fallback, fallbackTAT = i, sl.tat
			}
		case sl.tat <= now:
			s.removeAt(i)
			s.evicted++
			return false
		default:
			if best == none || sl.tat < bestTAT {
				best, bestTAT = i, sl.tat
			}
			seen++
		}
		if i++; i == n {
			i = 0
		}
	}
	if best == none {
		best = fallback
	}
	s.removeAt(best)
	s.evicted++
	s.evictedNotFull++
	return true
}

// removeAt empties position i and moves later buckets of the same probe
// run back into the gap (backward-shift deletion), so that lookups need no
// tombstones and every run stays unbroken.
func (s *shard) removeAt(i int) {
	if sl := &s.table[i]; isLong(sl.meta) {
		s.deadBytes += int(sl.k1)
	}
	n := len(s.table)
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
		if s.table[j].meta == 0 {
			break
		}
		// The bucket at j may fill the gap at i unless its home lies
		// cyclically in (i, j]: then probing from home reaches j before i.
		if distance(s.home(s.table[j].meta), j) >= distance(i, j) {
			s.table[i] = s.table[j]
			i = j
		}
	}
	s.table[i] = slot{}
	s.count--
}

// grow doubles the table (or makes the first one), up to limit slots, and
// puts every bucket back at its place in the new one.
func (s *shard) grow() {
	old := s.table
	s.table = make([]slot, min(max(minTable, 2*len(old)), s.limit))
	for k := range old {
		if old[k].meta != 0 {
			s.table[s.firstEmpty(old[k].meta)] = old[k]
		}
	}
	s.hand, s.sweep = 0, 0
	s.stride = strideFor(len(s.table))
}

// step is the position after i in the order the eviction hand goes round
// the table.
func (s *shard) step(i int) int {
	if i += s.stride; i >= len(s.table) {
		i -= len(s.table)
	}
	return i
}

// strideFor returns a step near 0.618 of n that shares no factor with n, so
// that stepping by it from any position visits all n positions before it
// comes back.
func strideFor(n int) int {
	if n <= 2 {
		return 1
	}
	stride := n * 618 / 1000
	for gcd(stride, n) != 1 {
		stride++
	}
	return stride
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// compactArena makes room for a key of extra bytes, rebuilding the arena
// with only the keys still held once the bytes of keys no longer held are
// the majority (and worth a rebuild). The arena thus stays within about
// twice the bytes of the long keys held, and each rebuild is paid for by
// as many bytes of removed keys as it copies.
func (s *shard) compactArena(extra int) {
	if s.deadBytes < 4096 || s.deadBytes*2 < len(s.arena) {
		return
	}
	live := len(s.arena) - s.deadBytes
	arena := make([]byte, 0, live+live/4+extra)
	for i := range s.table {
		sl := &s.table[i]
		if isLong(sl.meta) {
			off := uint64(len(arena))
			arena = append(arena, s.arena[sl.k0:sl.k0+sl.k1]...)
			sl.k0 = off
		}
	}
	s.arena, s.deadBytes = arena, 0
}
