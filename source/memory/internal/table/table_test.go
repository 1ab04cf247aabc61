package table

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/limiter-dev/limiter/internal/boundedtable"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// A GCRA bucket's slot stays 32 bytes (its value takes no room) and a
// window counter's is 56: the sizes the package doc and the memory
// source's documentation give.
func TestSlotSizes(t *testing.T) {
	if n := unsafe.Sizeof(slot[none]{}); n != 32 {
		t.Errorf("a GCRA slot is %d bytes, want 32", n)
	}
	if n := unsafe.Sizeof(slot[Window]{}); n != 56 {
		t.Errorf("a window slot is %d bytes, want 56", n)
	}
}

// A window counter with hits comes back from its table exactly: its
// expiry gives its Start back, for counters with hits in the current
// window, the previous one or both, at any alignment and before 1970 too.
func TestWindowCounterRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for range 100_000 {
		c := window.Counter{Period: 1 + rng.Int64N(1<<36), Start: rng.Int64N(1<<45) - 1<<44}
		switch rng.IntN(3) {
		case 0:
			c.Cur = 1 + rng.Int64N(1<<53-1)
		case 1:
			c.Prev = 1 + rng.Int64N(1<<53-1)
		default:
			c.Cur, c.Prev = 1+rng.Int64N(1<<53-1), 1+rng.Int64N(1<<53-1)
		}
		w := Window{Period: c.Period, Cur: c.Cur, Prev: c.Prev}
		if got := w.counter(c.Expires()); got != c {
			t.Fatalf("%+v comes back as %+v", c, got)
		}
	}
}

// The store against plain maps, under random puts, reads, writes of
// expired states and deletes of both kinds, with hashes made to collide:
// 40 keys share one home, so probe runs are long, wrap round the end of
// the table and are cut in the middle by deletes. A key may hold a bucket
// and a counter at once, each in its own table. After every step each
// key the model holds must be found with its state, and no other.
func TestStoreAgainstModel(t *testing.T) {
	const now int64 = 1_000_000_000_000 // 1,000,000 ms: whole ms, for the counters
	const nowMs = now / nsPerMs
	rebuilds := 0
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var s Store
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
			// and the keys themselves must tell the entries apart.
			hashes[i] = uint64(0xFFFF_FFFF-rng.IntN(4))<<32 | uint64(i)<<1
		}
		tats := map[string]int64{}
		counters := map[string]window.Counter{}
		for step := range 6000 {
			k := rng.IntN(len(keys))
			key, h := keys[k], hashes[k]
			arena := len(s.gcra.arena) + len(s.windows.arena)
			switch rng.IntN(8) {
			case 0, 1: // store a TAT after now
				tat := now + 1 + rng.Int64N(100)
				s.putTAT(key, h, tat, now)
				tats[key] = tat
			case 2: // store a full bucket: removes
				s.putTAT(key, h, now, now)
				delete(tats, key)
			case 3, 4: // store a counter that counts
				c := counterExpiring(rng, nowMs+1+rng.Int64N(100))
				s.putWindow(key, h, c, now)
				counters[key] = c
			case 5: // store a counter past its windows: removes
				c := counterExpiring(rng, nowMs-rng.Int64N(3))
				s.putWindow(key, h, c, now)
				delete(counters, key)
			case 6:
				want, had := tats[key]
				if !had {
					want = gcra.Missing
				}
				if got := s.Take(key, h, false, now); got.TAT != want {
					t.Fatalf("seed %d step %d: take(%s) = %+v, want TAT %d", seed, step, key, got, want)
				}
				delete(tats, key)
			case 7:
				want := counters[key]
				if got := s.Take(key, h, true, now); got.Window != want {
					t.Fatalf("seed %d step %d: take(%s) = %+v, want counter %+v", seed, step, key, got, want)
				}
				delete(counters, key)
			}
			if s.gcra.count != len(tats) || s.windows.count != len(counters) || s.Len() != len(tats)+len(counters) {
				t.Fatalf("seed %d step %d: counts %d and %d, model holds %d and %d", seed, step, s.gcra.count, s.windows.count, len(tats), len(counters))
			}
			if len(s.gcra.arena)+len(s.windows.arena) < arena {
				rebuilds++
			}
			if live := s.gcra.arenaLive(); live != len(s.gcra.arena)-s.gcra.deadBytes {
				t.Fatalf("seed %d step %d: arena of %d bytes, %d dead, but %d live", seed, step, len(s.gcra.arena), s.gcra.deadBytes, live)
			}
			if live := s.windows.arenaLive(); live != len(s.windows.arena)-s.windows.deadBytes {
				t.Fatalf("seed %d step %d: window arena of %d bytes, %d dead, but %d live", seed, step, len(s.windows.arena), s.windows.deadBytes, live)
			}
			for i, key := range keys {
				_, tat := s.GetTAT(key, hashes[i], now)
				want, ok := tats[key]
				if !ok {
					want = gcra.Missing
				}
				if tat != want {
					t.Fatalf("seed %d step %d: %s reads TAT %d, want %d", seed, step, key, tat, want)
				}
				if _, c := s.GetWindow(key, hashes[i], now); c != counters[key] {
					t.Fatalf("seed %d step %d: %s reads counter %+v, want %+v", seed, step, key, c, counters[key])
				}
			}
		}
	}
	if rebuilds == 0 {
		t.Fatal("no arena rebuild happened: the model did not cover it")
	}
	t.Logf("%d arena rebuilds", rebuilds)
}

