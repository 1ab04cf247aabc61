package table

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// boxModel is what a Boxes must hold: each key's expiry.
type boxModel map[string]int64

func (m boxModel) get(key string, now int64) int64 {
	exp, ok := m[key]
	if ok && exp <= now {
		delete(m, key)
		return 0
	}
	return exp
}

func (m boxModel) put(key string, exp, now int64, capacity int) (evicted bool) {
	if exp <= now {
		delete(m, key)
		return false
	}
	if _, ok := m[key]; !ok {
		for k, e := range m {
			if e <= now {
				delete(m, k)
			}
		}
		for len(m) >= capacity {
			first, found := "", false
			for k, e := range m {
				if !found || e < m[first] {
					first, found = k, true
				}
			}
			delete(m, first)
			evicted = true
		}
	}
	m[key] = exp
	return evicted
}

// checkHeap fails unless b's heap is ordered and its places agree with at.
func (b *Boxes) checkHeap(t *testing.T) {
	t.Helper()
	if len(b.heap) != b.Len() || len(b.at) != b.Len() || len(b.exp) != b.Len() {
		t.Fatalf("heap %d, at %d, exp %d for %d keys", len(b.heap), len(b.at), len(b.exp), b.Len())
	}
	for i, p := range b.heap {
		if int(b.at[p]) != i {
			t.Fatalf("heap place %d holds %d, which says it is at %d", i, p, b.at[p])
		}
		if i > 0 && b.less(i, (i-1)/2) {
			t.Fatalf("heap place %d expires before its parent", i)
		}
	}
}

// Boxes against a model under random reads, boxings (longer, shorter, and
// already expired), deletes and time steps, with a capacity that makes
// inserts evict. Expiries are distinct, so that the entry with the least
// time left is one entry: after every step, the table holds exactly the
// model's entries with their expiries.
func TestBoxesAgainstModel(t *testing.T) {
	keys, hashes := testKeys(60)
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 5))
		var b Boxes
		m := boxModel{}
		now := int64(1_790_000_000_000_000_000)
		capacity := 3 + rng.IntN(30)
		used := map[int64]bool{}
		for step := range 5000 {
			now += rng.Int64N(1000)
			i := rng.IntN(len(keys))
			k, h := keys[i], hashes[i]
			if got, want := b.Get(k, h, now), m.get(k, now); got != want {
				t.Fatalf("seed %d step %d: Get(%q) = %d, want %d", seed, step, k, got, want)
			}
			switch op := rng.IntN(10); {
			case op < 7:
				exp := now - 500 + rng.Int64N(30_000)
				for used[exp] {
					exp++
				}
				used[exp] = true
				if got, want := b.Put(k, h, exp, now, capacity), m.put(k, exp, now, capacity); got != want {
					t.Fatalf("seed %d step %d: Put evicted %v, want %v", seed, step, got, want)
				}
			case op < 8:
				b.Delete(k, h)
				delete(m, k)
			}
			b.checkHeap(t)
			if b.Len() != len(m) {
				t.Fatalf("seed %d step %d: %d entries, want %d", seed, step, b.Len(), len(m))
			}
			for j, k := range keys {
				p := b.keys.find(k, hashes[j])
				want, ok := m[k]
				if (p != None) != ok || (ok && b.exp[p] != want) {
					t.Fatalf("seed %d step %d: %q at %d, model %v %d", seed, step, k, p, ok, want)
				}
			}
		}
	}
}

// A box's memory comes back once its entries expire and a new one sweeps
// them out.
func TestBoxesShrink(t *testing.T) {
	var b Boxes
	const now = 1_000_000
	for i := range 10_000 {
		k := fmt.Sprintf("9:%d", i)
		b.Put(k, hashOf(k), now+int64(i)+1, now, 100_000)
	}
	later := int64(now + 20_000)
	b.Put("9:last", hashOf("9:last"), later+1, later, 100_000)
	if b.Len() != 1 || cap(b.exp) > minDense || cap(b.heap) > minDense || len(b.keys.index) > 64 {
		t.Fatalf("after the sweep: %d entries, capacities %d %d, %d index words", b.Len(), cap(b.exp), cap(b.heap), len(b.keys.index))
	}
	b.checkHeap(t)
}

// The key set against a map, with long runs of colliding hashes, keys of
// every length, and arena compaction: every key is found at the position
// the map says, after adds and removes in any order.
func TestKeySetAgainstMap(t *testing.T) {
	keys, hashes := testKeys(100)
	for i := range keys {
		keys[i] += string(rune('a' + i%26)) // a few more long keys
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var k keySet
	pos := map[string]int{}
	byPos := []string{}
	compactions := 0
	for step := range 10_000 {
		dead := k.deadBytes
		i := rng.IntN(len(keys))
		key := keys[i]
		if p, ok := pos[key]; ok {
			moved := k.removeAt(p)
			if moved != len(byPos)-1 {
				t.Fatalf("step %d: removeAt moved %d, want the last, %d", step, moved, len(byPos)-1)
			}
			byPos[p] = byPos[moved]
			pos[byPos[p]] = p
			byPos = byPos[:moved]
			delete(pos, key)
		} else {
			if p := k.add(key, hashes[i]); p != len(byPos) {
				t.Fatalf("step %d: add gave position %d, want %d", step, p, len(byPos))
			}
			pos[key] = len(byPos)
			byPos = append(byPos, key)
			if k.deadBytes < dead {
				compactions++
			}
		}
		for j, key := range keys {
			want, ok := pos[key]
			if got := k.find(key, hashes[j]); (got != None) != ok || (ok && got != want) {
				t.Fatalf("step %d: find(%q) = %d, want %d (held %v)", step, key, got, want, ok)
			}
		}
	}
	if compactions == 0 {
		t.Fatal("the arena was never compacted")
	}
	if k.Len() != len(pos) {
		t.Fatalf("%d keys, want %d", k.Len(), len(pos))
	}
}
