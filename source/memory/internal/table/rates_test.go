package table

import (
	"fmt"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// A counter's value stays 136 bytes, 144 with its links in the recency
// list (which boundedtable's tests hold to 8 bytes, and a key to 24): the
// 168 bytes an entry Rates's doc gives, index aside.
func TestRateEntrySizes(t *testing.T) {
	if n := unsafe.Sizeof(rateEntry{}); n != 136 {
		t.Errorf("a rate entry is %d bytes, want 136", n)
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

var testSeed = maphash.MakeSeed()

// hashOf is a key's hash, as the memory source computes it.
func hashOf(key string) uint64 { return maphash.String(testSeed, key) }

// rateModel is what a Rates must hold: each key's counter, and the keys
// from the most recently incremented to the least.
type rateModel struct {
	counters map[string]ratecounter.Counter
	order    []string
}

func (m *rateModel) remove(key string) {
	delete(m.counters, key)
	m.order = slices.DeleteFunc(m.order, func(k string) bool { return k == key })
}

func (m *rateModel) get(key string, s int64) (ratecounter.Counter, bool) {
	c, ok := m.counters[key]
	if ok && c.Empty(s) {
		m.remove(key)
		return ratecounter.Counter{}, false
	}
	return c, ok
}

func (m *rateModel) put(key string, c ratecounter.Counter, s int64, capacity int, incremented bool) (evicted bool) {
	_, ok := m.counters[key]
	if c.Empty(s) {
		m.remove(key)
		return false
	}
	if !ok {
		for len(m.order) > 0 {
			tail := m.order[len(m.order)-1]
			if tc := m.counters[tail]; !tc.Empty(s) {
				break
			}
			m.remove(tail)
		}
		for len(m.order) >= capacity {
			m.remove(m.order[len(m.order)-1])
			evicted = true
		}
		m.order = append([]string{key}, m.order...)
	} else if incremented {
		m.remove(key)
		m.order = append([]string{key}, m.order...)
	}
	m.counters[key] = c
	return evicted
}

// order returns r's keys from the most recently incremented to the
// least, checking the list's links both ways.
func (r *Rates) order(t *testing.T, keys []string, hashes []uint64) []string {
	t.Helper()
	byPos := map[int]string{}
	for i, k := range keys {
		if p := r.ents.Find(k, hashes[i]); p != None {
			byPos[p] = k
		}
	}
	var out []string
	prev := None
	for p := r.ents.Newest(); p != None; p = r.ents.Older(p) {
		if r.ents.Newer(p) != prev {
			t.Fatalf("entry %d links back to %d, want %d", p, r.ents.Newer(p), prev)
		}
		out = append(out, byPos[p])
		prev = p
		if len(out) > r.Len() {
			t.Fatal("the recency list has a cycle")
		}
	}
	if r.ents.Oldest() != prev {
		t.Fatalf("the oldest is %d, the list ends at %d", r.ents.Oldest(), prev)
	}
	return out
}

// Rates against a model under random reads, increments (some of them past
// 65,535 hits in a second, which widens an entry, and then narrow again as
// the window moves on), refunds, deletes and time steps, with a capacity
// that makes inserts evict: after every step, every key the model holds is
// found with its counter, no other is, and the recency list is the model's.
func TestRatesAgainstModel(t *testing.T) {
	keys, hashes := testKeys(60)
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 9))
		var r Rates
		m := rateModel{counters: map[string]ratecounter.Counter{}}
		s := int64(1_790_000_000)
		capacity := 5 + rng.IntN(30)
		for step := range 5000 {
			if rng.IntN(10) == 0 {
				s += rng.Int64N(40)
			}
			i := rng.IntN(len(keys))
			k, h := keys[i], hashes[i]
			var got ratecounter.Counter
			gotOK := r.Get(k, h, s, &got)
			want, wantOK := m.get(k, s)
			if gotOK != wantOK || got != want {
				t.Fatalf("seed %d step %d: Get(%q) = %v %+v, want %v %+v", seed, step, k, gotOK, got, wantOK, want)
			}
			switch op := rng.IntN(10); {
			case op < 6:
				delta := 1 + rng.Int64N(5)
				if rng.IntN(20) == 0 {
					delta = math.MaxUint16 + rng.Int64N(1<<20)
				}
				got.Add(s-rng.Int64N(3), delta)
				if gotEv, wantEv := r.Put(k, h, &got, s, capacity, true), m.put(k, got, s, capacity, true); gotEv != wantEv {
					t.Fatalf("seed %d step %d: Put evicted %v, want %v", seed, step, gotEv, wantEv)
				}
			case op < 8:
				got.Remove(s, 1+rng.Int64N(4))
				r.Put(k, h, &got, s, capacity, false)
				m.put(k, got, s, capacity, false)
			case op < 9:
				r.Delete(k, h)
				m.remove(k)
			}
			if r.Len() != len(m.counters) {
				t.Fatalf("seed %d step %d: %d entries, want %d", seed, step, r.Len(), len(m.counters))
			}
			if o := r.order(t, keys, hashes); !slices.Equal(o, m.order) {
				t.Fatalf("seed %d step %d: recency %q, want %q", seed, step, o, m.order)
			}
			for j, k := range keys {
				p := r.ents.Find(k, hashes[j])
				want, ok := m.counters[k]
				if (p != None) != ok {
					t.Fatalf("seed %d step %d: %q found at %d, model holds it: %v", seed, step, k, p, ok)
				}
				if ok {
					var c ratecounter.Counter
					r.load(p, &c)
					if c != want {
						t.Fatalf("seed %d step %d: %q holds %+v, want %+v", seed, step, k, c, want)
					}
					if wide := r.ents.At(p).wide != 0; wide != slices.ContainsFunc(want.Hits[:], func(n uint32) bool { return n > math.MaxUint16 }) {
						t.Fatalf("seed %d step %d: %q wide=%v for %+v", seed, step, k, wide, want)
					}
				}
			}
			if r.Len() == 0 && (r.wide != nil || r.ents.Newest() != None || r.ents.Oldest() != None) {
				t.Fatalf("seed %d step %d: an empty table keeps %d wide rings, newest %d, oldest %d", seed, step, len(r.wide), r.ents.Newest(), r.ents.Oldest())
			}
		}
	}
}