// An entry is forgotten from the instant it expires and not a
// nanosecond before: a bucket at its TAT, a counter at its expiry in ms
// (read at any nanosecond of that ms).
func TestEntriesExpireExactly(t *testing.T) {
	const now int64 = 5_000_000_123_456 // 5,000,000 ms and a fraction
	var s Store
	s.Init(10)
	c := window.Counter{Period: 1000, Start: 4_999_000, Cur: 3} // expires at 5,001,000 ms
	s.putTAT("b", 1<<40, now+5, now)
	s.putWindow("w", 2<<40, c, now)
	if _, tat := s.GetTAT("b", 1<<40, now+4); tat != now+5 {
		t.Fatalf("a ns before its TAT, the bucket reads %d", tat)
	}
	if i, _ := s.GetTAT("b", 1<<40, now+5); i != None || s.gcra.count != 0 {
		t.Fatal("at its TAT, the bucket is still held")
	}
	lastNs := int64(5_001_000)*nsPerMs - 1
	if _, got := s.GetWindow("w", 2<<40, lastNs); got != c {
		t.Fatalf("in the last ns before its expiry, the counter reads %+v", got)
	}
	if i, _ := s.GetWindow("w", 2<<40, lastNs+1); i != None || s.windows.count != 0 {
		t.Fatal("at its expiry, the counter is still held")
	}
}

// A bound far below the keys that arrive is held exactly, through growth
// of the tables and eviction, with buckets and counters arriving mixed,
// and every held key still found.
func TestStoreHoldsItsCapacity(t *testing.T) {
	const now int64 = 1_000_000_000
	for _, windowShare := range []int{0, 1, 2} { // none, half, all counters
		var s Store
		s.Init(100)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 5000 {
			key := fmt.Sprint(i)
			h := rng.Uint64()
			if rng.IntN(2) < windowShare {
				s.putWindow(key, h, counterExpiring(rng, now/nsPerMs+10), now)
			} else {
				s.putTAT(key, h, now+10, now)
			}
			if s.Len() > 100 {
				t.Fatalf("share %d, after %d inserts: %d entries, bound 100", windowShare, i+1, s.Len())
			}
			if s.gcra.Find(key, h) == None && s.windows.Find(key, h) == None {
				t.Fatalf("share %d, insert %d: the new key is not found", windowShare, i)
			}
		}
		if s.Len() != 100 || s.evicted != 4900 {
			t.Fatalf("share %d: %d entries, evicted %d; want 100 and 4900", windowShare, s.Len(), s.evicted)
		}
		held := heldAndFound(t, &s.gcra) + heldAndFound(t, &s.windows)
		if held != 100 {
			t.Fatalf("share %d: %d slots in use, count says 100", windowShare, held)
		}
	}
}

// heldAndFound counts the slots of t in use, each of which must be found
// where it is.
func heldAndFound[V value](t *testing.T, tb *Table[V]) int {
	t.Helper()
	held := 0
	for i := range tb.table {
		if tb.table[i].meta != 0 {
			held++
			if key := tb.keyAt(i); tb.Find(key, tb.table[i].meta) != i {
				t.Fatalf("%s at %d is not found there", key, i)
			}
		}
	}
	if held != tb.count {
		t.Fatalf("%d slots in use, count says %d", held, tb.count)
	}
	return held
}

