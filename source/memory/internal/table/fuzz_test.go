package table

import (
	"hash/fnv"
	"testing"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
)

// FuzzTableAgainstModel runs the table against a map on operations read
// from the input: each is an opcode byte, a length byte and that many key
// bytes. Keys of every length (inline, and long ones in the arena) meet
// in few homes, so probe runs are long and wrap; a small capacity makes
// eviction part of it, which the model follows by forgetting whatever the
// table no longer holds (an evicted bucket must be gone, not changed). No
// bucket is ever full (time stands still), so each bucket that went is an
// eviction of one that was not full, and must be counted as one.
func FuzzTableAgainstModel(f *testing.F) {
	f.Add([]byte("\x00\x03abc\x01\x03abc\x02\x11aaaaaaaaaaaaaaaaa\x03\x00"))
	f.Add([]byte("\x00\x01a\x00\x01b\x00\x01c\x03\x01a\x00\x01d\x02\x01b"))
	f.Add([]byte("\x00\x14aaaaaaaaaaaaaaaaaaaa\x00\x14bbbbbbbbbbbbbbbbbbbb\x03\x14aaaaaaaaaaaaaaaaaaaa"))
	f.Add([]byte("\x00\x10abcdefghijklmnop\x00\x0fabcdefghijklmno\x00\x08abcdefgh\x03\x08abcdefgh"))
	f.Fuzz(func(t *testing.T, in []byte) {
		const now int64 = 1_000
		var s Table
		s.Init(12)
		model := map[string]int64{}
		hashOf := func(key string) uint64 {
			h := fnv.New64a()
			h.Write([]byte(key))
			v := h.Sum64()
			// Four homes in all, the table's last four when it has 16
			// slots (it grows 8, 16 for a capacity of 12).
			return v&^(uint64(0xFFFF_FFFF)<<32) | (0xFFFF_FFFF-v%4<<28)<<32
		}
		var keys []string
		var lost uint64
		for len(in) >= 2 {
			op, n := in[0], int(in[1])
			in = in[2:]
			n = min(n, len(in))
			key := string(in[:n])
			in = in[n:]
			keys = append(keys, key)
			h := hashOf(key)
			switch op % 4 {
			case 0, 1:
				tat := now + 1 + int64(op)
				s.Put(key, h, tat, now)
				model[key] = tat
			case 2:
				s.Put(key, h, now, now)
				delete(model, key)
			case 3:
				s.Delete(key, h, now)
				delete(model, key)
			}
			if s.count > s.capacity {
				t.Fatalf("%d buckets, capacity %d", s.count, s.capacity)
			}
			for _, k := range keys {
				_, tat := s.Get(k, hashOf(k), now)
				want, ok := model[k]
				switch {
				case tat == gcra.Missing:
					if ok {
						lost++ // evicted
					}
					delete(model, k) // evicted, or never stored
				case !ok || tat != want:
					t.Fatalf("%q reads %d, model has %d (held %v)", k, tat, want, ok)
				}
			}
			// Every bucket the model still holds was found above.
			if len(model) != s.count {
				t.Fatalf("table counts %d buckets, %d found", s.count, len(model))
			}
			if s.evictedNotFull != lost || s.evicted != lost {
				t.Fatalf("%d evictions, %d not full; %d buckets went", s.evicted, s.evictedNotFull, lost)
			}
			if live := s.arenaLive(); live != len(s.arena)-s.deadBytes {
				t.Fatalf("arena of %d bytes, %d dead, but %d live", len(s.arena), s.deadBytes, live)
			}
		}
	})
}
