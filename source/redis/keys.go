package redis

import "strings"

// KeyPrefix starts every key this source writes. The "v1" is the format
// of the key and its value (a decimal TAT, see docs/redis.md): a future
// format gets a new prefix, so both can live in one Redis during a change.
const KeyPrefix = "lim:v1:"

// slotCount is the number of hash slots of a Redis Cluster.
const slotCount = 16384

// keyFor returns the Redis key of a bucket: the prefix, the namespace,
// and the bucket key wrapped in braces. The braces make the bucket key the
// key's hash tag, so a bucket's slot depends on the bucket alone, never on
// the namespace. A bucket key containing '}' ends the tag early: the slot
// is then computed from the part before its first '}', which is still
// deterministic (only keys sharing that part share a slot).
func keyFor(prefix, bucket string) string {
	return prefix + "{" + bucket + "}"
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
