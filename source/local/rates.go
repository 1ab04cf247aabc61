package local

import (
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/limiter-dev/limiter/internal/boundedtable"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// table holds the rate counters and the penalty box entries of one limit
// name in one group, under one lock: a limit's capacity bounds its entries
// per name, so a table is where that bound can be kept exactly. A full
// counter table evicts the least recently incremented counter, a full box
// the entry with the least time left, as the memory source's tables do.
type table struct {
	mu   sync.Mutex
	id   int // the lock order within the group
	seed maphash.Seed

	counters boundedtable.Recency[*rate]
	boxes    boundedtable.Expiry[*box] // by box.expires
	// orphans and boxOrphans hold, per key, what an evicted counter or
	// entry of a limit above 0 had not pushed yet, for the next cycle to
	// push; one made again for the key takes it back. At most capacity
	// keys each.
	orphans    map[string]*rate
	boxOrphans map[string]*box

	capacity  int    // the last insert's: a reload may change it
	logCursor string // where the next read of the limit's box log starts
	follows   bool   // the limit's box log is read (Follow)
	evictions uint64
	lost      uint64 // as in shard
	stamp     uint64 // numbers the cycles, to pair counters and box entries
}

// entry is what a rate counter and a box entry share.
type entry struct {
	key string
	// fetches says cycles read its totals (above 0 with a source to read
	// from); fetched is set once one did (from the start when there is
	// nothing to read): until then a cycle keeps it, even holding nothing.
	fetches, fetched bool
	pinned           bool  // held by the running batch or call: not evicted
	seen             int64 // when a decision or call last looked it up (unix ns)
}

// keepUnread is how long an entry whose totals the cycles read is kept
// after it was last looked up, holding nothing: forgotten at once, it
// would be made anew, unread, by the next decision on its id, which would
// then not see what the other processes counted or boxed until a cycle
// read it again. A minute is as long as a hit counts.
const keepUnread = int64(time.Minute)

// forgettable reports whether e, once it holds nothing, may be forgotten
// at now.
func (e *entry) forgettable(now int64) bool {
	return e.fetched && (!e.fetches || now-e.seen >= keepUnread)
}

// rate is one (limit, id) rate counter. A nil part holds no hits.
type rate struct {
	entry
	// total is what a decision reads above 0: the totals the last cycle
	// read plus the hits in flight and those not pushed, kept up to date
	// by every add and removal so that a decision merges nothing. Below 0
	// it is nil and pending, every hit of the counter, is read.
	total             *ratecounter.Counter
	inflight, pending *ratecounter.Counter // as in counter
	// readUntil is the second from which the totals last read count
	// nothing (0 when they held none).
	readUntil int64
	synced    bool // the limit is above 0
}

// view returns what a decision reads, nil when r holds nothing.
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
	r.pending = addTo(r.pending, s, delta)
	if r.synced {
		r.total = addTo(r.total, s, delta)
	}
}

func addTo(c *ratecounter.Counter, s, delta int64) *ratecounter.Counter {
	if c == nil {
		c = &ratecounter.Counter{}
	}
	c.Add(s, delta)
	return c
}

// remove takes n of r's own hits back from second s.
func (r *rate) remove(s, n int64) {
	if n <= 0 || r.pending == nil {
		return
	}
	r.pending.Remove(s, n)
	if r.total != nil {
		r.total.Remove(s, n)
	}
}

func (r *rate) unpushed(s int64) bool { return !emptyRate(r.pending, s) || r.inflight != nil }

func (r *rate) idle(now int64) bool {
	s := ratecounter.Second(now)
	return !r.unpushed(s) && emptyRate(r.total, s) && r.forgettable(now)
}

// read sets r's totals to those a cycle read, plus the hits counted since
// the cycle's snapshot.
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

// box is one (limit, id) penalty box entry: the expiry read from the
// source, the one being pushed and one set here since, in unix ns (0 for
// none); the id is in the box until the latest of the three. Below 0 only
// pending is used.
type box struct {
	entry
	read, inflight, pending int64
	stamp                   uint64
}

func (b *box) expires() int64 { return max(b.read, b.inflight, b.pending) }

func (b *box) idle(now int64) bool {
	return b.inflight == 0 && b.expires() <= now && b.forgettable(now)
}

func (b *box) unpushed(now int64) bool { return b.pending > now || b.inflight != 0 }

func emptyRate(c *ratecounter.Counter, s int64) bool { return c == nil || c.Empty(s) }

// nameOf is a key's limit name: up to its first colon, included.
func nameOf(key string) string {
	return key[:strings.IndexByte(key, ':')+1]
}

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

func (g *group) tableList() []*table {
	return slices.Collect(maps.Values(*g.tables.Load()))
}

func (t *table) hash(key string) uint64 { return maphash.String(t.seed, key) }

// rate returns key's counter, or nil.
func (t *table) rate(key string) *rate {
	if p := t.counters.Find(key, t.hash(key)); p != boundedtable.None {
		return *t.counters.At(p)
	}
	return nil
}

// touch makes r the most recently incremented counter.
func (t *table) touch(r *rate) {
	t.counters.Touch(t.counters.Find(r.key, t.hash(r.key)))
}

func (t *table) removeRate(r *rate) {
	t.counters.Remove(t.counters.Find(r.key, t.hash(r.key)))
}

