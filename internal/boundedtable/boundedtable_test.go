package boundedtable

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// The sizes the memory source's docs give: a key is 24 bytes, and the
// recency links add 8 to a value of 8-byte alignment.
func TestSizes(t *testing.T) {
	if n := unsafe.Sizeof(ident{}); n != 24 {
		t.Errorf("an ident is %d bytes, want 24", n)
	}
	type v struct {
		a int64
		b [15]uint32
	} // 68 bytes, 72 aligned
	if n := unsafe.Sizeof(recent[v]{}); n != 80 {
		t.Errorf("an entry of a 72-byte value is %d bytes, want 80", n)
	}
}

// testKeys returns n keys of 0 to 41 bytes, so that some are held in the
// ident and some in the arena, and hashes that collide on purpose: every
// key shares its index home with a quarter of the others, and some share
// their whole tag, so that probes run long and keys are compared.
func testKeys(n int) ([]string, []uint64) {
	keys := make([]string, n)
	hashes := make([]uint64, n)
	for i := range keys {
		switch i {
		case 0:
			keys[i] = ""
		case 1:
			keys[i] = "a"
		default:
			keys[i] = fmt.Sprintf("%d:%s", i, strings.Repeat("x", i%38))
		}
		hashes[i] = uint64(i%4)<<32 | uint64(i%3)<<8
	}
	return keys, hashes
}