// A counter above 65,535 hits in a second, and at the most a second holds,
// comes back exactly, and its entry narrows again once its wide second
// leaves the window.
func TestRatesWideSeconds(t *testing.T) {
	var r Rates
	const s = 1_000
	var c ratecounter.Counter
	c.Add(s, math.MaxUint32)
	c.Add(s+1, math.MaxUint16+1)
	c.Add(s+2, 7)
	r.Put("1:a", 1<<40, &c, s+2, 10, true)
	var got ratecounter.Counter
	if !r.Get("1:a", 1<<40, s+2, &got) || got != c {
		t.Fatalf("got %+v, want %+v", got, c)
	}
	if got.Window(s+2, 10) != math.MaxUint32+math.MaxUint16+1+7 {
		t.Fatalf("window %d", got.Window(s+2, 10))
	}
	if len(r.wide) != 1 {
		t.Fatalf("%d wide rings, want 1", len(r.wide))
	}
	got.Add(s+61, 1) // both wide seconds leave the window
	r.Put("1:a", 1<<40, &got, s+61, 10, true)
	if r.ents.At(0).wide != 0 || r.wide != nil {
		t.Fatalf("entry still wide: %d, %d rings", r.ents.At(0).wide, len(r.wide))
	}
	var back ratecounter.Counter
	if !r.Get("1:a", 1<<40, s+61, &back) || back != got {
		t.Fatalf("narrowed back to %+v, want %+v", back, got)
	}
}

// Entries that were removed give their memory back: after a flood and its
// expiry, the dense slices and the index are small again.
func TestRatesShrink(t *testing.T) {
	var r Rates
	const s = 5_000
	var c ratecounter.Counter
	c.Add(s, 1)
	for i := range 10_000 {
		k := fmt.Sprintf("9:%d", i)
		r.Put(k, hashOf(k), &c, s, 100_000, true)
	}
	var later ratecounter.Counter
	later.Add(s+60, 1)
	r.Put("9:last", hashOf("9:last"), &later, s+60, 100_000, true) // sweeps every other entry
	if dense, index := r.ents.Footprint(); r.Len() != 1 || dense > 64 || index > 64 {
		t.Fatalf("after the sweep: %d entries, %d entry capacity, %d index words", r.Len(), dense, index)
	}
}

// An insert at a second a minute or more before another entry's last one
// (the clock went back) leaves that entry: it reads as empty then, but its
// hits count again once the clock is back where they were.
func TestRatesInsertAfterTheClockWentBack(t *testing.T) {
	var r Rates
	const s = 5_000
	var c ratecounter.Counter
	c.Add(s, 5)
	r.Put("9:a", hashOf("9:a"), &c, s, 100, true)
	var back ratecounter.Counter
	back.Add(s-60, 1)
	r.Put("9:b", hashOf("9:b"), &back, s-60, 100, true)
	var got ratecounter.Counter
	if !r.Get("9:a", hashOf("9:a"), s, &got) || got.Window(s, 60) != 5 {
		t.Fatalf("9:a after an insert a minute back: %d hits, want 5", got.Window(s, 60))
	}
}
