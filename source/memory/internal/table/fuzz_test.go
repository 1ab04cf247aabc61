package table

import (
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// FuzzStoreAgainstModel runs the store against maps on operations read
// from the input: each is an opcode byte, a length byte and that many key
// bytes. Keys of every length (inline, and long ones in the arena) meet
// in few homes, so probe runs are long and wrap; a small capacity makes
// eviction part of it, across buckets and counters, which the model
// follows by forgetting whatever the store no longer holds (an evicted
// entry must be gone, not changed). No entry ever expires (time stands
// still), so each entry that went is an eviction of one that had not
// expired, and must be counted as one.
func FuzzStoreAgainstModel(f *testing.F) {
	f.Add([]byte("\x00\x03abc\x01\x03abc\x02\x11aaaaaaaaaaaaaaaaa\x03\x00"))
	f.Add([]byte("\x00\x01a\x00\x01b\x00\x01c\x03\x01a\x00\x01d\x02\x01b"))
	f.Add([]byte("\x00\x14aaaaaaaaaaaaaaaaaaaa\x00\x14bbbbbbbbbbbbbbbbbbbb\x03\x14aaaaaaaaaaaaaaaaaaaa"))
	f.Add([]byte("\x00\x10abcdefghijklmnop\x00\x0fabcdefghijklmno\x00\x08abcdefgh\x03\x08abcdefgh"))
	f.Add([]byte("\x04\x01a\x00\x01a\x04\x01b\x05\x01a\x04\x14aaaaaaaaaaaaaaaaaaaa\x04\x01c\x00\x01d"))
	f.Fuzz(func(t *testing.T, in []byte) {
		const now int64 = 1_000_000_000
		var s Store
		s.Init(12)
		rng := rand.New(rand.NewPCG(uint64(len(in)), 1))
		tats := map[string]int64{}
		counters := map[string]window.Counter{}
		hashOf := func(key string) uint64 {
			h := fnv.New64a()
			h.Write([]byte(key))
			v := h.Sum64()
			// Four homes in all, a table's last four when it has 16
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
			switch op % 6 {
			case 0, 1:
				tat := now + 1 + int64(op)
				s.putTAT(key, h, tat, now)
				tats[key] = tat
			case 2:
				s.putTAT(key, h, now, now)
				delete(tats, key)
			case 3:
				s.Take(key, h, false, now)
				delete(tats, key)
			case 4:
				c := counterExpiring(rng, now/nsPerMs+1+int64(op))
				s.putWindow(key, h, c, now)
				counters[key] = c
			case 5:
				s.Take(key, h, true, now)
				delete(counters, key)
			}
			if s.Len() > s.capacity {
				t.Fatalf("%d entries, capacity %d", s.Len(), s.capacity)
			}
			for _, k := range keys {
				_, tat := s.GetTAT(k, hashOf(k), now)
				want, ok := tats[k]
				switch {
				case tat == gcra.Missing:
					if ok {
						lost++ // evicted
					}
					delete(tats, k) // evicted, or never stored
				case !ok || tat != want:
					t.Fatalf("%q reads %d, model has %d (held %v)", k, tat, want, ok)
				}
				i, c := s.GetWindow(k, hashOf(k), now)
				wantC, ok := counters[k]
				switch {
				case i == None:
					if ok {
						lost++
					}
					delete(counters, k)
				case !ok || c != wantC:
					t.Fatalf("%q reads %+v, model has %+v (held %v)", k, c, wantC, ok)
				}
			}
			// Every entry the model still holds was found above.
			if len(tats) != s.gcra.count || len(counters) != s.windows.count {
				t.Fatalf("tables count %d and %d entries, %d and %d found", s.gcra.count, s.windows.count, len(tats), len(counters))
			}
			if s.evictedNotFull != lost || s.evicted != lost {
				t.Fatalf("%d evictions, %d not full; %d entries went", s.evicted, s.evictedNotFull, lost)
			}
			for _, live := range [][2]int{
				{s.gcra.arenaLive(), len(s.gcra.arena) - s.gcra.deadBytes},
				{s.windows.arenaLive(), len(s.windows.arena) - s.windows.deadBytes},
			} {
				if live[0] != live[1] {
					t.Fatalf("an arena holds %d live bytes, its counts say %d", live[0], live[1])
				}
			}
		}
	})
}
