package table

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// Which bucket eviction chooses, in a table small enough that its sample
// holds every bucket: a full one before any other, else the one closest
// to full (the earliest TAT), never a pinned one unless all are.
func TestEvictChoosesTheLeastLoss(t *testing.T) {
	const now int64 = 1_000
	for _, c := range []struct {
		name    string
		tats    []int64 // of keys k0, k1, ...
		pin     []int   // keys pinned
		evicted int     // the key that must go
		notFull bool
	}{
		{"a full bucket goes, not the one closest to full", []int64{now + 500, now + 1, now, now + 900}, nil, 2, false},
		{"a long-refilled bucket is as full as any", []int64{now + 500, now - 400, now + 1, now + 900}, nil, 1, false},
		{"without a full one, the closest to full goes", []int64{now + 500, now + 90, now + 7, now + 900}, nil, 2, true},
		{"a pinned bucket is passed over", []int64{now + 500, now + 90, now + 7, now + 900}, []int{2}, 1, true},
		{"if all are pinned, the closest to full goes", []int64{now + 500, now + 90, now + 7}, []int{0, 1, 2}, 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s Table
			s.Init(len(c.tats)) // at most 5 buckets: all in the sample
			rng := rand.New(rand.NewPCG(1, uint64(len(c.name))))
			hashes := make([]uint64, len(c.tats))
			for k, tat := range c.tats {
				hashes[k] = rng.Uint64()
				s.Put(fmt.Sprint("k", k), hashes[k], tat, 0) // when None was full
			}
			for _, k := range c.pin {
				s.Pin(s.Find(fmt.Sprint("k", k), hashes[k]))
			}
			if got := s.evict(now); got != c.notFull {
				t.Errorf("evict reports not full: %v, want %v", got, c.notFull)
			}
			if s.evicted != 1 || s.evictedNotFull != map[bool]uint64{true: 1}[c.notFull] {
				t.Errorf("counters: %d evicted, %d not full", s.evicted, s.evictedNotFull)
			}
			for k, tat := range c.tats {
				i := s.Find(fmt.Sprint("k", k), hashes[k])
				switch {
				case k == c.evicted && i != None:
					t.Errorf("k%d (TAT now%+d) kept, want it evicted", k, tat-now)
				case k != c.evicted && (i == None || s.table[i].tat != tat):
					t.Errorf("k%d (TAT now%+d) evicted or changed, want it kept", k, tat-now)
				}
			}
		})
	}
}

// evictedNotFull counts exactly the buckets that made room while they
// still had tokens spent: with time passing and buckets of every fill
// level, every bucket that disappears without being deleted or written
// full is either full (the sweep, or eviction, took it; no count) or was
// evicted not full (counted once).
func TestNotFullEvictionsAreCountedExactly(t *testing.T) {
	var s Table
	s.Init(50)
	rng := rand.New(rand.NewPCG(11, 12))
	type bucket struct {
		h   uint64
		tat int64
	}
	model := map[string]bucket{}
	var lost, full uint64
	now := int64(1_000)
	for step := range 20_000 {
		now += rng.Int64N(5)
		key := fmt.Sprint(rng.IntN(1000))
		b, ok := model[key]
		if !ok {
			b.h = rng.Uint64()
		}
		b.tat = now + 1 + rng.Int64N(300)
		s.Put(key, b.h, b.tat, now)
		model[key] = b
		for k, m := range model {
			if s.Find(k, m.h) != None {
				continue
			}
			if m.tat > now {
				lost++
			} else {
				full++
			}
			delete(model, k)
		}
		if s.evictedNotFull != lost || s.evicted < lost {
			t.Fatalf("step %d: %d evicted, %d not full; %d buckets went not full", step, s.evicted, s.evictedNotFull, lost)
		}
	}
	if lost == 0 || full == 0 {
		t.Fatalf("%d went not full, %d full: the test did not cover both", lost, full)
	}
	t.Logf("%d buckets went not full, %d full; %d evictions", lost, full, s.evicted)
}
