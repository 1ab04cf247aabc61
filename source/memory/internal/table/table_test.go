package table

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
)

// The table against a plain map, under random puts, reads, refunds to
// full and deletes, with hashes made to collide: 40 keys share one home, so
// probe runs are long, wrap round the end of the table and are cut in the
// middle by deletes. After every step each key the model holds must be
// found with its TAT, and no other.
func TestTableAgainstModel(t *testing.T) {
	const now int64 = 1_000
	rebuilds := 0
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var s Table
		s.Init(1 << 20) // no eviction here: the model cannot predict it
		keys := make([]string, 40)
		hashes := make([]uint64, len(keys))
		for i := range keys {
			// Keys of every kind the slot knows: empty, short, exactly as
			// long as a slot holds, one byte longer, and long ones that
			// live in the arena (and are rewritten when it is rebuilt).
			keys[i] = fmt.Sprintf("k%d", i)
			switch i % 5 {
			case 1:
				keys[i] = fmt.Sprintf("%016d", i)[:maxInline]
			case 2:
				keys[i] = fmt.Sprintf("%017d", i)
			case 3:
				keys[i] = fmt.Sprintf("%d:%s", i, strings.Repeat("long.example.", 1+i%7))
			}
			if i == 0 {
				keys[i] = ""
			}
			// The table's last home, whatever its size (a key's home is
			// the hash's high 32 bits scaled to the table's length), so
			// that runs wrap round its end; and hashes that differ only in the
			// low byte, which the slot's flags replace, so tags collide
			// and the keys themselves must tell the buckets apart.
			hashes[i] = uint64(0xFFFF_FFFF-rng.IntN(4))<<32 | uint64(i)<<1
		}
		model := map[string]int64{}
		for step := range 6000 {
			k := rng.IntN(len(keys))
			key, h := keys[k], hashes[k]
			arena := len(s.arena)
			switch rng.IntN(4) {
			case 0, 1: // store a TAT after now
				tat := now + 1 + rng.Int64N(100)
				s.Put(key, h, tat, now)
				model[key] = tat
			case 2: // store a full bucket: removes
				s.Put(key, h, now, now)
				delete(model, key)
			case 3:
				_, had := model[key]
				if got := s.Delete(key, h, now); got != had {
					t.Fatalf("seed %d step %d: delete(%s) = %v, want %v", seed, step, key, got, had)
				}
				delete(model, key)
			}
			if s.count != len(model) {
				t.Fatalf("seed %d step %d: count %d, model holds %d", seed, step, s.count, len(model))
			}
			if len(s.arena) < arena {
				rebuilds++
			}
			if live := s.arenaLive(); live != len(s.arena)-s.deadBytes {
				t.Fatalf("seed %d step %d: arena of %d bytes, %d dead, but %d live", seed, step, len(s.arena), s.deadBytes, live)
			}
			for i, key := range keys {
				_, tat := s.Get(key, hashes[i], now)
				want, ok := model[key]
				if !ok {
					want = gcra.Missing
				}
				if tat != want {
					t.Fatalf("seed %d step %d: %s reads %d, want %d", seed, step, key, tat, want)
				}
			}
		}
	}
	if rebuilds == 0 {
		t.Fatal("no arena rebuild happened: the model did not cover it")
	}
	t.Logf("%d arena rebuilds", rebuilds)
}

// A bound far below the keys that arrive is held exactly, through growth
// of the table and eviction, with every held key still found.
func TestTableHoldsItsCapacity(t *testing.T) {
	const now int64 = 1_000
	var s Table
	s.Init(100)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		key := fmt.Sprint(i)
		h := rng.Uint64()
		s.Put(key, h, now+10, now)
		if s.count > 100 {
			t.Fatalf("after %d inserts: %d buckets, bound 100", i+1, s.count)
		}
		if p := s.Find(key, h); p == None {
			t.Fatalf("insert %d: the new key is not found", i)
		}
	}
	if s.count != 100 || s.evicted != 4900 {
		t.Fatalf("count %d, evicted %d; want 100 and 4900", s.count, s.evicted)
	}
	held := 0
	for i := range s.table {
		if s.table[i].meta != 0 {
			held++
			if key := s.keyAt(i); s.Find(key, s.table[i].meta) != i {
				t.Fatalf("%s at %d is not found there", key, i)
			}
		}
	}
	if held != 100 {
		t.Fatalf("%d slots in use, count says 100", held)
	}
}

// keyAt returns the key of the bucket at position i, undoing keyOf.
func (s *Table) keyAt(i int) string {
	sl := &s.table[i]
	n := int(sl.meta >> lengthShift & longKey)
	if n == longKey {
		return string(s.arena[sl.k0 : sl.k0+sl.k1])
	}
	b := make([]byte, 8+n)
	switch {
	case n >= 8:
		binary.LittleEndian.PutUint64(b[n-8:], sl.k1)
		binary.LittleEndian.PutUint64(b, sl.k0)
	case n >= 4:
		binary.LittleEndian.PutUint32(b[n-4:], uint32(sl.k0>>32))
		binary.LittleEndian.PutUint32(b, uint32(sl.k0))
	case n > 0:
		b[n-1], b[n/2], b[0] = byte(sl.k0>>16), byte(sl.k0>>8), byte(sl.k0)
	}
	return string(b[:n])
}

// arenaLive counts the arena bytes of the long keys the table holds.
func (s *Table) arenaLive() int {
	n := 0
	for i := range s.table {
		if sl := &s.table[i]; isLong(sl.meta) {
			n += int(sl.k1)
		}
	}
	return n
}

