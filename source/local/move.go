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
// 0, the limit's counters and box entries then move out of the old group
// into the new one, while the old one runs no cycle: the totals read go as
// totals read (which the new group's first cycle reads again), and what
// this process has not pushed (the push failed, or the limit was below
// 0) as its own, which the new group pushes. Moved below 0, the new group
// starts from all of it, and the unpushed part stays in the old group as
// orphans, which its next cycle pushes for the others. Nothing of the
// limit stays in the old group to come back if the limit moves back, so
// each hit is counted once and nothing removed or reset reappears. A rate
// counter below 0 cannot tell its own hits from what it started from:
// moved above 0 it goes as totals read (its hits were never on the
// source). From 0 nothing is held here; from below 0 to 0 the hits, never
// on the source, are not carried over.
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
			l.moveTable(t, src, dst, m.Name, now)
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

// moveWindows moves the window counters of the limit name out of src
// into dst, as Move says, part for part: the totals read (everyone's,
// which a counter below 0 keeps as what it started from) as totals read,
// and this process's unpushed hits as its own to push above 0. Below 0 the
// unpushed hits join what the new counter starts from, and stay in src as
// orphans, which its next cycle pushes. Nothing of the limit stays in src
// to come back if it moves back.
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
			delete(sh.counters, key)
			m := seen{key: key, period: c.period, synced: at(c.synced, nowMs, c.period), owned: at(c.pending, nowMs, c.period)}
			if dst.rate < 0 {
				if src.rate > 0 && !sh.keep(key, m.owned, nowMs) {
					sh.lost++
				}
				m.synced, m.owned = merge(m.synced, m.owned, nowMs, c.period), window.Counter{}
			}
			if !empty(m.synced) || !empty(m.owned) {
				moved = append(moved, m)
			}
		}
		if dst.rate > 0 {
			for key, o := range sh.orphans {
				if strings.HasPrefix(key, name) {
					delete(sh.orphans, key)
					moved = append(moved, seen{key: key, period: o.Period, owned: at(o, nowMs, o.Period)})
				}
			}
		}
		sh.mu.Unlock()
	}
	for _, m := range moved {
		sh := &dst.shards[dst.shardIndex(l, m.key)]
		sh.mu.Lock()
		c := sh.counters[m.key]
		if c == nil || c.period != m.period {
			c = sh.insert(m.key, m.period, nowMs, nil, dst.rate)
		}
		c.synced = merge(c.synced, m.synced, nowMs, m.period)
		c.pending = merge(c.pending, m.owned, nowMs, m.period)
		sh.mu.Unlock()
	}
}

// moveTable moves the rate counters and box entries of t, the limit
// name's table in src, out of it into dst's, as Move says: above 0, what
// was read as read and what is unpushed as unpushed; below 0, as what the
// new group counts alone from, the unpushed hits and expiries staying in
// t as orphans, which src's next cycle pushes. A rate counter below 0
// cannot tell its own hits from what it started from: above 0 it goes as
// totals read (its hits were never on the source).
func (l *Layer) moveTable(t *table, src, dst *group, name string, now int64) {
	s := ratecounter.Second(now)
	type seen struct {
		key          string
		view, owned  *ratecounter.Counter
		read, expiry int64 // a box entry's: read, and this process's own
	}
	toSynced, fromSynced := dst.rate > 0, src.rate > 0
	var rates, boxes []seen
	t.mu.Lock()
	capacity := t.capacity
	t.follows = false // the new group's table follows the limit's box log
	for p := t.counters.Len() - 1; p >= 0; p-- {
		r := *t.counters.At(p)
		t.counters.Remove(p)
		v := seen{key: r.key}
		if view := r.view(); !emptyRate(view, s) {
			c := *view
			v.view = &c
		}
		if fromSynced && !emptyRate(r.pending, s) {
			if toSynced {
				v.owned = r.pending // its own hits, which dst pushes
			} else {
				t.keepRate(r.key, r.pending, nil, s) // an orphan, which src pushes
			}
		}
		if v.view != nil || v.owned != nil {
			rates = append(rates, v)
		}
	}
	for p := t.boxes.Len() - 1; p >= 0; p-- {
		b := *t.boxes.At(p)
		t.boxes.Remove(p)
		if b.expires() <= now {
			continue
		}
		v := seen{key: b.key, read: b.read, expiry: b.expires()}
		if fromSynced {
			v.expiry = b.pending
			if !toSynced {
				t.keepBox(b.key, b.pending, now) // an orphan, which src pushes
				v.expiry = b.expires()
			}
		}
		boxes = append(boxes, v)
	}
	var orphans map[string]*rate
	var boxOrphans map[string]*box
	if toSynced {
		orphans, boxOrphans = t.orphans, t.boxOrphans
		t.orphans, t.boxOrphans = map[string]*rate{}, map[string]*box{}
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
			r.pending = mergeInto(r.pending, v.view) // what it counts alone from
		default:
			// As totals read, with its own hits (taken from src, or an
			// orphan's taken back), which dst pushes.
			total := v.view
			if total == nil {
				total = &ratecounter.Counter{}
			}
			if r.pending != nil {
				total.Merge(r.pending) // an orphan's, which view lacks
			}
			if v.owned != nil {
				r.pending = mergeInto(r.pending, v.owned)
			}
			r.total = total
		}
	}
	for _, v := range boxes {
		b := l.boxOf(to, v.key, now, capacity, dst.rate, true)
		b.pinned = false
		if toSynced {
			b.read = max(b.read, v.read)
		}
		b.pending = max(b.pending, v.expiry)
		to.fix(b)
	}
	for key, o := range orphans {
		to.keepRate(key, o.pending, nil, s)
	}
	for key, o := range boxOrphans {
		to.keepBox(key, o.pending, now)
	}
}
