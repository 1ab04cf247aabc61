package table

import (
	"math"

	"github.com/limiter-dev/limiter/internal/boundedtable"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// Rates is one rate counter of the memory source: the per-second hits of
// each of its entries (ratecounter.Counter), bounded in number. It does no
// locking; its owner holds the lock that guards it.
//
// A counter is stored compactly and exactly: its newest second, and each
// second's hits as a uint16, or, for an entry with a second above 65,535
// hits, all of them as uint32 in a slab of widened rings beside the
// entries (an entry goes back to the narrow form when its seconds all fit
// again). An entry, its key and its place in the recency list take 168
// bytes in dense slices (boundedtable.Recency), plus its word in the key
// index.
//
// An entry whose counter is Empty (no hit in its last Seconds seconds)
// counts nothing, which is also what a missing one means: reading it
// forgets it, a write that leaves it empty removes it, and every insert
// first drops the empty entries at the least recently incremented end of
// the list. At its capacity, an insert evicts the least recently
// incremented entry. Recency is the order in which increments reach the
// table: an increment moves its entry to the front.
type Rates struct {
	// ents are the entries in the order of their last increment.
	ents boundedtable.Recency[rateEntry]
	// wide holds the widened rings, by rateEntry.wide − 1; free lists
	// the places in it no entry uses.
	wide    [][ratecounter.Seconds]uint32
	free    []int32
	evicted uint64
}

// rateEntry is one counter.
type rateEntry struct {
	last int64
	// wide is 1 + the place of its ring in Rates.wide, 0 when hits holds
	// its seconds.
	wide int32
	hits [ratecounter.Seconds]uint16
}

// Len returns how many entries r holds, some of which may have become
// empty since they were last touched.
func (r *Rates) Len() int { return r.ents.Len() }

// Evicted returns how many entries were removed to stay within capacity.
func (r *Rates) Evicted() uint64 { return r.evicted }

// Get loads key's counter, whose hash is h, into c and reports whether r
// held one that counts something at second s. An empty entry is forgotten
// on the spot; c is then the zero Counter.
func (r *Rates) Get(key string, h uint64, s int64, c *ratecounter.Counter) bool {
	p := r.ents.Find(key, h)
	if p == None {
		*c = ratecounter.Counter{}
		return false
	}
	r.load(p, c)
	if c.Empty(s) {
		r.remove(p)
		*c = ratecounter.Counter{}
		return false
	}
	return true
}

// Put stores c as key's counter at second s. A counter that is empty at s
// is removed instead. incremented says hits were added to it, which makes
// it the most recently incremented entry (a new entry is, whatever it
// says). A new entry is inserted within capacity (at least 1): see Rates.
// Put reports whether it evicted an entry that was not empty.
func (r *Rates) Put(key string, h uint64, c *ratecounter.Counter, s int64, capacity int, incremented bool) (evicted bool) {
	p := r.ents.Find(key, h)
	if c.Empty(s) {
		if p != None {
			r.remove(p)
		}
		return false
	}
	if p == None {
		evicted = r.makeRoom(s, max(capacity, 1))
		p = r.ents.Add(key, h, rateEntry{})
	} else if incremented {
		r.ents.Touch(p)
	}
	r.store(p, c)
	return evicted
}

// Delete removes key's counter, if r holds one.
func (r *Rates) Delete(key string, h uint64) {
	if p := r.ents.Find(key, h); p != None {
		r.remove(p)
	}
}

// makeRoom drops the empty entries at the tail of the recency list, then
// evicts from the tail while r holds capacity entries or more (more when
// the capacity was lowered since they were inserted). An entry that reads
// as empty only because its last second is a minute or more after s (the
// clock went back) is not dropped: its hits count again once the clock is
// there, as they do on Redis, and another id's insert must not lose them.
func (r *Rates) makeRoom(s int64, capacity int) (evicted bool) {
	for p := r.ents.Oldest(); p != None && s > r.ents.At(p).last-ratecounter.Seconds && r.emptyAt(p, s); p = r.ents.Oldest() {
		r.remove(p)
	}
	for r.ents.Len() >= capacity {
		r.remove(r.ents.Oldest())
		r.evicted++
		evicted = true
	}
	return evicted
}

// hitsAt returns the hits held in slot i of entry p.
func (r *Rates) hitsAt(p, i int) uint32 {
	e := r.ents.At(p)
	if e.wide != 0 {
		return r.wide[e.wide-1][i]
	}
	return uint32(e.hits[i])
}

// emptyAt is ratecounter.Counter.Empty on entry p, without loading it.
func (r *Rates) emptyAt(p int, s int64) bool {
	last := r.ents.At(p).last
	if s <= last-ratecounter.Seconds {
		return true // the clock went back a minute: the next add starts afresh
	}
	for t := last; t > last-ratecounter.Seconds && t > s-ratecounter.Seconds; t-- {
		if r.hitsAt(p, slotOf(t)) > 0 {
			return false
		}
	}
	return true
}

// load copies entry p into c.
func (r *Rates) load(p int, c *ratecounter.Counter) {
	e := r.ents.At(p)
	c.Last = e.last
	if e.wide != 0 {
		c.Hits = r.wide[e.wide-1]
		return
	}
	for i, n := range e.hits {
		c.Hits[i] = uint32(n)
	}
}

// store copies c into entry p, in the narrow form when every second fits.
func (r *Rates) store(p int, c *ratecounter.Counter) {
	e := r.ents.At(p)
	e.last = c.Last
	narrow := true
	for _, n := range c.Hits {
		if n > math.MaxUint16 {
			narrow = false
			break
		}
	}
	if !narrow {
		if e.wide == 0 {
			e.wide = r.allocWide()
		}
		r.wide[e.wide-1] = c.Hits
		return
	}
	if e.wide != 0 {
		r.freeWide(e.wide)
		e.wide = 0
	}
	for i, n := range c.Hits {
		e.hits[i] = uint16(n)
	}
}

// allocWide returns 1 + a free place in r.wide.
func (r *Rates) allocWide() int32 {
	if n := len(r.free); n > 0 {
		w := r.free[n-1]
		r.free = r.free[:n-1]
		return w
	}
	r.wide = append(r.wide, [ratecounter.Seconds]uint32{})
	return int32(len(r.wide))
}

// freeWide gives back the place of ring w (1 + its index); the slab is
// released once no entry uses it.
func (r *Rates) freeWide(w int32) {
	r.free = append(r.free, w)
	if len(r.free) == len(r.wide) {
		r.wide, r.free = nil, nil
	}
}

// remove drops entry p, moving the last entry into its position.
func (r *Rates) remove(p int) {
	if w := r.ents.At(p).wide; w != 0 {
		r.freeWide(w)
	}
	r.ents.Remove(p)
}

// slotOf is the ring slot of second t, as ratecounter keeps it.
func slotOf(t int64) int {
	m := t % ratecounter.Seconds
	if m < 0 {
		m += ratecounter.Seconds
	}
	return int(m)
}
