package table

import (
	"math"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/calendar"
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
//
// The same slot holds a calendar counter (calendar.Counter), told apart by
// a negative Period: −Tag, with Cur its hits and Prev its Start, expiring
// at its End. A window counter's Period is at least a second, and a Tag is
// positive, so neither is ever read as the other.
type Window struct {
	Period, Cur, Prev int64
}

// hits is how many hits w counts, of both windows (of a calendar counter,
// its one count): among counters that expire together, the one with fewer
// gives less back when evicted.
func (w Window) hits() int64 {
	if w.Period < 0 {
		return w.Cur
	}
	return w.Cur + w.Prev
}

// calendarCounter is the calendar.Counter w and its expiry (ms) were made
// from, or the zero Counter when w is a window counter.
func (w Window) calendarCounter(exp int64) calendar.Counter {
	if w.Period >= 0 {
		return calendar.Counter{}
	}
	return calendar.Counter{Tag: -w.Period, Start: w.Prev, End: exp, Used: w.Cur}
}

// counter is the window.Counter w and its expiry (ms) were made from.
func (w Window) counter(exp int64) window.Counter {
	start := exp - w.Period
	if w.Cur > 0 {
		start -= w.Period
	}
	return window.Counter{Period: w.Period, Start: start, Cur: w.Cur, Prev: w.Prev}
}

// Store is one shard's entries: GCRA buckets in one table, each expiring
// at its TAT in nanoseconds, and window counters in another, each expiring
// at its Expires in milliseconds (the window package's unit, in which no
// expiry overflows). The
// two hold at most capacity entries together. A key is looked up in the
// table of the algorithm that asks: a counter is never read as a bucket,
// nor a bucket as a counter. Its zero value holds nothing; call Init
// before use.
type Store struct {
	capacity int
	gcra     Table[none]
	windows  Table[Window]
	// leases are the concurrency buckets (see Leases).
	leases Leases
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
func (s *Store) Len() int { return s.gcra.count + s.windows.count + s.leases.len() }

// Evicted returns how many entries were removed to stay within capacity.
func (s *Store) Evicted() uint64 { return s.evicted }

// EvictedNotFull returns how many of the evicted entries had not expired:
// GCRA buckets that were not full, window counters still counting.
func (s *Store) EvictedNotFull() uint64 { return s.evictedNotFull }

// Each kind of entry has methods of its own, which pass a TAT or a
// window.Counter rather than a whole bucket.State, and which the compiler
// may inline into the memory source: a call of a method of a generic type
// from other code is not inlined, so each of these makes at most one such
// call on its common path, and a GCRA decision costs no more calls than
// one table of buckets alone would.

// GetTAT returns the position and TAT of key's GCRA bucket, whose hash is
// h, at now (unix ns): None and gcra.Missing when it has none, or when its
// bucket is full (which is then forgotten on the spot).
func (s *Store) GetTAT(key string, h uint64, now int64) (int, int64) {
	if i := s.gcra.Find(key, h); i != None {
		if tat := s.gcra.table[i].exp; tat > now {
			return i, tat
		}
		s.gcra.removeAt(i)
	}
	return None, gcra.Missing
}

// PutTAT stores tat as key's GCRA bucket, whose hash is h. i is key's
// position there, as GetTAT or FindTAT returned it since the table last
// changed (None when it had nothing), saving a probe. A TAT that is not
// after now describes a full bucket, so it is removed instead of stored.
// A new bucket is pinned when pin is set (see Pin). PutTAT reports whether
// making room evicted an entry that had not expired.
func (s *Store) PutTAT(key string, h uint64, i int, tat, now int64, pin bool) bool {
	if i != None && tat > now {
		// The common write, put's second case, without the call.
		s.gcra.table[i].exp = tat
		return false
	}
	return put(s, &s.gcra, key, h, i, tat, none{}, now, now, pin)
}

// GetWindow is GetTAT for a window counter: its position and the counter,
// or None and the zero Counter when it has none that counts at now.
func (s *Store) GetWindow(key string, h uint64, now int64) (int, window.Counter) {
	i, exp, w := s.windows.get(key, h, bucket.Millis(now))
	if i == None {
		return None, window.Counter{}
	}
	return i, w.counter(exp)
}

// PutWindow is PutTAT for a window counter: a counter that counts nothing
// at now (c.Expires() is not after it) is removed instead of stored.
func (s *Store) PutWindow(key string, h uint64, i int, c *window.Counter, now int64, pin bool) bool {
	return put(s, &s.windows, key, h, i, c.Expires(), Window{Period: c.Period, Cur: c.Cur, Prev: c.Prev}, bucket.Millis(now), now, pin)
}

// GetCalendar is GetWindow for a calendar counter, kept in the table of
// window counters: its position and the counter, or None and the zero
// Counter when it has none that counts at now.
func (s *Store) GetCalendar(key string, h uint64, now int64) (int, calendar.Counter) {
	i, exp, w := s.windows.get(key, h, bucket.Millis(now))
	if i == None {
		return None, calendar.Counter{}
	}
	return i, w.calendarCounter(exp)
}

// PutCalendar is PutWindow for a calendar counter: one without hits, or
// whose period has ended at now, is removed instead of stored.
func (s *Store) PutCalendar(key string, h uint64, i int, c *calendar.Counter, now int64, pin bool) bool {
	exp := c.End
	if c.Used <= 0 {
		exp = 0
	}
	return put(s, &s.windows, key, h, i, exp, Window{Period: -c.Tag, Cur: c.Used, Prev: c.Start}, bucket.Millis(now), now, pin)
}

// put stores an entry in table t, whose unit of time makes tnow of now
// (unix ns), for PutTAT and PutWindow.
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
	if s.Len() >= s.capacity {
		evictedNotFull = s.evict(now)
	}
	var flags uint64
	if pin {
		flags = pinned
	}
	t.insert(key, h, exp, v, flags)
	return evictedNotFull
}

// FindTAT returns the position of key's GCRA bucket, or None.
func (s *Store) FindTAT(key string, h uint64) int { return s.gcra.Find(key, h) }

// FindWindow returns the position of key's window counter, or None.
func (s *Store) FindWindow(key string, h uint64) int { return s.windows.Find(key, h) }

// Pin marks the entry at position i of the table of its kind (windowed,
// which holds window and calendar counters, or GCRA; None: no entry) as one eviction must not choose, until Unpin.
func (s *Store) Pin(windowed bool, i int) {
	switch {
	case i == None:
	case windowed:
		s.windows.table[i].meta |= pinned
	default:
		s.gcra.table[i].meta |= pinned
	}
}

// Unpin lets eviction choose the entry at position i of the table of its
// kind (None: no entry) again.
func (s *Store) Unpin(windowed bool, i int) {
	switch {
	case i == None:
	case windowed:
		s.windows.table[i].meta &^= pinned
	default:
		s.gcra.table[i].meta &^= pinned
	}
}

// Take removes key's entry from the table of its kind (counted, for a
// window or calendar counter, or GCRA) and returns the state it held at
// now (bucket.Empty if none, or if it had expired), as both a window and a
// calendar counter when counted: the caller's op reads the one of its
// algorithm.
func (s *Store) Take(key string, h uint64, counted bool, now int64) bucket.State {
	if counted {
		i, exp, w := s.windows.get(key, h, bucket.Millis(now))
		if i == None {
			return bucket.Empty
		}
		s.windows.removeAt(i)
		return bucket.State{TAT: gcra.Missing, Window: w.counter(exp), Calendar: w.calendarCounter(exp)}
	}
	i, tat := s.GetTAT(key, h, now)
	if i != None {
		s.gcra.removeAt(i)
	}
	return bucket.State{TAT: tat}
}

// forgetExpired moves the sweep of each table that holds entries on.
func (s *Store) forgetExpired(now int64) {
	if s.gcra.count > 0 {
		s.gcra.forgetExpired(now)
	}
	if s.windows.count > 0 {
		s.windows.forgetExpired(bucket.Millis(now))
	}
	if s.leases.len() > 0 {
		s.leases.forgetExpired(bucket.Millis(now))
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
		nowMs := bucket.Millis(now)
		i, exp, p, expired := s.windows.candidate(nowMs)
		if expired {
			s.windows.removeAt(i)
			s.evicted++
			return false
		}
		w, wLeft, wPinned = i, msLeft(exp, now, nowMs), p
	}
	if s.leases.len() > 0 {
		if evicted, lost := s.evictLeases(now, g != None && !gPinned, gLeft, w != None && !wPinned, wLeft); evicted {
			return lost
		}
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
