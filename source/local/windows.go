package local

import (
	"context"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/window"
	"github.com/limiter-dev/limiter/source/syncpush"
)

// shard is a part of a group's window counters under one lock.
type shard struct {
	mu       sync.Mutex
	counters map[string]*counter
	capacity int
	// orphans are the unpushed hits of evicted counters, for the next
	// cycle to push; a key never has both a counter and an orphan. At most
	// capacity keys: fresh ids must not grow a shard while pushes fail.
	orphans   map[string]window.Counter
	evictions uint64
	// lost counts counters whose hits were dropped to stay within the
	// bounds: evicted below 0, or above 0 with the orphans full.
	lost uint64
}

// counter is one (limit, id) window counter, in three parts.
type counter struct {
	period int64 // ms; a change of period is another counter
	// synced is the source's total as the last cycle read it, inflight
	// the hits the running cycle pushes, pending those counted since
	// (below 0: all of them).
	synced, inflight, pending window.Counter
	// fetched is set once a cycle read the totals; until then a cycle
	// keeps the counter, even counting nothing, to read them.
	fetched bool
}

// The samples a shard looks at (a map's iteration starts at a random
// place): for an eviction, and, at each insert, for idle counters.
const (
	evictSample = 8
	sweepSample = 2
)

// at returns c's counts at nowMs for a window of period, as a counter of
// that window: zero when c was counted under another period.
func at(c window.Counter, nowMs, period int64) window.Counter {
	start, cur, prev := c.At(nowMs, period)
	return window.Counter{Period: period, Start: start, Cur: cur, Prev: prev}
}

func empty(c window.Counter) bool { return c.Cur == 0 && c.Prev == 0 }

// state returns the sum of c's parts at nowMs: what a decision reads.
func (c *counter) state(nowMs, period int64) window.Counter {
	if c == nil || c.period != period {
		return window.Counter{Period: period, Start: at(window.Counter{}, nowMs, period).Start}
	}
	s, f, p := at(c.synced, nowMs, period), at(c.inflight, nowMs, period), at(c.pending, nowMs, period)
	return window.Counter{Period: period, Start: s.Start, Cur: s.Cur + f.Cur + p.Cur, Prev: s.Prev + f.Prev + p.Prev}
}

func (c *counter) unpushed(nowMs int64) bool {
	return !empty(at(c.pending, nowMs, c.period)) || !empty(at(c.inflight, nowMs, c.period))
}

func (c *counter) idle(nowMs int64) bool {
	return c.fetched && !c.unpushed(nowMs) && empty(at(c.synced, nowMs, c.period))
}

func add(c window.Counter, nowMs, period, n int64) window.Counter {
	c = at(c, nowMs, period)
	c.Cur += n
	return c
}

func merge(a, b window.Counter, nowMs, period int64) window.Counter {
	a, b = at(a, nowMs, period), at(b, nowMs, period)
	a.Cur += b.Cur
	a.Prev += b.Prev
	return a
}

func (g *group) shardIndex(l *Layer, key string) int {
	return int(maphash.String(l.seed, key) % uint64(len(g.shards)))
}

// insert makes a counter for key, with the shard locked, making room
// first when the shard is full; the keys of batch are not evicted. The
// key's orphan, if it has one, becomes the new counter's unpushed hits.
//
// A counter of another period is replaced, and its unpushed hits are
// dropped: a window is its period and its start, so no decision reads
// them any more, and pushing them would make the source replace its
// counter of the new period (the one everyone now counts in) with one of
// the old. An orphan of another period is dropped likewise.
func (sh *shard) insert(key string, period, nowMs int64, batch []bucket.Op, rate time.Duration) *counter {
	sh.sweep(nowMs)
	c := &counter{period: period, fetched: rate < 0}
	if old := sh.counters[key]; old != nil {
		// Hits in flight stay with old: the running cycle settles them.
		old.pending = window.Counter{}
		delete(sh.counters, key)
	} else {
		if o, ok := sh.orphans[key]; ok {
			delete(sh.orphans, key)
			if o.Period == period {
				c.pending = at(o, nowMs, period)
			}
		}
		if len(sh.counters) >= sh.capacity {
			sh.evict(nowMs, batch, rate)
		}
	}
	sh.counters[key] = c
	return c
}

// sweep forgets the counters that count nothing among a sample, so that a
// group without cycles (below 0) does not fill up with counters whose
// windows passed.
func (sh *shard) sweep(nowMs int64) {
	seen := 0
	for key, c := range sh.counters {
		if c.idle(nowMs) {
			delete(sh.counters, key)
		}
		if seen++; seen >= sweepSample {
			return
		}
	}
}

// keep puts unpushed hits of key back for the next cycle, with its
// counter or as its orphan; hits of another period are dropped (see
// insert). It reports false when the orphans are full.
func (sh *shard) keep(key string, hits window.Counter, nowMs int64) bool {
	if hits.Period == 0 {
		return true // nothing was counted
	}
	hits = at(hits, nowMs, hits.Period)
	if empty(hits) {
		return true
	}
	if c := sh.counters[key]; c != nil {
		if c.period == hits.Period {
			c.pending = merge(c.pending, hits, nowMs, c.period)
		}
		return true
	}
	if o, ok := sh.orphans[key]; ok {
		if o.Period == hits.Period {
			sh.orphans[key] = merge(o, hits, nowMs, o.Period)
		}
		return true
	}
	if len(sh.orphans) >= sh.capacity {
		return false
	}
	sh.orphans[key] = hits
	return true
}

