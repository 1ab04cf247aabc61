package table

import (
	"math"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// nsPerMs converts the window package's milliseconds to nanoseconds.
const nsPerMs = 1_000_000

// Window is a window counter as its table holds it, beside the slot's
// expiry. The counter's Start is not kept: a counter is only stored while
// it holds hits, and then its expiry is Start + 2·Period when its current
// window has hits and Start + Period when only the previous one does, so
// the expiry gives Start back exactly. That keeps a counter's slot at 56
// bytes instead of 64.
type Window struct {
	Period, Cur, Prev int64
}

// hits is how many hits w counts, of both windows: among counters that
// expire together, the one with fewer gives less back when evicted.
func (w Window) hits() int64 { return w.Cur + w.Prev }

// counter is the window.Counter w and its expiry (ms) were made from.
func (w Window) counter(exp int64) window.Counter {
	start := exp - w.Period
	if w.Cur > 0 {
		start -= w.Period
	}
	return window.Counter{Period: w.Period, Start: start, Cur: w.Cur, Prev: w.Prev}
}

// Store is one shard's entries: GCRA buckets in one table, keyed by TAT
// in nanoseconds, and window counters in another, keyed by expiry in
// milliseconds (the window package's unit, so no expiry overflows). The
// two hold at most capacity entries together. A key is looked up in the
// table of the algorithm that asks: a counter is never read as a bucket,
// nor a bucket as a counter. Its zero value holds nothing; call Init
// before use.
type Store struct {
	capacity int
	gcra     Table[none]
	windows  Table[Window]
	// evicted counts the entries removed to stay within capacity, and
	// evictedNotFull those of them that still counted something: a
	// subscriber's spent tokens, or counted hits, given back.
	evicted        uint64
	evictedNotFull uint64
}

// Init sets the most entries s holds.
func (s *Store) Init(capacity int) {
	s.capacity = capacity
	s.gcra.init(capacity)
	s.windows.init(capacity)
}

// Capacity returns the most entries s holds.
func (s *Store) Capacity() int { return s.capacity }

// Len returns how many entries s holds, of both kinds, some of which may
// have expired since they were last touched.
func (s *Store) Len() int { return s.gcra.count + s.windows.count }

// Evicted returns how many entries were removed to stay within capacity.
func (s *Store) Evicted() uint64 { return s.evicted }

// EvictedNotFull returns how many of the evicted entries had not expired:
// GCRA buckets that were not full, window counters still counting.
func (s *Store) EvictedNotFull() uint64 { return s.evictedNotFull }

// Get returns the position and state of key, whose hash is h, in the
// table of its algorithm (windowed or GCRA), at now (unix ns): None and
// bucket.Empty when nothing is stored or what is stored has expired (and
// is forgotten on the spot).
func (s *Store) Get(key string, h uint64, windowed bool, now int64) (int, bucket.State) {
	if windowed {
		i, c := s.GetWindow(key, h, now)
		return i, bucket.State{TAT: gcra.Missing, Window: c}
	}
	i, tat := s.GetTAT(key, h, now)
	return i, bucket.State{TAT: tat}
}

// Put stores st under key, whose hash is h, in the table of its
// algorithm: its TAT, or its window counter. i is key's position there,
// as Get or Find returned it since the table last changed (None when it
// had nothing), saving a probe. A state that has expired at now is removed
// instead of stored. A new entry is pinned when pin is set (see Pin). Put
// reports whether making room evicted an entry that had not expired.
func (s *Store) Put(key string, h uint64, windowed bool, i int, st *bucket.State, now int64, pin bool) bool {
	if windowed {
		return s.PutWindow(key, h, i, &st.Window, now, pin)
	}
	return s.PutTAT(key, h, i, st.TAT, now, pin)
}

// GetTAT is Get for a GCRA bucket: its position and TAT, or None and
// gcra.Missing. The GCRA path has methods of its own, which pass a TAT
// rather than a whole bucket.State, because it is the path of most
// decisions.
func (s *Store) GetTAT(key string, h uint64, now int64) (int, int64) {
	// The table's generic get written out: a call through a generic
	// method is not inlined.
	if i := s.gcra.Find(key, h); i != None {
		if tat := s.gcra.table[i].exp; tat > now {
			return i, tat
		}
		s.gcra.removeAt(i)
	}
	return None, gcra.Missing
}

// PutTAT is Put for a GCRA bucket.
func (s *Store) PutTAT(key string, h uint64, i int, tat, now int64, pin bool) bool {
	if i != None && tat > now {
		// The common write, put's second case, without the call.
		s.gcra.table[i].exp = tat
		return false
	}
	return put(s, &s.gcra, key, h, i, tat, none{}, now, now, pin)
}

// GetWindow is Get for a window counter: its position and the counter, or
// None and the zero Counter.
func (s *Store) GetWindow(key string, h uint64, now int64) (int, window.Counter) {
	i, exp, w := s.windows.get(key, h, msOf(now))
	if i == None {
		return None, window.Counter{}
	}
	return i, w.counter(exp)
}

// PutWindow is Put for a window counter.
func (s *Store) PutWindow(key string, h uint64, i int, c *window.Counter, now int64, pin bool) bool {
	return put(s, &s.windows, key, h, i, c.Expires(), Window{Period: c.Period, Cur: c.Cur, Prev: c.Prev}, msOf(now), now, pin)
}

// put is Put on table t, whose unit of time makes tnow of now (unix ns).
func put[V value](s *Store, t *Table[V], key string, h uint64, i int, exp int64, v V, tnow, now int64, pin bool) (evictedNotFull bool) {
	if exp <= tnow {
		if i != None {
			t.removeAt(i)
		}
		return false
	}
	if i != None {
		sl := &t.table[i]
		sl.exp, sl.val = exp, v
		return false
	}
	s.forgetExpired(now)
	if s.gcra.count+s.windows.count >= s.capacity {
		evictedNotFull = s.evict(now)
	}
	var flags uint64
	if pin {
		flags = pinned
	}
	t.insert(key, h, exp, v, flags)
	return evictedNotFull
}

// Find returns the position of key, whose hash is h, in the table of its
// algorithm, or None.
func (s *Store) Find(key string, h uint64, windowed bool) int {
	if windowed {
		return s.windows.Find(key, h)
	}
	return s.gcra.Find(key, h)
}

// Pin marks the entry at position i of the table of its algorithm (None:
// no entry) as one eviction must not choose, until Unpin.
func (s *Store) Pin(windowed bool, i int) {
	if windowed {
		s.windows.Pin(i)
	} else {
		s.gcra.Pin(i)
	}
}

// Unpin lets eviction choose key's entry again, if it has one.
func (s *Store) Unpin(key string, h uint64, windowed bool) {
	if windowed {
		s.windows.Unpin(key, h)
	} else {
		s.gcra.Unpin(key, h)
	}
}

// Take removes key's entry from the table of its algorithm and returns
// the state it held at now (bucket.Empty if none, or if it had expired).
func (s *Store) Take(key string, h uint64, windowed bool, now int64) bucket.State {
	i, st := s.Get(key, h, windowed, now)
	if i != None {
		if windowed {
			s.windows.removeAt(i)
		} else {
			s.gcra.removeAt(i)
		}
	}
	return st
}

// forgetExpired moves the sweep of each table that holds entries on.
func (s *Store) forgetExpired(now int64) {
	if s.gcra.count > 0 {
		s.gcra.forgetExpired(now)
	}
	if s.windows.count > 0 {
		s.windows.forgetExpired(msOf(now))
	}
}

// evict frees room for one entry in a store at its capacity, and reports
// whether the entry it removed had not expired. It takes each table's
// candidate (see Table.candidate): an expired entry as soon as one is
// met, whose loss no answer can tell; else, of the two, the one with the
// least time left until it expires, preferring one that is not pinned
// (and, at equal times, the bucket).
//
// The least time left is the least unfair choice for either kind, because
// it bounds what the evicted subscriber gains. An evicted GCRA bucket
// reads as full: its subscriber gains the tokens it would have regained
// by its TAT, in proportion to the time left. An evicted window counter
// reads as no hits: its subscriber's hits stop counting now instead of at
// the counter's expiry, so the time left is how long the loss lasts, and
// a sliding window's hits weigh less the nearer that expiry is. A counter
// whose hits are all in the previous window thus goes before one with
// hits in the current window, as one spent on longest ago would under
// least-recently-used eviction, but measured by what is lost rather than
// by when it was touched, and without a write on every read. Within one
// window, every counter of a limit expires at the same instant whatever
// it counted; among those the one with fewest hits goes (see candidate),
// so a flood of one-hit spends on fresh ids in a window evicts its own
// counters before a subscriber's full window, as a flood of cheap spends
// evicts its own buckets before an emptied one.
//
// Amounts are not compared across limits or kinds: a table holds no
// limit, so it cannot tell how much of a limit a TAT or a count is, and a
// token of one limit is no measure of a hit of another anyway.
func (s *Store) evict(now int64) (notFull bool) {
	g, w := None, None
	var gLeft, wLeft int64
	var gPinned, wPinned bool
	if s.gcra.count > 0 {
		i, exp, p, expired := s.gcra.candidate(now)
		if expired {
			s.gcra.removeAt(i)
			s.evicted++
			return false
		}
		g, gLeft, gPinned = i, nsLeft(exp, now), p
	}
	if s.windows.count > 0 {
		nowMs := msOf(now)
		i, exp, p, expired := s.windows.candidate(nowMs)
		if expired {
			s.windows.removeAt(i)
			s.evicted++
			return false
		}
		w, wLeft, wPinned = i, msLeft(exp, now, nowMs), p
	}
	s.evicted++
	s.evictedNotFull++
	if w != None && (g == None || (gPinned && !wPinned) || (gPinned == wPinned && wLeft < gLeft)) {
		s.windows.removeAt(w)
	} else {
		s.gcra.removeAt(g)
	}
	return true
}

// nsLeft is exp − now, for exp > now, in ns; the largest int64 if that
// does not fit.
func nsLeft(exp, now int64) int64 {
	if d := exp - now; d > 0 {
		return d
	}
	return math.MaxInt64
}

// msLeft is how long from now (ns, whose floor in ms is nowMs) until
// expMs (a ms after nowMs), in ns; the largest int64 if that does not fit.
func msLeft(expMs, now, nowMs int64) int64 {
	d := expMs - nowMs
	if d > math.MaxInt64/nsPerMs {
		return math.MaxInt64
	}
	// now − nowMs·1e6 is in [0, 1e6), also where the product wraps.
	return d*nsPerMs - (now - nowMs*nsPerMs)
}

// msOf is now (unix ns) in whole ms, rounded down, as the window
// arithmetic reads it.
func msOf(now int64) int64 {
	ms := now / nsPerMs
	if now%nsPerMs < 0 {
		ms--
	}
	return ms
}
