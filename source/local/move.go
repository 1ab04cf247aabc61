package local

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// Moved is a limit whose sync_rate a reload changes (Move).
type Moved struct {
	Name     string // "<enum>:", the start of its keys
	From, To time.Duration
}

// Move is what a reload that changes the sync_rate of limits does to
// what this process counted of them, before the new configuration is put
// in use. Counters and box entries live in the group of their sync_rate,
// and the group of a new one holds nothing of the limit: without Move its
// decisions would start from nothing, and the hits this process had not
// pushed would reach the others, and itself, only at the old group's next
// cycle.
//
// Each old group above 0 runs its cycle at once (within ctx), so that its
// unpushed hits and box entries are on the source: decisions of a new
// sync_rate of 0, made there, count them. For a new sync_rate other than
// 0, the limit's counters and box entries then move to the new group,
// while the old one runs no cycle: the totals read go as totals read
// (which the new group's first cycle reads again), and what this process
// has not pushed (when the push failed, or below 0) as its own, which the
// new group pushes, and the old one no longer does. So nothing is lost,
// counted twice, or let out of a box early. A rate counter below 0 cannot
// tell its own hits from what it started from: moved above 0, all of it
// goes as totals read (its hits were never on the source), and moved
// below 0, the old group keeps its unpushed hits to push. From 0 nothing
// is held here; from below 0 to 0 the hits, never on the source, are not
// carried over.
func (l *Layer) Move(ctx context.Context, limits []Moved) {
	var pushed []*group
	for _, m := range limits {
		from, to := groupRate(m.From), groupRate(m.To)
		if from == to || from == 0 {
			continue
		}
		src := (*l.groups.Load())[from]
		if src == nil {
			continue
		}
		if from > 0 && !slices.Contains(pushed, src) {
			pushed = append(pushed, src)
			// A failure leaves the hits unpushed: they move below.
			_, _ = l.runCycle(ctx, src, TriggerReload)
		}
		if to == 0 {
			continue
		}
		// No cycle of the old group runs while the limit moves: its
		// unpushed hits are not in flight, and go with it. A free token
		// is taken even with ctx done, so the move happens.
		if err := src.lock(ctx); err != nil {
			continue // a cycle runs past ctx: the limit starts anew
		}
		dst := l.groupOf(to)
		now := l.opts.Clock.Now().UnixNano()
		l.moveWindows(src, dst, m.Name, now)
		if t := (*src.tables.Load())[m.Name]; t != nil {
			l.moveTable(t, dst, m.Name, now)
		}
		src.unlock()
	}
}

// groupRate is the sync_rate of the group that keeps a limit of rate:
// every rate below 0 shares one group, -1's.
func groupRate(rate time.Duration) time.Duration {
	if rate < 0 {
		return -1
	}
	return rate
}

// moveWindows moves the window counters of the limit name from src to
// dst, as Move says, part for part: the totals read (everyone's, which a
// counter below 0 keeps as what it started from) as totals read, and this
// process's unpushed hits as its own, taken from src. A counter dst kept
// from before (a limit moved away and back) is replaced.
func (l *Layer) moveWindows(src, dst *group, name string, now int64) {
	nowMs := bucket.Millis(now)
	type seen struct {
		key           string
		period        int64
		synced, owned window.Counter
	}
	var moved []seen
	for i := range src.shards {
		sh := &src.shards[i]
		sh.mu.Lock()
		for key, c := range sh.counters {
			if !strings.HasPrefix(key, name) {
				continue
			}
			synced, owned := at(c.synced, nowMs, c.period), at(c.pending, nowMs, c.period)
			c.pending = window.Counter{}
			if !empty(synced) || !empty(owned) {
				moved = append(moved, seen{key, c.period, synced, owned})
			}
		}
		for key, o := range sh.orphans {
			if strings.HasPrefix(key, name) {
				delete(sh.orphans, key)
				if h := at(o, nowMs, o.Period); !empty(h) {
					moved = append(moved, seen{key: key, period: o.Period, owned: h})
				}
			}
		}
		sh.mu.Unlock()
	}
	for _, m := range moved {
		sh := &dst.shards[dst.shardIndex(l, m.key)]
		sh.mu.Lock()
		c := sh.insert(m.key, m.period, nowMs, nil, dst.rate)
		c.synced, c.pending = m.synced, m.owned
		sh.mu.Unlock()
	}
}

// moveTable moves the rate counters and box entries of t, the limit
// name's table in src, to dst's, as Move says: above 0, what was read as
// read and what is unpushed as unpushed (taken from t); below 0, as what
// the new group counts alone from (t keeps its unpushed hits and expiries
// to push).
func (l *Layer) moveTable(t *table, dst *group, name string, now int64) {
	s := ratecounter.Second(now)
	type seen struct {
		key           string
		view, owned   *ratecounter.Counter
		read, expires int64
	}
	toSynced := dst.rate > 0
	var rates, boxes []seen
	t.mu.Lock()
	capacity := t.capacity
	for p := range t.counters.Len() {
		r := *t.counters.At(p)
		v := seen{key: r.key}
		if view := r.view(); !emptyRate(view, s) {
			c := *view
			v.view = &c
		}
		if toSynced && r.synced && !emptyRate(r.pending, s) {
			v.owned = r.pending // its own hits, to push from dst
			r.pending = nil
		}
		if v.view != nil || v.owned != nil {
			rates = append(rates, v)
		}
	}
	for p := range t.boxes.Len() {
		b := *t.boxes.At(p)
		if b.expires() <= now {
			continue
		}
		v := seen{key: b.key, read: b.read, expires: b.expires()}
		if toSynced && b.fetches {
			v.expires = b.pending // its own, to push from dst
			b.pending = 0
			t.fix(b)
		}
		boxes = append(boxes, v)
	}
	t.mu.Unlock()
	to := dst.tableOf(name)
	to.mu.Lock()
	defer to.mu.Unlock()
	for _, v := range rates {
		r := l.rateOf(to, v.key, now, capacity, dst.rate, true)
		r.pinned = false // no batch or call holds to
		switch {
		case !toSynced:
			r.pending = v.view // what it counts alone from
		case v.owned != nil:
			// The totals read and its own hits, which dst pushes.
			r.pending = mergeInto(r.pending, v.owned)
			r.total = v.view
		default:
			// As totals read (an orphan's hits, taken back, on top).
			total := v.view
			if total == nil {
				total = &ratecounter.Counter{}
			}
			if r.pending != nil {
				total.Merge(r.pending)
			}
			r.total = total
		}
	}
	for _, v := range boxes {
		b := l.boxOf(to, v.key, now, capacity, dst.rate, true)
		b.pinned = false
		if toSynced {
			b.read = max(b.read, v.read)
			b.pending = max(b.pending, v.expires)
		} else {
			b.pending = max(b.pending, v.expires)
		}
		to.fix(b)
	}
}