// The key set against a map, with long runs of colliding hashes, keys of
// every length, and arena compaction: every key is found at the position
// the map says, after adds and removes in any order.
func TestKeysAgainstMap(t *testing.T) {
	keys, hashes := testKeys(100)
	for i := range keys {
		keys[i] += string(rune('a' + i%26)) // a few more long keys
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var k Keys
	pos := map[string]int{}
	byPos := []string{}
	compactions := 0
	for step := range 10_000 {
		dead := k.deadBytes
		i := rng.IntN(len(keys))
		key := keys[i]
		if p, ok := pos[key]; ok {
			moved := k.RemoveAt(p)
			if moved != len(byPos)-1 {
				t.Fatalf("step %d: RemoveAt moved %d, want the last, %d", step, moved, len(byPos)-1)
			}
			byPos[p] = byPos[moved]
			pos[byPos[p]] = p
			byPos = byPos[:moved]
			delete(pos, key)
		} else {
			if p := k.Add(key, hashes[i]); p != len(byPos) {
				t.Fatalf("step %d: Add gave position %d, want %d", step, p, len(byPos))
			}
			pos[key] = len(byPos)
			byPos = append(byPos, key)
			if k.deadBytes < dead {
				compactions++
			}
		}
		for j, key := range keys {
			want, ok := pos[key]
			if got := k.Find(key, hashes[j]); (got != None) != ok || (ok && got != want) {
				t.Fatalf("step %d: Find(%q) = %d, want %d (held %v)", step, key, got, want, ok)
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

// A Recency against a slice of keys, newest first, under adds, touches
// and removals of any entry: the order, the links both ways and each
// entry's value agree with the model after every step.
func TestRecencyAgainstModel(t *testing.T) {
	keys, hashes := testKeys(60)
	rng := rand.New(rand.NewPCG(3, 4))
	var r Recency[int]
	var order []int // key indexes, newest first
	for step := range 20_000 {
		i := rng.IntN(len(keys))
		p := r.Find(keys[i], hashes[i])
		at := slices.Index(order, i)
		if (p != None) != (at >= 0) {
			t.Fatalf("step %d: %q at %d, model at %d", step, keys[i], p, at)
		}
		switch {
		case p == None:
			r.Add(keys[i], hashes[i], i)
			order = slices.Insert(order, 0, i)
		case rng.IntN(2) == 0:
			r.Touch(p)
			order = slices.Insert(slices.Delete(order, at, at+1), 0, i)
		default:
			r.Remove(p)
			order = slices.Delete(order, at, at+1)
		}
		var got []int
		prev := None
		for p := r.Newest(); p != None; p = r.Older(p) {
			if r.Newer(p) != prev {
				t.Fatalf("step %d: entry %d links back to %d, want %d", step, p, r.Newer(p), prev)
			}
			if j := *r.At(p); r.Find(keys[j], hashes[j]) != p {
				t.Fatalf("step %d: entry %d holds the value of another key", step, p)
			}
			got = append(got, *r.At(p))
			prev = p
			if len(got) > r.Len() {
				t.Fatalf("step %d: the list has a cycle", step)
			}
		}
		if r.Oldest() != prev || !slices.Equal(got, order) || r.Len() != len(order) {
			t.Fatalf("step %d: order %v (oldest %d, last %d), want %v", step, got, r.Oldest(), prev, order)
		}
	}
}

// checkHeap fails unless e's heap is ordered and its places agree with at.
func (e *Expiry[V]) checkHeap(t *testing.T) {
	t.Helper()
	if len(e.heap) != e.Len() || len(e.at) != e.Len() || len(e.exp) != e.Len() || len(e.vals) != e.Len() {
		t.Fatalf("heap %d, at %d, exp %d, vals %d for %d keys", len(e.heap), len(e.at), len(e.exp), len(e.vals), e.Len())
	}
	for i, p := range e.heap {
		if int(e.at[p]) != i {
			t.Fatalf("heap place %d holds %d, which says it is at %d", i, p, e.at[p])
		}
		if i > 0 && e.less(i, (i-1)/2) {
			t.Fatalf("heap place %d expires before its parent", i)
		}
	}
}

// An Expiry against a map under adds, expiry changes and removals: every
// key holds its expiry and value, the heap stays ordered, and Min and
// MinWhere name an entry with the least expiry (of those not passed over).
func TestExpiryAgainstModel(t *testing.T) {
	keys, hashes := testKeys(60)
	rng := rand.New(rand.NewPCG(5, 6))
	var e Expiry[string]
	m := map[string]int64{}
	skipped := map[string]bool{}
	for step := range 20_000 {
		i := rng.IntN(len(keys))
		k := keys[i]
		exp := rng.Int64N(100)
		p := e.Find(k, hashes[i])
		switch _, ok := m[k]; {
		case ok != (p != None):
			t.Fatalf("step %d: %q at %d, model %v", step, k, p, ok)
		case !ok:
			e.Add(k, hashes[i], exp, k)
			m[k] = exp
		case rng.IntN(3) == 0:
			e.Remove(p)
			delete(m, k)
		default:
			e.SetExpiry(p, exp)
			m[k] = exp
		}
		if rng.IntN(8) == 0 {
			skipped[k] = !skipped[k]
		}
		e.checkHeap(t)
		for j, k := range keys {
			want, ok := m[k]
			p := e.Find(k, hashes[j])
			if (p != None) != ok || (ok && (e.Expires(p) != want || *e.At(p) != k)) {
				t.Fatalf("step %d: %q at %d, model %v %d", step, k, p, ok, want)
			}
		}
		least, leastFree, free := int64(1<<62), int64(1<<62), 0
		for k, exp := range m {
			least = min(least, exp)
			if !skipped[k] {
				leastFree = min(leastFree, exp)
				free++
			}
		}
		if p := e.Min(); (p == None) != (len(m) == 0) || (p != None && e.Expires(p) != least) {
			t.Fatalf("step %d: Min is %d, want an entry expiring at %d", step, p, least)
		}
		p = e.MinWhere(func(p int) bool { return skipped[*e.At(p)] })
		if (p == None) != (free == 0) || (p != None && (skipped[*e.At(p)] || e.Expires(p) != leastFree)) {
			t.Fatalf("step %d: MinWhere is %d, want an entry not passed over expiring at %d", step, p, leastFree)
		}
	}
}

// MinWhere gives up past MaxSkip entries passed over, and finds the entry
// under exactly MaxSkip of them.
func TestMinWhereBound(t *testing.T) {
	var e Expiry[bool]
	for i := range MaxSkip + 1 {
		k := fmt.Sprint(i)
		e.Add(k, uint64(i)<<32, int64(i), true)
	}
	e.Add("last", 1<<60, 1000, false)
	skip := func(p int) bool { return *e.At(p) }
	if p := e.MinWhere(skip); p != None {
		t.Fatalf("found %d past %d entries passed over", p, MaxSkip+1)
	}
	e.Remove(e.Min())
	if p := e.MinWhere(skip); p == None || *e.At(p) {
		t.Fatalf("found %d under %d entries passed over", p, MaxSkip)
	}
}
