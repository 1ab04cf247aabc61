package redis

import (
	"strconv"
	"strings"
)

// KeyPrefix starts every key this source writes in key format v1, one key
// per bucket. The "v1" is the format of the key and its value (a decimal
// TAT, or a window counter; see docs/redis.md): another format gets
// another prefix, so two can live in one Redis during a change.
const KeyPrefix = "lim:v1:"

// GroupedKeyPrefix starts every key this source writes in key format v2,
// where buckets are fields of hashes that many buckets share (Options.Groups).
const GroupedKeyPrefix = "lim:v2:"

// MaxGroups is the most hashes format v2 spreads buckets over: enough for
// ten buckets a hash at 160 million buckets. With more groups than a
// deployment has buckets, most hashes would hold one, and a key per
// bucket (v1) is smaller.
const MaxGroups = 1 << 24

// slotCount is the number of hash slots of a Redis Cluster.
const slotCount = 16384

// keyFormat names buckets in Redis (docs/redis.md, "Key layout").
type keyFormat struct {
	// prefix is KeyPrefix or GroupedKeyPrefix, then the namespace.
	prefix string
	// groups is how many hashes format v2 spreads buckets over; 0 selects
	// format v1.
	groups uint64
}

// name returns what the script is given for a bucket.
//
// In format v1 that is the bucket's key: the prefix, the namespace, and
// the bucket key wrapped in braces. The braces make the bucket key the
// key's hash tag, so a bucket's slot depends on the bucket alone, never on
// the namespace. A bucket key containing '}' ends the tag early: the slot
// is then computed from the part before its first '}', which is still
// deterministic (only keys sharing that part share a slot).
//
// In format v2 it is the key of the bucket's hash (the prefix, the
// namespace and the group number wrapped in braces) followed by the
// field, which is the bucket key itself. The group is the hash tag, so
// the name has the hash's slot; the script splits the name at its first
// '}'.
func (f keyFormat) name(bucket string) string {
	if f.groups == 0 {
		return f.prefix + "{" + bucket + "}"
	}
	return f.grouped(groupOf(bucket, f.groups), "", bucket)
}

// entryName returns what the script is given for a key whose id has
// other keys beside it that one script call must reach together: the rate
// counter of a rate-counter limit, and the bucket of a limit with a
// penalty box (its box entry is boxName). The hash tag is the id, the part
// of the key "<enum>:<id>" after its first ':' (the whole key when it has
// none), so every counter, bucket and box entry of one id shares a slot,
// whatever its limit.
//
// In format v1 that is the prefix, the namespace, the id in braces and
// then the enum: "lim:v1:{alice}101". An id that is empty, or starts with
// '}' (which would leave the braces empty, and Redis would hash the whole
// key) or with '~', is written with a '~' before it, so the tag is never
// empty and no two ids share a name. In format v2 it is the name of the
// hash of the id's group followed by the key itself as the field:
// "lim:v2:{403}101:alice", the group chosen by hashing the id.
func (f keyFormat) entryName(key string) string {
	enum, id := splitKey(key)
	if f.groups == 0 {
		return f.prefix + "{" + escapeID(id) + "}" + enum
	}
	return f.grouped(groupOf(id, f.groups), "", key)
}

// boxName returns what the script is given for the box entry of box (a
// key "<enum>:<id>", as a bucket's): in the slot of the id, beside the
// id's counters and buckets (entryName). In format v1 it is the entry's
// name followed by '!' ("lim:v1:{alice}101!"); in format v2 the field is
// the key after a '!' ("lim:v2:{403}!101:alice"). No bucket key of the
// Limiter starts with '!', and no name of another kind ends with it.
func (f keyFormat) boxName(box string) string {
	if f.groups == 0 {
		return f.entryName(box) + "!"
	}
	_, id := splitKey(box)
	return f.grouped(groupOf(id, f.groups), "!", box)
}

// grouped returns the v2 name of field mark+key in the hash of group.
func (f keyFormat) grouped(group uint64, mark, key string) string {
	var b strings.Builder
	b.Grow(len(f.prefix) + len(mark) + len(key) + 10)
	b.WriteString(f.prefix)
	b.WriteByte('{')
	var digits [20]byte
	b.Write(strconv.AppendUint(digits[:0], group, 10))
	b.WriteByte('}')
	b.WriteString(mark)
	b.WriteString(key)
	return b.String()
}

// splitKey splits a key "<enum>:<id>" at its first ':'. A key without one
// is all id.
func splitKey(key string) (enum, id string) {
	if i := strings.IndexByte(key, ':'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

// escapeID returns the hash tag of an id in format v1: the id itself,
// or the id after a '~' when it is empty or starts with '}' or '~'.
func escapeID(id string) string {
	if id == "" || id[0] == '}' || id[0] == '~' {
		return "~" + id
	}
	return id
}

// split returns the Redis key of a name (entryName, boxName or name) and,
// in format v2, its field.
func (f keyFormat) split(name string) (key, field string) {
	if f.groups == 0 {
		return name, ""
	}
	end := strings.IndexByte(name, '}') + 1
	return name[:end], name[end:]
}

// key returns the Redis key that holds a bucket, and in format v2 the
// bucket's field in it.
func (f keyFormat) key(bucket string) (key, field string) {
	return f.split(f.name(bucket))
}

// groupOf returns the group of a bucket in format v2: the 64-bit FNV-1a
// hash of the bucket key, mixed by MurmurHash3's 64-bit finalizer (so that
// every bit of the key reaches the low bits the remainder keeps), modulo
// groups. Every process sharing a Redis must compute the same group for a
// bucket forever: changing this function changes the format.
func groupOf(bucket string, groups uint64) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(bucket); i++ {
		h ^= uint64(bucket[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h % groups
}

// Slot returns the Redis Cluster hash slot of key, by the cluster's own
// rule: when key holds a '{' followed later by a '}' with at least one
// byte between them, only the bytes between the first '{' and the first
// '}' after it are hashed; otherwise the whole key is. The hash is
// CRC16-CCITT (XMODEM) modulo 16384.
func Slot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return int(crc16(key) % slotCount)
}

// crc16 is CRC16-CCITT in its XMODEM variant (polynomial 0x1021, initial
// value 0, no reflection), the checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
