package table

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// entry is one entry of an eviction case: a GCRA bucket whose TAT is now
// plus off ns, or a window counter expiring off ms after now's ms, with
// cur hits in its current window (random hits when cur is 0).
type entry struct {
	windowed bool
	off      int64
	cur      int64
}

func bucketAt(off int64) entry               { return entry{false, off, 0} }
func counterAt(off int64) entry              { return entry{true, off, 0} }
func counterWith(off int64, cur int64) entry { return entry{true, off, cur} }

// Which entry eviction chooses, in a store small enough that each table's
// sample holds every entry: an expired one before any other, else the one
// with the least time left until it expires, whatever its kind, never a
// pinned one unless all are. now lies half a millisecond into its ms, so a
// counter expiring at the next ms has 0.5 ms left.
func TestEvictChoosesTheLeastLoss(t *testing.T) {
	const nowMs int64 = 1_000_000
	const now = nowMs*nsPerMs + 500_000
	for _, c := range []struct {
		name    string
		entries []entry // of keys k0, k1, ...
		pin     []int   // keys pinned
		evicted int     // the key that must go
		notFull bool
	}{
		{"a full bucket goes, not the one closest to full", []entry{bucketAt(500), bucketAt(1), bucketAt(0), bucketAt(900)}, nil, 2, false},
		{"a long-refilled bucket is as full as any", []entry{bucketAt(500), bucketAt(-400), bucketAt(1), bucketAt(900)}, nil, 1, false},
		{"without a full one, the closest to full goes", []entry{bucketAt(500), bucketAt(90), bucketAt(7), bucketAt(900)}, nil, 2, true},
		{"a pinned bucket is passed over", []entry{bucketAt(500), bucketAt(90), bucketAt(7), bucketAt(900)}, []int{2}, 1, true},
		{"if all are pinned, the closest to full goes", []entry{bucketAt(500), bucketAt(90), bucketAt(7)}, []int{0, 1, 2}, 2, true},
		{"an expired counter goes, not a bucket a ns from full", []entry{bucketAt(1), counterAt(0), counterAt(5)}, nil, 1, false},
		{"a counter past its windows long ago is as expired as any", []entry{bucketAt(1), counterAt(-9000)}, nil, 1, false},
		{"a full bucket goes, not a counter about to expire", []entry{counterAt(1), bucketAt(-1)}, nil, 1, false},
		{"of counters alone, the earliest expiry goes", []entry{counterAt(30), counterAt(2), counterAt(7)}, nil, 1, true},
		{"a counter with 0.5 ms left goes before a bucket with 0.6", []entry{bucketAt(600_000), counterAt(1)}, nil, 1, true},
		{"a bucket with 0.4 ms left goes before a counter with 0.5", []entry{bucketAt(400_000), counterAt(1)}, nil, 0, true},
		{"a pinned counter is passed over for a bucket with longer left", []entry{bucketAt(5e9), counterAt(1)}, []int{1}, 0, true},
		{"a pinned bucket is passed over for a counter with longer left", []entry{bucketAt(1), counterAt(5000)}, []int{0}, 1, true},
		{"if all are pinned, the least time left goes across kinds", []entry{bucketAt(5e9), counterAt(1)}, []int{0, 1}, 1, true},
		{"of counters expiring together, the one with fewest hits goes", []entry{counterWith(60_000, 5), counterWith(60_000, 1), counterWith(60_000, 3)}, nil, 1, true},
		{"fewer hits count only at equal expiries", []entry{counterWith(60_000, 1), counterWith(59_999, 9)}, nil, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s Store
			s.Init(len(c.entries)) // at most 5 entries: all in the samples
			rng := rand.New(rand.NewPCG(1, uint64(len(c.name))))
			hashes := make([]uint64, len(c.entries))
			for k, e := range c.entries {
				hashes[k] = rng.Uint64()
				// Stored at time 0, when none had expired.
				switch {
				case e.windowed && e.cur > 0:
					c := window.Counter{Period: 30_000, Start: nowMs + e.off - 60_000, Cur: e.cur}
					s.putWindow(fmt.Sprint("k", k), hashes[k], c, 0)
				case e.windowed:
					s.putWindow(fmt.Sprint("k", k), hashes[k], counterExpiring(rng, nowMs+e.off), 0)
				default:
					s.putTAT(fmt.Sprint("k", k), hashes[k], now+e.off, 0)
				}
			}
			for _, k := range c.pin {
				w := c.entries[k].windowed
				s.Pin(w, s.find(fmt.Sprint("k", k), hashes[k], w))
			}
			if got := s.evict(now); got != c.notFull {
				t.Errorf("evict reports not full: %v, want %v", got, c.notFull)
			}
			if s.evicted != 1 || s.evictedNotFull != map[bool]uint64{true: 1}[c.notFull] {
				t.Errorf("counters: %d evicted, %d not full", s.evicted, s.evictedNotFull)
			}
			for k, e := range c.entries {
				i := s.find(fmt.Sprint("k", k), hashes[k], e.windowed)
				switch {
				case k == c.evicted && i != None:
					t.Errorf("k%d (%+v) kept, want it evicted", k, e)
				case k != c.evicted && i == None:
					t.Errorf("k%d (%+v) evicted, want it kept", k, e)
				}
			}
		})
	}
}

// evictedNotFull counts exactly the entries that made room while they
// still counted something: with time passing and buckets and counters of
// every fill level, every entry that disappears without being deleted or
// written expired either had expired (the sweep, or eviction, took it; no
// count) or was evicted before it expired (counted once).
func TestNotFullEvictionsAreCountedExactly(t *testing.T) {
	var s Store
	s.Init(50)
	rng := rand.New(rand.NewPCG(11, 12))
	type held struct {
		h        uint64
		windowed bool
		expires  int64 // ns
	}
	model := map[string]held{}
	var lost, gone uint64
	var lostCounters uint64
	now := int64(1_000_000_000)
	for step := range 20_000 {
		now += rng.Int64N(5 * nsPerMs / 2)
		k := rng.IntN(1000)
		key := fmt.Sprint(k)
		m, ok := model[key]
		if !ok {
			m = held{h: rng.Uint64(), windowed: k%2 == 1}
		}
		if m.windowed {
			expMs := bucket.Millis(now) + 1 + rng.Int64N(300)
			s.putWindow(key, m.h, counterExpiring(rng, expMs), now)
			m.expires = expMs * nsPerMs
		} else {
			m.expires = now + 1 + rng.Int64N(300*nsPerMs)
			s.putTAT(key, m.h, m.expires, now)
		}
		model[key] = m
		for k, m := range model {
			if s.find(k, m.h, m.windowed) != None {
				continue
			}
			if m.expires > now {
				lost++
				if m.windowed {
					lostCounters++
				}
			} else {
				gone++
			}
			delete(model, k)
		}
		if s.evictedNotFull != lost || s.evicted < lost {
			t.Fatalf("step %d: %d evicted, %d not full; %d entries went before they expired", step, s.evicted, s.evictedNotFull, lost)
		}
	}
	if lost == 0 || gone == 0 || lostCounters == 0 || lostCounters == lost {
		t.Fatalf("%d went before they expired (%d counters), %d after: the test did not cover every case", lost, lostCounters, gone)
	}
	t.Logf("%d entries went before they expired (%d counters), %d after; %d evictions", lost, lostCounters, gone, s.evicted)
}
