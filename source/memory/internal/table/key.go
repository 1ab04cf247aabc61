package table

// keyOf is how a slot holds key, whose hash is h: its tag (meta without
// the pinned bit) and, for a key of up to maxInline bytes, two words that
// together with the key's length (part of the tag) determine it. A key of
// 8 to 16 bytes is its first and its last 8 bytes, which overlap when it
// is shorter than 16; a shorter key is likewise its first and last 4
// bytes, or its first, middle and last byte. Loading them takes a few
// instructions whatever the length, where zero-padding a copy takes a loop.
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