// The arena of long keys stays within a small multiple of the bytes of the
// keys held, however many long keys come and go, and every key held is
// found after each rebuild.
func TestArenaStaysBounded(t *testing.T) {
	const now int64 = 1_000
	var s Table
	s.Init(200)
	rng := rand.New(rand.NewPCG(3, 4))
	rebuilt := 0
	for i := range 50_000 {
		key := fmt.Sprintf("8:%d.%s", i, strings.Repeat("x", rng.IntN(60)))
		before := len(s.arena)
		s.Put(key, rng.Uint64(), now+10, now)
		if len(s.arena) < before {
			rebuilt++
			for j := range s.table {
				if s.table[j].meta != 0 && s.Find(s.keyAt(j), s.table[j].meta) != j {
					t.Fatalf("after a rebuild at insert %d, %q at %d is not found there", i, s.keyAt(j), j)
				}
			}
		}
		if live := s.arenaLive(); len(s.arena) > 2*live+4096+len(key) {
			t.Fatalf("insert %d: arena of %d bytes holds %d live", i, len(s.arena), live)
		}
	}
	if rebuilt == 0 {
		t.Fatal("the arena was never rebuilt")
	}
	if s.count != 200 {
		t.Fatalf("count %d, want 200", s.count)
	}
}

// A table grows by doubling, but never past what its capacity needs at
// three quarters full, and always keeps an empty slot.
func TestTableStopsAtItsLimit(t *testing.T) {
	const now int64 = 1_000
	for _, capacity := range []int{1, 2, 3, 5, 100, 3906, 4096} {
		var s Table
		s.Init(capacity)
		rng := rand.New(rand.NewPCG(5, uint64(capacity)))
		for i := range 3 * capacity {
			s.Put(fmt.Sprint(i), rng.Uint64(), now+10, now)
			if s.count*4 > len(s.table)*3 || s.count >= len(s.table) {
				t.Fatalf("capacity %d, insert %d: %d buckets in %d slots", capacity, i, s.count, len(s.table))
			}
		}
		if s.count != capacity || len(s.table) != s.limit || s.limit*3 < capacity*4 || (s.limit-1)*3 >= capacity*4 {
			t.Fatalf("capacity %d: %d buckets, table %d, limit %d", capacity, s.count, len(s.table), s.limit)
		}
	}
}

// keyOf tells every two keys of the same length apart (its two words
// determine the key), and keyAt gets the key back, at every length a slot
// holds. Keys over a two-letter alphabet make near-misses common.
func TestKeyOfDeterminesTheKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for n := 0; n <= maxInline; n++ {
		seen := map[[2]uint64]string{}
		var s Table
		s.Init(4096)
		for range 2000 {
			b := make([]byte, n)
			for i := range b {
				b[i] = "ab"[rng.IntN(2)]
			}
			key := string(b)
			_, k0, k1 := keyOf(key, 0)
			if other, ok := seen[[2]uint64{k0, k1}]; ok && other != key {
				t.Fatalf("length %d: %q and %q are held alike", n, key, other)
			}
			seen[[2]uint64{k0, k1}] = key
			h := rng.Uint64()
			s.Put(key, h, 2, 1)
			if i := s.Find(key, h); i == None || s.keyAt(i) != key {
				t.Fatalf("length %d: %q not found, or read back wrong", n, key)
			}
		}
	}
}

// missProbe is the mean number of slots a lookup of an absent key reads,
// over every home: the length of the run from there to an empty slot.
func (s *Table) missProbe() float64 {
	total, n := 0, len(s.table)
	for k := range n {
		for j := k; s.table[j].meta != 0; j = (j + 1) % n {
			total++
		}
	}
	return float64(total)/float64(n) + 1
}

// A full table that keeps taking new keys (each evicting one) keeps its
// probe runs within twice as long as when it was first filled, whether
// eviction chooses by TAT among buckets that differ (spread) or falls back
// on the hand's order among equal ones (equal). A hand that stepped to
// the next slot, or a sample that began wherever the hand stood, fails it
// (see evict).
func TestChurnKeepsProbesShort(t *testing.T) {
	const now int64 = 1_000
	for _, c := range []struct {
		name   string
		spread int64 // new buckets' TATs lie in [now+10, now+10+spread]
	}{
		{"equal", 0},
		{"spread", 1000},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s Table
			s.Init(3906)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range 3906 {
				s.Put(fmt.Sprint(i), rng.Uint64(), now+10, now)
			}
			fresh := s.missProbe()
			for i := range 4 * 3906 {
				s.Put(fmt.Sprint("new", i), rng.Uint64(), now+10+rng.Int64N(c.spread+1), now)
			}
			if s.evicted != 4*3906 || s.evictedNotFull != s.evicted {
				t.Fatalf("%d evictions, %d not full; want %d of each", s.evicted, s.evictedNotFull, 4*3906)
			}
			churned := s.missProbe()
			if churned > 2*fresh {
				t.Fatalf("an absent key's lookup reads %.1f slots after churn, %.1f when first filled", churned, fresh)
			}
			t.Logf("an absent key's lookup reads %.1f slots after churn, %.1f when first filled", churned, fresh)
		})
	}
}

// The hand's stride visits every slot once per round, at every table
// length a table can have.
func TestStrideVisitsEverySlot(t *testing.T) {
	for n := 1; n <= 6000; n++ {
		s := Table{table: make([]slot, n), stride: strideFor(n)}
		seen := make([]bool, n)
		for i, k := 0, 0; k < n; k++ {
			if seen[i] {
				t.Fatalf("length %d, stride %d: position %d again after %d steps", n, s.stride, i, k)
			}
			seen[i] = true
			i = s.step(i)
		}
	}
}
