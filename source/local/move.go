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
// sync_rate of 0, made there, count them. Then everything of the limit
// leaves the old group, while it runs no cycle, so that nothing of it is
// left to come back if the limit moves back:
//   - to a new sync_rate above 0: the totals read as totals read (the new
//     group's first cycle reads them again), and what this process has not
//     pushed (the push failed, an evicted counter's orphan, or the limit
//     was below 0) as its own, which the new group pushes;
//   - below 0, where the process counts alone: all of it, as what the new
//     counter starts from. What was not pushed is not pushed any more: the
//     processes that share the configuration count alone too;
//   - to 0: what was not pushed stays in the old group as orphans, which
//     its next cycle pushes.
//
// A rate counter below 0 cannot tell its own hits from what it started
// from: moved above 0 it goes as totals read (its hits were never on the
// source). From below 0 to 0 the hits, never on the source, are dropped.
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
		// No cycle of the old group runs while the limit moves: its
		// unpushed hits are not in flight. A free token is taken even
		// with ctx done, so the move happens.
		if err := src.lock(ctx); err != nil {
			continue // a cycle runs past ctx: the limit starts anew
		}
		var dst *group
		if to != 0 {
			dst = l.groupOf(to)
		}
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

// moveWindows takes the window counters and orphans of the limit name out
// of src and into dst (nil: to 0), as Move says.
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
			moved = append(moved, seen{key: key, period: c.period, synced: at(c.synced, nowMs, c.period), owned: at(c.pending, nowMs, c.period)})
		}
		for key, o := range sh.orphans {
			if strings.HasPrefix(key, name) {
				delete(sh.orphans, key)
				moved = append(moved, seen{key: key, period: o.Period, owned: at(o, nowMs, o.Period)})
			}
		}
		if dst == nil && src.rate > 0 {
			// To 0: the unpushed hits stay, to be pushed.
			for _, m := range moved {
				if !sh.keep(m.key, m.owned, nowMs) {
					sh.lost++
				}
			}
			moved = moved[:0]
		}
		sh.mu.Unlock()
	}
	if dst == nil {
		return
	}
	for _, m := range moved {
		if empty(m.synced) && empty(m.owned) {
			continue
		}
		sh := &dst.shards[dst.shardIndex(l, m.key)]
		sh.mu.Lock()
		c := sh.counters[m.key]
		if c == nil || c.period != m.period {
			c = sh.insert(m.key, m.period, nowMs, nil, dst.rate)
		}
		if dst.rate > 0 {
			c.synced = merge(c.synced, m.synced, nowMs, m.period)
			c.pending = merge(c.pending, m.owned, nowMs, m.period)
		} else {
			// What it counts alone from: everyone's totals and its own.
			c.synced = merge(c.synced, merge(m.synced, m.owned, nowMs, m.period), nowMs, m.period)
		}
		sh.mu.Unlock()
	}
}

// moveTable takes the rate counters, box entries and orphans of t, the
// limit name's table in src, out of it and into dst's (dst nil: to 0), as
// Move says.
func (l *Layer) moveTable(t *table, src, dst *group, name string, now int64) {
	s := ratecounter.Second(now)
	type seen struct {
		key         string
		view, owned *ratecounter.Counter
		read, own   int64 // a box entry's expiries: read, and set here
	}
	fromSynced := src.rate > 0
	var rates, boxes []seen
	t.mu.Lock()
	capacity := t.capacity
	t.follows = false // the new group's table follows the limit's box log
	for p := t.counters.Len() - 1; p >= 0; p-- {
		r := *t.counters.At(p)
		t.counters.Remove(p)
		v := seen{key: r.key, view: r.view()}
		if fromSynced {
			v.owned = r.pending
		}
		rates = append(rates, v)
	}
	for key, o := range t.orphans {
		rates = append(rates, seen{key: key, view: o.pending, owned: o.pending})
	}
	clear(t.orphans)
	for p := t.boxes.Len() - 1; p >= 0; p-- {
		b := *t.boxes.At(p)
		t.boxes.Remove(p)
		boxes = append(boxes, seen{key: b.key, read: b.read, own: b.pending})
	}
	for key, o := range t.boxOrphans {
		boxes = append(boxes, seen{key: key, own: o.pending})
	}
	clear(t.boxOrphans)
	if dst == nil {
		// To 0: what was not pushed stays, to be pushed.
		if fromSynced {
			for _, v := range rates {
				t.keepRate(v.key, v.owned, nil, s)
			}
			for _, v := range boxes {
				t.keepBox(v.key, v.own, now)
			}
		}
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	to := dst.tableOf(name)
	to.mu.Lock()
	defer to.mu.Unlock()
	for _, v := range rates {
		if emptyRate(v.view, s) && emptyRate(v.owned, s) {
			continue
		}
		r := l.rateOf(to, v.key, now, capacity, dst.rate, true)
		r.pinned = false // no batch or call holds to
		switch {
		case dst.rate < 0:
			r.pending = mergeInto(r.pending, v.view) // what it counts alone from
		case v.owned != nil:
			// The totals read and its own hits, which dst pushes.
			r.pending = mergeInto(r.pending, v.owned)
			r.total = mergeInto(r.total, v.view)
		default:
			// From below 0: as totals read.
			r.total = mergeInto(r.total, v.view)
		}
	}
	for _, v := range boxes {
		if max(v.read, v.own) <= now {
			continue
		}
		b := l.boxOf(to, v.key, now, capacity, dst.rate, true)
		b.pinned = false
		if dst.rate > 0 {
			b.read = max(b.read, v.read)
			b.pending = max(b.pending, v.own)
		} else {
			b.pending = max(b.pending, v.read, v.own)
		}
		to.fix(b)
	}
}