// rateOf returns t's counter of key, pinned for the running batch or
// call. When there is none and create is set, it makes one, which takes
// back the key's orphan, after forgetting the oldest counters that count
// nothing and then, while t is full, evicting the oldest not pinned.
func (l *Layer) rateOf(t *table, key string, now int64, capacity int, syncRate time.Duration, create bool) *rate {
	h := t.hash(key)
	if p := t.counters.Find(key, h); p != boundedtable.None {
		r := *t.counters.At(p)
		r.seen, r.pinned = now, true
		return r
	}
	if !create {
		return nil
	}
	synced := syncRate > 0
	t.capacity = capacityOr(capacity)
	for p := t.counters.Oldest(); p != boundedtable.None; p = t.counters.Oldest() {
		if o := *t.counters.At(p); o.pinned || !o.idle(now) {
			break
		}
		t.counters.Remove(p)
	}
	for t.counters.Len() >= t.capacity && t.evictRate(ratecounter.Second(now), synced) {
	}
	r := &rate{entry: l.newEntry(key, now, synced), synced: synced}
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

// newEntry is a new, pinned entry: above 0 with a source to read from, a
// cycle must read its totals before it may be forgotten.
func (l *Layer) newEntry(key string, now int64, synced bool) entry {
	fetches := synced && l.rates != nil
	return entry{key: key, fetches: fetches, fetched: !fetches, pinned: true, seen: now}
}

// evictRate evicts the oldest counter not pinned and reports whether
// there was one (if not, the bound gives way). Above 0 its unpushed hits
// become the key's orphan while there is room (hits in flight stay: the
// running cycle settles them).
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
		t.orphans[victim.key] = &rate{entry: entry{key: victim.key}, pending: victim.pending}
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
			into = &rate{entry: entry{key: key}}
			t.orphans[key] = into
		}
	} else if into != from && into.synced {
		into.total = mergeInto(into.total, hits)
	}
	into.pending = mergeInto(into.pending, hits)
}

func mergeInto(c, hits *ratecounter.Counter) *ratecounter.Counter {
	if c == nil {
		c = &ratecounter.Counter{}
	}
	c.Merge(hits)
	return c
}

// box returns key's box entry, or nil.
func (t *table) box(key string) *box {
	if p := t.boxes.Find(key, t.hash(key)); p != boundedtable.None {
		return *t.boxes.At(p)
	}
	return nil
}

// fix reorders b, if t holds it, after its expiry changed.
func (t *table) fix(b *box) {
	if p := t.boxes.Find(b.key, t.hash(b.key)); p != boundedtable.None && *t.boxes.At(p) == b {
		t.boxes.SetExpiry(p, b.expires())
	}
}

func (t *table) removeBox(b *box) {
	t.boxes.Remove(t.boxes.Find(b.key, t.hash(b.key)))
}

// boxOf is rateOf for box entries: a full box forgets the entries that box
// nothing any more, soonest first, then evicts the one with the least time
// left that is not pinned.
func (l *Layer) boxOf(t *table, key string, now int64, capacity int, syncRate time.Duration, create bool) *box {
	h := t.hash(key)
	if p := t.boxes.Find(key, h); p != boundedtable.None {
		b := *t.boxes.At(p)
		b.seen, b.pinned = now, true
		return b
	}
	if !create {
		return nil
	}
	t.capacity = capacityOr(capacity)
	for p := t.boxes.Min(); p != boundedtable.None; p = t.boxes.Min() {
		if o := *t.boxes.At(p); o.pinned || !o.idle(now) {
			break
		}
		t.boxes.Remove(p)
	}
	for t.boxes.Len() >= t.capacity && t.evictBox(now, syncRate > 0) {
	}
	b := &box{entry: l.newEntry(key, now, syncRate > 0)}
	if o := t.boxOrphans[key]; o != nil {
		delete(t.boxOrphans, key)
		b.pending = o.pending
	}
	t.boxes.Add(key, h, b.expires(), b)
	return b
}

// evictBox is evictRate for box entries, by least time left (a batch or
// call pins at most boundedtable.MaxSkip entries, which MinWhere skips).
func (t *table) evictBox(now int64, synced bool) bool {
	p := t.boxes.MinWhere(func(p int) bool { return (*t.boxes.At(p)).pinned })
	if p == boundedtable.None {
		return false
	}
	victim := *t.boxes.At(p)
	t.boxes.Remove(p)
	t.evictions++
	if synced && victim.pending > now && len(t.boxOrphans) < t.capacity {
		t.boxOrphans[victim.key] = &box{entry: entry{key: victim.key}, pending: victim.pending}
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
		t.setBox(b, expires)
	} else if o := t.boxOrphans[key]; o != nil {
		o.pending = max(o.pending, expires)
	} else if len(t.boxOrphans) < t.capacity {
		t.boxOrphans[key] = &box{entry: entry{key: key}, pending: expires}
	}
}

// setBox boxes b until expires at least: automatic boxing never shortens.
func (t *table) setBox(b *box, expires int64) {
	if expires > b.pending {
		b.pending = expires
		t.fix(b)
	}
}

// pending is shard.pending for t's counters and box entries.
func (t *table) pending(now int64) int {
	s := ratecounter.Second(now)
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for p := range t.counters.Len() {
		r := *t.counters.At(p)
		if b := t.box(r.key); r.unpushed(s) || (b != nil && b.unpushed(now)) {
			n++
		}
	}
	for p := range t.boxes.Len() {
		if b := *t.boxes.At(p); t.rate(b.key) == nil && b.unpushed(now) {
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
