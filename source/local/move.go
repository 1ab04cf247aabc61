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
// 0, each counter and box entry of the limit is then copied to the new
// group as this process sees it (the totals read and its own hits): as
// totals read above 0, which its first cycle reads again, and as this
// process's own hits below 0, where it counts alone. The old group keeps
// what it holds until it is idle. From 0 nothing is held here; from below
// 0 the hits were never on the source, and a new sync_rate of 0 does not
// see them.
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
			// A failure leaves the hits for the old group's next cycle,
			// which pushes them: nothing is lost, only seen later.
			_, _ = l.runCycle(ctx, src, TriggerReload)
		}
		if to == 0 {
			continue
		}
		dst := l.groupOf(to)
		now := l.opts.Clock.Now().UnixNano()
		l.moveWindows(src, dst, m.Name, now)
		if t := (*src.tables.Load())[m.Name]; t != nil {
			l.moveTable(t, src.rate > 0, dst, m.Name, now)
		}
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

// moveWindows copies the window counters of the limit name from src to
// dst, as Move says.
func (l *Layer) moveWindows(src, dst *group, name string, now int64) {
	nowMs := bucket.Millis(now)
	type seen struct {
		key  string
		view window.Counter
	}
	var views []seen
	for i := range src.shards {
		sh := &src.shards[i]
		sh.mu.Lock()
		for key, c := range sh.counters {
			if v := c.state(nowMs, c.period); strings.HasPrefix(key, name) && !empty(v) {
				views = append(views, seen{key, v})
			}
		}
		sh.mu.Unlock()
	}
	for _, v := range views {
		sh := &dst.shards[dst.shardIndex(l, v.key)]
		sh.mu.Lock()
		c := sh.counters[v.key]
		if c == nil || c.period != v.view.Period {
			c = sh.insert(v.key, v.view.Period, nowMs, nil, dst.rate)
		}
		if src.rate > 0 && dst.rate > 0 {
			c.synced = v.view // the totals read, until the first cycle reads them
		} else {
			// Below 0 everything counted is this process's own: to count
			// alone, or to push.
			c.pending = merge(c.pending, v.view, nowMs, c.period)
		}
		sh.mu.Unlock()
	}
}

// moveTable copies the rate counters and box entries of t, the limit
// name's table in the old group, to dst's, as Move says.
func (l *Layer) moveTable(t *table, fromSynced bool, dst *group, name string, now int64) {
	s := ratecounter.Second(now)
	type seen struct {
		key     string
		view    *ratecounter.Counter
		expires int64
	}
	var rates, boxes []seen
	t.mu.Lock()
	capacity := t.capacity
	for p := range t.counters.Len() {
		r := *t.counters.At(p)
		if v := r.view(); !emptyRate(v, s) {
			c := *v
			rates = append(rates, seen{key: r.key, view: &c})
		}
	}
	for p := range t.boxes.Len() {
		if b := *t.boxes.At(p); b.expires() > now {
			boxes = append(boxes, seen{key: b.key, expires: b.expires()})
		}
	}
	t.mu.Unlock()
	to := dst.tableOf(name)
	to.mu.Lock()
	defer to.mu.Unlock()
	for _, v := range rates {
		r := l.rateOf(to, v.key, now, capacity, dst.rate, true)
		r.pinned = false // no batch or call holds to
		switch {
		case !fromSynced:
			// Everything counted below 0 is this process's own: to
			// count alone, or to push.
			r.pending = mergeInto(r.pending, v.view)
			if r.synced {
				r.total = mergeInto(r.total, v.view)
			}
		case dst.rate > 0:
			// The totals read, and its own hits (an orphan's, taken back).
			if r.pending != nil {
				v.view.Merge(r.pending)
			}
			r.total = v.view
		default:
			r.pending = mergeInto(r.pending, v.view)
		}
	}
	for _, v := range boxes {
		b := l.boxOf(to, v.key, now, capacity, dst.rate, true)
		b.pinned = false
		if fromSynced && dst.rate > 0 {
			b.read = max(b.read, v.expires)
		} else {
			b.pending = max(b.pending, v.expires)
		}
		to.fix(b)
	}
}
