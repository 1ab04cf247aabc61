package boundedtable

// How a key is held without a pointer, by a Keys and by any table with
// slots of its own (the memory source's bucket tables): a tag, the key's
// hash with its low byte replaced by flags and the key's length, and two
// words. The shard or table was chosen by the hash's low bits, so within
// it they say little, and the byte is better spent on the flags.
const (
	// Used marks a tag, so that a word or slot of 0 means empty.
	Used = 1 << 0
	// Bit 1 is left to the holder (the memory source marks pinned
	// slots with it); KeyOf leaves it 0.

	// The six bits from lengthShift up give the length of a key held in
	// its two words (0 to MaxInline), or longKey for a key in an arena.
	lengthShift = 2
	longKey     = 63
	// FlagBits are the bits of a tag that are not hash.
	FlagBits = 0xFF
	// MaxInline is the longest key held in its two words:
	// "<enum>:<id>" with an id of up to 13 characters (account numbers,
	// IPv4 addresses, short domains) needs no other memory.
	MaxInline = 16
)

// KeyOf is how key, whose hash is h, is held: its tag and, for a key of
// up to MaxInline bytes, two words that together with the key's length
// (part of the tag) determine it. A key of 8 to 16 bytes is its first and
// its last 8 bytes, which overlap when it is shorter than 16; a shorter
// key is likewise its first and last 4 bytes, or its first, middle and
// last byte. Loading them takes a few instructions whatever the length,
// where zero-padding a copy takes a loop. A longer key's words are 0: its
// holder keeps it in an arena and puts its offset and length there.
func KeyOf(key string, h uint64) (tag, k0, k1 uint64) {
	n := len(key)
	if n > MaxInline {
		return h&^FlagBits | longKey<<lengthShift | Used, 0, 0
	}
	tag = h&^FlagBits | uint64(n)<<lengthShift | Used
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

// InlineLen returns the length of the key a tag holds in its two words,
// or -1 for a key in an arena.
func InlineLen(tag uint64) int {
	n := int(tag >> lengthShift & longKey)
	if n == longKey {
		return -1
	}
	return n
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

// IsLong reports whether the key of a tag (or of a slot's meta) lives in
// an arena.
func IsLong(meta uint64) bool {
	return meta>>lengthShift&longKey == longKey
}

// RebuildArena is the rebuild of an arena of long keys: when the bytes of
// keys no longer held (dead) are at least 4 KiB and half of arena, it
// returns a new arena holding only the long keys that held visits (each
// entry's meta, the offset k0 of its key, which it moves, and the key's
// length k1), with room for extra more bytes, and 0 dead bytes; otherwise
// arena and dead as they are. The arena thus stays within about twice the
// bytes of the long keys held, and each rebuild is paid for by as many
// bytes of removed keys as it copies.
func RebuildArena(arena []byte, dead, extra int, held func(keep func(meta uint64, k0 *uint64, k1 uint64))) ([]byte, int) {
	if dead < 4096 || dead*2 < len(arena) {
		return arena, dead
	}
	live := len(arena) - dead
	fresh := make([]byte, 0, live+live/4+extra)
	held(func(meta uint64, k0 *uint64, k1 uint64) {
		if IsLong(meta) {
			off := uint64(len(fresh))
			fresh = append(fresh, arena[*k0:*k0+k1]...)
			*k0 = off
		}
	})
	return fresh, 0
}