// The arena of long keys stays within a small multiple of the bytes of the
// keys held, however many long keys come and go, and every key held is
// found after each rebuild.
func TestArenaStaysBounded(t *testing.T) {
	const now int64 = 1_000
	var s Store
	s.Init(200)
	rng := rand.New(rand.NewPCG(3, 4))
	rebuilt := 0
	for i := range 50_000 {
		key := fmt.Sprintf("8:%d.%s", i, strings.Repeat("x", rng.IntN(60)))
		before := len(s.gcra.arena)
		s.putTAT(key, rng.Uint64(), now+10, now)
		if len(s.gcra.arena) < before {
			rebuilt++
			heldAndFound(t, &s.gcra)
		}
		if live := s.gcra.arenaLive(); len(s.gcra.arena) > 2*live+4096+len(key) {
			t.Fatalf("insert %d: arena of %d bytes holds %d live", i, len(s.gcra.arena), live)
		}
	}
	if rebuilt == 0 {
		t.Fatal("the arena was never rebuilt")
	}
	if s.Len() != 200 {
		t.Fatalf("count %d, want 200", s.Len())
	}
}

// A table grows by doubling, but never past what the store's capacity
// needs at three quarters full, and always keeps an empty slot.
func TestTableStopsAtItsLimit(t *testing.T) {
	const now int64 = 1_000
	for _, capacity := range []int{1, 2, 3, 5, 100, 3906, 4096} {
		var s Store
		s.Init(capacity)
		tb := &s.gcra
		rng := rand.New(rand.NewPCG(5, uint64(capacity)))
		for i := range 3 * capacity {
			s.putTAT(fmt.Sprint(i), rng.Uint64(), now+10, now)
			if tb.count*4 > len(tb.table)*3 || tb.count >= len(tb.table) {
				t.Fatalf("capacity %d, insert %d: %d entries in %d slots", capacity, i, tb.count, len(tb.table))
			}
		}
		if tb.count != capacity || len(tb.table) != tb.limit || tb.limit*3 < capacity*4 || (tb.limit-1)*3 >= capacity*4 {
			t.Fatalf("capacity %d: %d entries, table %d, limit %d", capacity, tb.count, len(tb.table), tb.limit)
		}
	}
}

// boundedtable.KeyOf tells every two keys of the same length apart (its two words
// determine the key), and keyAt gets the key back, at every length a slot
// holds. Keys over a two-letter alphabet make near-misses common.
func TestKeyOfDeterminesTheKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for n := 0; n <= maxInline; n++ {
		seen := map[[2]uint64]string{}
		var s Store
		s.Init(4096)
		for range 2000 {
			b := make([]byte, n)
			for i := range b {
				b[i] = "ab"[rng.IntN(2)]
			}
			key := string(b)
			_, k0, k1 := boundedtable.KeyOf(key, 0)
			if other, ok := seen[[2]uint64{k0, k1}]; ok && other != key {
				t.Fatalf("length %d: %q and %q are held alike", n, key, other)
			}
			seen[[2]uint64{k0, k1}] = key
			h := rng.Uint64()
			s.putTAT(key, h, 2, 1)
			if i := s.gcra.Find(key, h); i == None || s.gcra.keyAt(i) != key {
				t.Fatalf("length %d: %q not found, or read back wrong", n, key)
			}
		}
	}
}

// A full table that keeps taking new keys (each evicting one) keeps its
// probe runs within twice as long as when it was first filled, whether
// eviction chooses by expiry among entries that differ (spread) or falls
// back on the hand's order among equal ones (equal). A hand that stepped
// to the next slot, or a sample that began wherever the hand stood, fails
// it (see candidate).
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
			var s Store
			s.Init(3906)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range 3906 {
				s.putTAT(fmt.Sprint(i), rng.Uint64(), now+10, now)
			}
			fresh := s.gcra.missProbe()
			for i := range 4 * 3906 {
				s.putTAT(fmt.Sprint("new", i), rng.Uint64(), now+10+rng.Int64N(c.spread+1), now)
			}
			if s.evicted != 4*3906 || s.evictedNotFull != s.evicted {
				t.Fatalf("%d evictions, %d not full; want %d of each", s.evicted, s.evictedNotFull, 4*3906)
			}
			churned := s.gcra.missProbe()
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
		s := Table[none]{table: make([]slot[none], n), stride: strideFor(n)}
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
