package memory

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
)

// Shards sit side by side in one slice; each must fill whole cache lines
// or two cores locking neighbouring shards slow each other down.
func TestShardIsCacheLinePadded(t *testing.T) {
	if size := unsafe.Sizeof(shard{}); size%64 != 0 {
		t.Fatalf("a shard is %d bytes; pad it to a multiple of 64", size)
	}
}

// The table against a plain map, under random puts, reads, refunds to
// full and deletes, with hashes made to collide: 40 keys share 4 homes, so
// probe runs are long, wrap round the end of the table and are cut in the
// middle by deletes. After every step each key the model holds must be
// found with its TAT, and no other.
func TestTableAgainstModel(t *testing.T) {
	const now int64 = 1_000
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var s shard
		s.init(1 << 20) // no eviction here: the model cannot predict it
		keys := make([]string, 40)
		hashes := make([]uint64, len(keys))
		for i := range keys {
			keys[i] = fmt.Sprintf("k%d", i)
			// The last four homes of the table, whatever its size, so that
			// runs wrap round its end.
			hashes[i] = uint64(0xFFFF_FFFF-rng.IntN(4))<<32 | uint64(i)<<1
		}
		model := map[string]int64{}
		for step := range 3000 {
			k := rng.IntN(len(keys))
			key, h := keys[k], hashes[k]
			switch rng.IntN(4) {
			case 0, 1: // store a TAT after now
				tat := now + 1 + rng.Int64N(100)
				s.put(key, h, tat, now)
				model[key] = tat
			case 2: // store a full bucket: removes
				s.put(key, h, now, now)
				delete(model, key)
			case 3:
				_, had := model[key]
				if got := s.delete(key, h, now); got != had {
					t.Fatalf("seed %d step %d: delete(%s) = %v, want %v", seed, step, key, got, had)
				}
				delete(model, key)
			}
			if s.count != len(model) {
				t.Fatalf("seed %d step %d: count %d, model holds %d", seed, step, s.count, len(model))
			}
			for i, key := range keys {
				_, tat := s.get(key, hashes[i], now)
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
}

// A bound far below the keys that arrive is held exactly, through growth
// of the table and eviction, with every held key still found.
func TestTableHoldsItsCapacity(t *testing.T) {
	const now int64 = 1_000
	var s shard
	s.init(100)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		key := fmt.Sprint(i)
		h := rng.Uint64()
		s.put(key, h, now+10, now)
		if s.count > 100 {
			t.Fatalf("after %d inserts: %d buckets, bound 100", i+1, s.count)
		}
		if p := s.find(key, h); p == none {
			t.Fatalf("insert %d: the new key is not found", i)
		}
	}
	if s.count != 100 || s.evicted != 4900 {
		t.Fatalf("count %d, evicted %d; want 100 and 4900", s.count, s.evicted)
	}
	held := 0
	for i := range s.table {
		if s.table[i].hash != 0 {
			held++
			if s.find(s.table[i].key, s.table[i].hash) != i {
				t.Fatalf("%s at %d is not found there", s.table[i].key, i)
			}
		}
	}
	if held != 100 {
		t.Fatalf("%d slots in use, count says 100", held)
	}
}

// However large the bound, shards hold at most maxPerShard buckets each
// (so a table never grows past a size rebuilt in well under a millisecond),
// their number is a power of two, and their capacities add up to the bound
// exactly.
func TestShardsStaySmall(t *testing.T) {
	for _, bound := range []int{1, 63, 64, 1000, 16_384, 1_000_000, 1_048_577, 10_000_000, 100_000_000} {
		s := New(bound)
		n := len(s.shards)
		if n&(n-1) != 0 || uint64(n-1) != s.mask {
			t.Errorf("bound %d: %d shards, mask %#x", bound, n, s.mask)
		}
		total := 0
		for i := range s.shards {
			c := s.shards[i].capacity
			if c > maxPerShard+1 {
				t.Errorf("bound %d: a shard of capacity %d", bound, c)
				break
			}
			total += c
		}
		if total != bound {
			t.Errorf("bound %d: capacities add up to %d", bound, total)
		}
	}
}
