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

// checkHeap fails unless b's least expiry is its first to evict (the
// heap's own order is boundedtable's to check).
func (b *Boxes) checkHeap(t *testing.T) {
	t.Helper()
	m := b.ents.Min()
	if (m == None) != (b.Len() == 0) {
		t.Fatalf("least entry %d of %d", m, b.Len())
	}
	for p := range b.Len() {
		if b.ents.Expires(p) < b.ents.Expires(m) {
			t.Fatalf("entry %d expires before the least, %d", p, m)
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
				p := b.ents.Find(k, hashes[j])
				want, ok := m[k]
				if (p != None) != ok || (ok && b.ents.Expires(p) != want) {
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
	if dense, index := b.ents.Footprint(); b.Len() != 1 || dense > 64 || index > 64 {
		t.Fatalf("after the sweep: %d entries, room for %d, %d index words", b.Len(), dense, index)
	}
	b.checkHeap(t)
}