// evict removes one counter of a full shard: among a sample, one that
// counts nothing if there is one, else one without unpushed hits, else the
// one counting least. Counters of the running batch are passed over. Above
// 0 (rate) it leaves its unpushed hits as the key's orphan while there is
// room (hits in flight stay with it: the running cycle settles them).
func (sh *shard) evict(nowMs int64, batch []bucket.Op, rate time.Duration) {
	var victim string
	var vc *counter
	bestRank, bestCount := 3, int64(0)
	seen := 0
	for key, c := range sh.counters {
		if slices.ContainsFunc(batch, func(op bucket.Op) bool { return op.Key == key }) {
			continue
		}
		s := c.state(nowMs, c.period)
		count := s.Cur + s.Prev
		rank := 2
		switch {
		case count == 0 && !c.unpushed(nowMs):
			rank = 0
		case !c.unpushed(nowMs):
			rank = 1
		}
		if vc == nil || rank < bestRank || (rank == bestRank && count < bestCount) {
			victim, vc, bestRank, bestCount = key, c, rank, count
		}
		if seen++; seen >= evictSample || rank == 0 {
			break
		}
	}
	if vc == nil {
		return // every counter belongs to the batch: the bound gives way
	}
	sh.evictions++
	delete(sh.counters, victim)
	if rate > 0 {
		if !sh.keep(victim, vc.pending, nowMs) {
			sh.lost++
		}
		vc.pending = window.Counter{}
	} else if bestCount > 0 {
		sh.lost++
	}
}

// pending counts the keys with unpushed hits, orphans included.
func (sh *shard) pending(nowMs int64) int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	n := 0
	for _, c := range sh.counters {
		if c.unpushed(nowMs) {
			n++
		}
	}
	for _, o := range sh.orphans {
		if !empty(at(o, nowMs, o.Period)) {
			n++
		}
	}
	return n
}

// windowCycle pushes every unpushed hit of g's window counters and reads
// back the totals of every one held, in one SyncWindows call. The pushes
// the source did not certainly apply put their hits back for the next
// cycle; those it applied are done, even when others failed.
func (l *Layer) windowCycle(ctx context.Context, g *group) (syncResult, error) {
	now := l.opts.Clock.Now().UnixNano()
	nowMs := bucket.Millis(now)
	var pushes []syncpush.Window
	var held []*counter // pushes[i]'s counter; nil for an orphan
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		for key, c := range sh.counters {
			if c.idle(nowMs) {
				delete(sh.counters, key)
				continue
			}
			c.inflight, c.pending = at(c.pending, nowMs, c.period), window.Counter{}
			pushes = append(pushes, push(key, c.inflight))
			held = append(held, c)
		}
		for key, o := range sh.orphans {
			if h := at(o, nowMs, o.Period); !empty(h) {
				pushes = append(pushes, push(key, h))
				held = append(held, nil)
			}
		}
		clear(sh.orphans)
		sh.mu.Unlock()
	}
	if len(pushes) == 0 {
		return syncResult{}, nil
	}
	err := ErrNoSyncer
	if l.opts.Syncer != nil {
		err = l.syncCall(ctx, g, "counters", len(pushes), func(ctx context.Context) error {
			return l.opts.Syncer.SyncWindows(ctx, now, pushes)
		})
	}
	// Settle with the clock's now: hits that waited for a failed push are
	// read as of when they are put back.
	nowMs = bucket.Millis(l.opts.Clock.Now().UnixNano())
	var res syncResult
	var sh *shard
	for i := range pushes {
		p := &pushes[i]
		if next := &g.shards[g.shardIndex(l, p.Key)]; next != sh {
			if sh != nil {
				sh.mu.Unlock()
			}
			sh = next
			sh.mu.Lock()
		}
		c := held[i]
		if c != nil {
			c.inflight = window.Counter{}
		}
		if err != nil && !p.Applied {
			if !sh.keep(p.Key, hitsOf(p), nowMs) {
				sh.lost++
			}
			continue
		}
		if c != nil && sh.counters[p.Key] == c {
			c.synced, c.fetched = p.Total, true
		}
		if p.Hits > 0 || p.PrevHits > 0 {
			res.Pushed++
		}
		if c != nil {
			res.Fetched++
		}
	}
	if sh != nil {
		sh.mu.Unlock()
	}
	if err != nil {
		return syncResult{}, err
	}
	return res, nil
}

func push(key string, hits window.Counter) syncpush.Window {
	return syncpush.Window{Key: key, Period: hits.Period, Start: hits.Start, Hits: hits.Cur, PrevHits: hits.Prev}
}

func hitsOf(p *syncpush.Window) window.Counter {
	return window.Counter{Period: p.Period, Start: p.Start, Cur: p.Hits, Prev: p.PrevHits}
}
