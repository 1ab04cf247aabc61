package local

import (
	"hash/maphash"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/limiter-dev/limiter/internal/boundedtable"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// table holds the rate counters and the penalty box entries of one limit
// name in one group, under one lock. A name is the enum part of a key
// ("<enum>:"), and a limit's capacity bounds its entries per name, so a
// table is where that bound can be kept exactly: a full counter evicts the
// least recently incremented entry (a boundedtable.Recency), a full box
// the entry with the smallest remaining time (a boundedtable.Expiry, on
// the expiry as this process sees it), as the memory source's tables do.
//
// A counter of a limit above 0 holds, like a window counter, the hits
// counted here and not pushed yet, those the running cycle pushes, and
// what a decision reads: the totals the last cycle read from the source
// plus both. A box entry above 0 holds the expiry read, the one being
// pushed, and one set here since; it is in the box until the latest of the
// three. Below 0 only what was counted or set here is used.
type table struct {
	mu sync.Mutex
	id int // the lock order within the group

	// seed hashes the keys of counters and boxes.
	seed maphash.Seed
	// counters are in the order of their last increment (or their
	// making): the oldest is the one a full table evicts.
	counters boundedtable.Recency[*rate]
	// orphans hold, per key, the unpushed hits of an evicted counter of a
	// limit above 0, for the next cycle to push; a counter made again for
	// the key takes them back. At most capacity keys.
	orphans map[string]*rate

	// boxes are by expiry (box.expires), soonest first.
	boxes boundedtable.Expiry[*box]
	// boxOrphans are evicted box entries of a limit above 0 with an expiry
	// set here and not pushed yet: the next cycle pushes them.
	boxOrphans map[string]*box

	// capacity is the bound the last insert was given (the limit's
	// capacity: a reload may change it).
	capacity  int
	evictions uint64
	// lost counts counters whose hits were dropped at the bound: below 0
	// evicted while counting, above 0 evicted with no room left among the
	// orphans.
	lost uint64
	// stamp numbers the table's cycles, to pair counters and box entries.
	stamp uint64
}

// rate is one (limit, id) rate counter. A nil part holds no hits.
type rate struct {
	key string
	// total is what a decision reads above 0: the totals the last cycle
	// read, plus the hits in flight and those not pushed, kept up to date
	// by every add and removal so that a decision merges nothing. Below 0
	// it is nil and pending, every hit of the counter, is read.
	total *ratecounter.Counter
	// inflight are the hits the running cycle pushes, nil between cycles;
	// pending the hits counted since the last snapshot.
	inflight, pending *ratecounter.Counter
	// readUntil is the second from which the totals last read count
	// nothing (0 when they held none).
	readUntil int64
	// synced says the limit is above 0; fetches that cycles read its
	// totals (above 0 with a source to read from). fetched is set once a
	// cycle read them (from the start when there is nothing to read);
	// until then a cycle keeps the counter, even counting nothing.
	synced, fetches, fetched bool
	// seen is when a decision or a call last looked the counter up (unix
	// ns): one that fetches is kept keepUnread after that, so that the
	// cycles keep reading what the others count for an id in use here.
	seen int64
	// pinned marks a counter the running batch or call holds: eviction
	// passes it over.
	pinned bool
}

// view returns the counter a decision reads, nil when r holds nothing.
// It is read only.
func (r *rate) view() *ratecounter.Counter {
	switch {
	case r == nil:
		return nil
	case r.synced:
		return r.total
	}
	return r.pending
}

// add counts delta hits at second s as r's own.
func (r *rate) add(s, delta int64) {
	if delta <= 0 {
		return
	}
	if r.pending == nil {
		r.pending = &ratecounter.Counter{}
	}
	r.pending.Add(s, delta)
	if r.synced {
		if r.total == nil {
			r.total = &ratecounter.Counter{}
		}
		r.total.Add(s, delta)
	}
}

// remove takes n of r's own hits back from second s (n at most what
// pending holds there).
func (r *rate) remove(s, n int64) {
	if n <= 0 || r.pending == nil {
		return
	}
	r.pending.Remove(s, n)
	if r.total != nil {
		r.total.Remove(s, n)
	}
}

// unpushed reports whether r holds hits the source has not been sent.
func (r *rate) unpushed(s int64) bool { return !emptyRate(r.pending, s) || r.inflight != nil }

// keepUnread is how long a counter or box entry whose totals the cycles
// read is kept after it was last looked up, counting or boxing nothing:
// forgotten at once, it would be made anew, unread, by the next decision
// on its id, which would then not see what the other processes counted
// or boxed until a cycle read it again. A minute is as long as a hit
// counts.
const keepUnread = int64(time.Minute)

// idle reports whether a cycle or an insert may forget r at now: its
// totals were read, nothing it holds still counts, and, when it fetches,
// it was not looked up for keepUnread.
func (r *rate) idle(now int64) bool {
	s := ratecounter.Second(now)
	return r.fetched && !r.unpushed(s) && emptyRate(r.total, s) && (!r.fetches || now-r.seen >= keepUnread)
}

// read sets r's totals to those a cycle read (total, the source's counter
// after the push), plus the hits counted since the cycle's snapshot.
func (r *rate) read(total *ratecounter.Counter, s int64) {
	r.fetched = true
	r.readUntil = 0
	if !total.Empty(s) {
		r.readUntil = total.Expires()
	}
	if r.total == nil {
		r.total = &ratecounter.Counter{}
	}
	*r.total = *total
	if r.pending != nil {
		r.total.Merge(r.pending)
	}
}

// box is one (limit, id) penalty box entry: expiries in unix ns, 0 for
// none.
type box struct {
	key                     string
	read, inflight, pending int64
	// fetches, fetched, pinned and seen are as for a rate counter.
	fetches, fetched, pinned bool
	seen                     int64
	stamp                    uint64
}

// expires is when the entry leaves the box as this process sees it.
func (b *box) expires() int64 { return max(b.read, b.inflight, b.pending) }

// idle reports whether a cycle or an insert may forget b at now: its
// expiry was read, nothing of it still boxes, and, when it fetches, it
// was not looked up for keepUnread.
func (b *box) idle(now int64) bool {
	return b.fetched && b.inflight == 0 && b.expires() <= now && (!b.fetches || now-b.seen >= keepUnread)
}

// emptyRate reports whether c holds no hit from second s − 59 on.
func emptyRate(c *ratecounter.Counter, s int64) bool { return c == nil || c.Empty(s) }

// nameOf is the limit name part of a key: up to and including its first
// colon ("" for a key without one).
func nameOf(key string) string {
	return key[:strings.IndexByte(key, ':')+1]
}

// capacityOr is a limit's capacity, the default when it gives none.
func capacityOr(c int) int {
	if c <= 0 {
		return ratelimits.DefaultCapacity
	}
	return c
}

// tableOf returns g's table for the name of key, made on first use.
func (g *group) tableOf(key string) *table {
	name := nameOf(key)
	if t := (*g.tables.Load())[name]; t != nil {
		return t
	}
	g.tablesMu.Lock()
	defer g.tablesMu.Unlock()
	tables := *g.tables.Load()
	if t := tables[name]; t != nil {
		return t
	}
	t := &table{
		id:         len(tables),
		seed:       maphash.MakeSeed(),
		orphans:    map[string]*rate{},
		boxOrphans: map[string]*box{},
		capacity:   ratelimits.DefaultCapacity,
	}
	next := maps.Clone(tables)
	next[name] = t
	g.tables.Store(&next)
	return t
}

// tableList returns g's tables.
func (g *group) tableList() []*table {
	tables := *g.tables.Load()
	out := make([]*table, 0, len(tables))
	for _, t := range tables {
		out = append(out, t)
	}
	return out
}

// --- counters: the list by last increment ---

// hash is key's hash in t's tables.
func (t *table) hash(key string) uint64 { return maphash.String(t.seed, key) }

// rate returns key's counter, or nil.
func (t *table) rate(key string) *rate {
	if p := t.counters.Find(key, t.hash(key)); p != boundedtable.None {
		return *t.counters.At(p)
	}
	return nil
}

// touch makes r, which t holds, the most recently incremented counter.
func (t *table) touch(r *rate) {
	t.counters.Touch(t.counters.Find(r.key, t.hash(r.key)))
}

// removeRate forgets r, which t holds.
func (t *table) removeRate(r *rate) {
	t.counters.Remove(t.counters.Find(r.key, t.hash(r.key)))
}

// rateOf returns key's counter, making it when there is none and create
// is set: forgetting first the oldest counters that count nothing, then,
// when the table holds capacity counters, evicting the least recently
// incremented one not pinned. A new counter is the most recent and takes
// back the key's orphan. synced says the limit is above 0 (an evicted
// counter leaves its unpushed hits as an orphan); fetch that a cycle must
// read the new counter's totals before it may be forgotten.
func (t *table) rateOf(key string, now int64, capacity int, create, synced, fetch bool) *rate {
	h := t.hash(key)
	if p := t.counters.Find(key, h); p != boundedtable.None || !create {
		if p == boundedtable.None {
			return nil
		}
		r := *t.counters.At(p)
		r.seen = now
		return r
	}
	s := ratecounter.Second(now)
	t.capacity = capacityOr(capacity)
	for p := t.counters.Oldest(); p != boundedtable.None; p = t.counters.Oldest() {
		if o := *t.counters.At(p); o.pinned || !o.idle(now) {
			break
		}
		t.counters.Remove(p)
	}
	for t.counters.Len() >= t.capacity {
		if !t.evictRate(s, synced) {
			break // every counter is the running call's: the bound gives way
		}
	}
	r := &rate{key: key, synced: synced, fetches: fetch, fetched: !fetch, seen: now}
	if o := t.orphans[key]; o != nil {
		delete(t.orphans, key)
		r.pending = o.pending
		if synced && o.pending != nil {
			c := *o.pending
			r.total = &c
		}
	}
	t.counters.Add(key, h, r)
	return r
}

// evictRate evicts the least recently incremented counter not pinned and
// reports whether there was one. Above 0 (synced) its unpushed hits become
// the key's orphan while there is room (hits in flight stay with it: the
// running cycle settles them); below 0 they are dropped.
func (t *table) evictRate(s int64, synced bool) bool {
	p := t.counters.Oldest()
	for p != boundedtable.None && (*t.counters.At(p)).pinned {
		p = t.counters.Newer(p)
	}
	if p == boundedtable.None {
		return false
	}
	victim := *t.counters.At(p)
	t.counters.Remove(p)
	t.evictions++
	if emptyRate(victim.pending, s) {
		return true
	}
	if !synced || len(t.orphans) >= t.capacity {
		t.lost++
	} else {
		t.orphans[victim.key] = &rate{key: victim.key, pending: victim.pending}
	}
	victim.pending = nil
	return true
}

// keepRate puts back, for the next cycle, hits of key that a failed push
// carried from counter from (or from an orphan): with the key's counter,
// else as its orphan. A counter other than from gets them in its total
// too (from's total still holds them).
func (t *table) keepRate(key string, hits *ratecounter.Counter, from *rate, s int64) {
	if emptyRate(hits, s) {
		return
	}
	into := t.rate(key)
	if into == nil {
		if into = t.orphans[key]; into == nil {
			if len(t.orphans) >= t.capacity {
				t.lost++
				return
			}
			into = &rate{key: key}
			t.orphans[key] = into
		}
	} else if into != from && into.synced {
		if into.total == nil {
			into.total = &ratecounter.Counter{}
		}
		into.total.Merge(hits)
	}
	if into.pending == nil {
		c := *hits
		into.pending = &c
		return
	}
	into.pending.Merge(hits)
}

// --- box entries: the heap by expiry ---

// box returns key's box entry, or nil.
func (t *table) box(key string) *box {
	if p := t.boxes.Find(key, t.hash(key)); p != boundedtable.None {
		return *t.boxes.At(p)
	}
	return nil
}

// fix puts b, if t holds it, at its place by expiry after its expiry
// changed.
func (t *table) fix(b *box) {
	if p := t.boxes.Find(b.key, t.hash(b.key)); p != boundedtable.None && *t.boxes.At(p) == b {
		t.boxes.SetExpiry(p, b.expires())
	}
}

// removeBox forgets b, which t holds.
func (t *table) removeBox(b *box) {
	t.boxes.Remove(t.boxes.Find(b.key, t.hash(b.key)))
}

// boxOf returns key's box entry, making it when there is none and create
// is set: forgetting first the entries that box nothing any more (soonest
// first), then, when the box holds capacity entries, evicting the one
// with the smallest remaining time that is not pinned. A new entry takes
// back the key's box orphan; synced and fetch are as for rateOf.
func (t *table) boxOf(key string, now int64, capacity int, create, synced, fetch bool) *box {
	h := t.hash(key)
	if p := t.boxes.Find(key, h); p != boundedtable.None || !create {
		if p == boundedtable.None {
			return nil
		}
		b := *t.boxes.At(p)
		b.seen = now
		return b
	}
	t.capacity = capacityOr(capacity)
	for p := t.boxes.Min(); p != boundedtable.None; p = t.boxes.Min() {
		if o := *t.boxes.At(p); o.pinned || !o.idle(now) {
			break
		}
		t.boxes.Remove(p)
	}
	for t.boxes.Len() >= t.capacity {
		if !t.evictBox(now, synced) {
			break
		}
	}
	b := &box{key: key, fetches: fetch, fetched: !fetch, seen: now}
	if o := t.boxOrphans[key]; o != nil {
		delete(t.boxOrphans, key)
		b.pending = o.pending
	}
	t.boxes.Add(key, h, b.expires(), b)
	return b
}

// evictBox evicts the entry with the smallest remaining time not pinned,
// and reports whether there was one (a batch or call pins at most
// boundedtable.MaxSkip entries of a table, which the search passes over).
// Above 0, an expiry set here and not pushed yet stays as the key's box
// orphan while there is room, so that the others still learn of it.
func (t *table) evictBox(now int64, synced bool) bool {
	p := t.boxes.MinWhere(func(p int) bool { return (*t.boxes.At(p)).pinned })
	if p == boundedtable.None {
		return false
	}
	victim := *t.boxes.At(p)
	t.boxes.Remove(p)
	t.evictions++
	if synced && victim.pending > now && len(t.boxOrphans) < t.capacity {
		t.boxOrphans[victim.key] = &box{key: victim.key, pending: victim.pending}
	}
	victim.pending = 0
	return true
}

// keepBox puts an expiry a failed push carried back for the next cycle.
func (t *table) keepBox(key string, expires, now int64) {
	if expires <= now {
		return
	}
	if b := t.box(key); b != nil {
		b.pending = max(b.pending, expires)
		t.fix(b)
		return
	}
	if o := t.boxOrphans[key]; o != nil {
		o.pending = max(o.pending, expires)
		return
	}
	if len(t.boxOrphans) < t.capacity {
		t.boxOrphans[key] = &box{key: key, pending: expires}
	}
}

// setBox boxes b until expires at least (automatic boxing: never
// shortens), as an expiry set here.
func (t *table) setBox(b *box, expires int64) {
	if expires > b.pending {
		b.pending = expires
		t.fix(b)
	}
}

// pending counts t's keys with hits or an expiry not pushed yet, with
// orphans.
func (t *table) pending(now int64) int {
	s := ratecounter.Second(now)
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for p := range t.counters.Len() {
		r := *t.counters.At(p)
		if r.unpushed(s) {
			n++
		} else if b := t.box(r.key); b != nil && (b.pending > now || b.inflight != 0) {
			n++
		}
	}
	for p := range t.boxes.Len() {
		b := *t.boxes.At(p)
		if t.rate(b.key) == nil && (b.pending > now || b.inflight != 0) {
			n++
		}
	}
	for _, o := range t.orphans {
		if !emptyRate(o.pending, s) {
			n++
		}
	}
	for _, o := range t.boxOrphans {
		if o.pending > now {
			n++
		}
	}
	return n
}
