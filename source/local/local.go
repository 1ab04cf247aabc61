// Package local is the local layer of window and rate-counter limits
// whose sync_rate is not 0, and of the penalty boxes of such limits:
// counters and box entries in this process's memory, in front of a source
// shared by several processes (Redis), and the sync loops that keep them
// in step with it. It implements ratelimits.Local.
//
// A limit's sync_rate says where its hits are counted and its ids boxed:
//
//   - below 0, here only: each process counts and boxes alone and the
//     source never sees the limit;
//   - above 0, here first: a decision reads the totals this process last
//     read from the source plus the hits it counted since and has not
//     pushed, with no round trip. Every sync_rate a loop pushes those hits
//     (syncpush.WindowSyncer and syncpush.RateSyncer add them
//     atomically on the source, so no process's hit is lost) and reads
//     back the totals of every counter the process holds. Box entries go
//     the same way: an expiry set here is pushed at the next cycle (the
//     source keeps the later of its own and the pushed one), and every
//     entry held is read back, so an id boxed in one process is boxed in
//     another within about two sync intervals (the first one's cycle,
//     then the other's). A removal, and an add that shortens an entry,
//     cannot be pushed that way: they are applied on the source at once
//     (Layer.Call).
//
// Rate counters and boxes follow bucket.SpendBatch: their hits and
// boxings are written also in a denied batch.
//
// Everything lives in groups, one per sync_rate value (all values below
// 0 share one group that never syncs), each with its own loop, so that a
// limit is pushed on its own schedule and a cycle visits only its own
// counters. A group's window counters are spread over shards, each with
// its own lock; its rate counters and box entries are kept per limit name
// in tables, each with its own lock, where the limit's capacity can be
// enforced exactly. A batch takes the locks of all its keys in one fixed
// order (group, shards before tables, index), so two batches never
// deadlock.
//
// Why not an in-process memory source as the store: the Limiter writes a
// mixed batch's local window costs only after the source part was allowed,
// which needs an add that does not decide again (Commit), and a counter
// that syncs holds three things (totals read, hits in flight, hits not
// pushed) where a source stores one state per key. The arithmetic itself
// is not repeated here: every decision goes through the bucket, window and
// ratecounter packages, as on every source.
//
// Memory is bounded. Window counters: each group holds at most MaxCounters.
// A cycle forgets counters that count nothing any more; a full shard makes
// room by evicting the counter with the least to lose. An evicted counter
// of a limit above 0 leaves its unpushed hits behind as the key's orphan
// (only its totals are forgotten): the next cycle pushes them, and a
// counter made again for the key before then takes them back, so that
// decisions keep counting them. Orphans are bounded too, by as many keys
// as counters per shard: beyond that, an eviction drops its hits. An
// evicted counter of a limit below 0 takes its hits with it (the source
// never sees them). Rate counters and box entries: each limit holds at
// most its capacity of each; a new counter evicts the least recently
// incremented one, a new box entry the one with the smallest remaining
// time, with orphans as for windows (as many keys again). Counters and
// entries that count or box nothing are forgotten first; above 0 only
// once they were not looked up for a minute, so that the cycles go on
// reading what the others do to an id in use here. Evictions counts the
// counters that lost hits either way.
package local

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limiter-dev/limiter/source/syncpush"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// DefaultMaxCounters bounds each group's counters when Options gives no
// bound.
const DefaultMaxCounters = 1_000_000

// DefaultShutdownRetry is the pause between two attempts of the push Close
// makes, when Options gives none.
const DefaultShutdownRetry = 100 * time.Millisecond

// The time one SyncWindows call is given, by default: its group's
// sync_rate (a cycle should not take longer than the wait for the next),
// but at least minSyncTimeout, so that a short sync_rate still leaves a
// large push time to travel, and at most maxSyncTimeout, so that a hung
// source holds a long sync_rate's cycle (and the resets and admin syncs
// waiting for it) no longer than that.
const (
	minSyncTimeout = time.Second
	maxSyncTimeout = 30 * time.Second
)

// shardsPerGroup is how many shards, each with a lock, a group splits
// into: enough that a few cores rarely wait on the same lock.
const shardsPerGroup = 64

// minPerShard keeps shards from being so small that per-shard eviction
// stops resembling a group-wide one.
const minPerShard = 16

// evictSample is how many counters eviction compares.
const evictSample = 8

// smallBatch is the batch size handled with arrays on the stack.
const smallBatch = 8

// ErrNoSyncer is the error of every sync cycle of a Layer made without a
// Syncer: the source cannot take pushes, so hits stay here, unpushed.
var ErrNoSyncer = errors.New("local: the source offers no window sync")

// Trigger says what started a sync cycle.
type Trigger string

// The triggers of a cycle.
const (
	TriggerTimer    Trigger = "timer"    // the group's loop, every sync_rate
	TriggerAdmin    Trigger = "admin"    // Sync (POST /v1/admin/sync)
	TriggerShutdown Trigger = "shutdown" // Close
)

// Cycle reports one sync cycle of one group, for metrics and logs.
type Cycle struct {
	Trigger  Trigger
	SyncRate time.Duration
	// Pushed and Fetched count counters as ratelimits.SyncResult does;
	// both are 0 when Err is set.
	Pushed, Fetched int
	// Duration is how long the cycle took, waiting for an earlier cycle
	// of the group excluded.
	Duration time.Duration
	// Err is the push's failure; the hits of the pushes the source did
	// not certainly apply are kept for the next cycle.
	Err error
}

// Options configure a Layer.
type Options struct {
	// Syncer is the shared source's side of a sync. Nil makes every cycle
	// fail with ErrNoSyncer (hits above 0 stay here, unpushed). When it is
	// also a syncpush.RateSyncer, rate counters and box entries of
	// limits above 0 sync too (else their cycles fail with
	// ErrNoRateSyncer); when it also has the ERL Call of a
	// ratelimits.Source, a box removal above 0 is applied with it.
	Syncer syncpush.WindowSyncer
	// Clock gives now for decisions and syncs: the Limiter's clock.
	// Required.
	Clock clock.Clock
	// Timers schedules the sync loops and the pauses between Close's
	// attempts: real time (clock.New()) when nil. Tests pass a fake.
	Timers clock.Clock
	// MaxCounters bounds the counters of each group (DefaultMaxCounters
	// when <= 0).
	MaxCounters int
	// SyncTimeout bounds one SyncWindows call; when <= 0, a group's calls
	// get its sync_rate, from 1s to 30s.
	SyncTimeout time.Duration
	// ShutdownRetry is the pause between two attempts of Close's push
	// (DefaultShutdownRetry when 0; < 0 retries at once).
	ShutdownRetry time.Duration
	// OnCycle, when set, is called after every sync cycle, on the
	// goroutine that ran it.
	OnCycle func(Cycle)
}

// Layer is the local layer. Its zero value is not usable; call New. It is
// safe for concurrent use.
type Layer struct {
	opts    Options
	seed    maphash.Seed
	nShards int // per group
	// rates and caller are the Syncer's other sides, when it has them:
	// the sync of rate counters and box entries, and the ERL call that
	// removes or shortens a box entry on the source at once.
	rates  syncpush.RateSyncer
	caller caller

	// groups maps a sync_rate to its group (all rates below 0 to -1's). The
	// map is never changed once stored: a new group stores a copy with it
	// added, under mu, so that finding a group takes no lock.
	groups atomic.Pointer[map[time.Duration]*group]
	mu     sync.Mutex
	nextID int
	closed bool

	loopCtx    context.Context
	stopLoops  context.CancelFunc
	loops      sync.WaitGroup
	closeOnce  sync.Once
	closeError error
	// rearmed, when set (by tests, before the first hit), is called by a
	// loop each time it has set its timer for the next cycle, with its
	// group's sync_rate: a fake clock moved before that would be missed.
	rearmed func(time.Duration)
}

// New returns an empty Layer. Its loops start with the first hit of each
// sync_rate above 0; Close stops them.
func New(opts Options) (*Layer, error) {
	if opts.Clock == nil {
		return nil, errors.New("local: New needs a clock")
	}
	if opts.Timers == nil {
		opts.Timers = clock.New()
	}
	if opts.MaxCounters <= 0 {
		opts.MaxCounters = DefaultMaxCounters
	}
	if opts.ShutdownRetry == 0 {
		opts.ShutdownRetry = DefaultShutdownRetry
	}
	l := &Layer{opts: opts, seed: maphash.MakeSeed(), nShards: shardsPerGroup}
	if opts.Syncer != nil {
		l.rates, _ = opts.Syncer.(syncpush.RateSyncer)
		l.caller, _ = opts.Syncer.(caller)
	}
	l.groups.Store(&map[time.Duration]*group{})
	if opts.MaxCounters/shardsPerGroup < minPerShard {
		l.nShards = 1 // a small bound is one shard's
	}
	l.loopCtx, l.stopLoops = context.WithCancel(context.Background())
	return l, nil
}

// group holds the counters of one sync_rate.
type group struct {
	id     int
	rate   time.Duration // < 0: local only, never synced
	shards []shard
	// cycle is held (a token in it) for a whole cycle, and by Reset and
	// the box calls made on the source at once: one cycle at a time per
	// group, and no push in flight while a reset or a removal deletes. A
	// channel rather than a mutex, so that waiting for it ends with the
	// waiter's context.
	cycle chan struct{}
	// tables maps a limit name ("<enum>:") to its rate counters and box
	// entries; like groups, the map is replaced, never changed, under
	// tablesMu.
	tables   atomic.Pointer[map[string]*table]
	tablesMu sync.Mutex
}

// lock takes g's cycle token, or fails when ctx ends first. A free token
// is taken even with ctx done: Close's one attempt then still runs.
func (g *group) lock(ctx context.Context) error {
	select {
	case g.cycle <- struct{}{}:
		return nil
	default:
	}
	select {
	case g.cycle <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("local: waiting for the running sync of sync_rate %s: %w", g.rate, ctx.Err())
	}
}

// unlock gives g's cycle token back.
func (g *group) unlock() { <-g.cycle }

// shard is a part of a group's counters under one lock.
type shard struct {
	mu       sync.Mutex
	counters map[string]*counter
	capacity int
	// orphans are, per key, the unpushed hits of an evicted counter (or
	// of one whose push failed after it was evicted); the next cycle
	// pushes them, and a counter made for the key takes them back. A key
	// never has both a counter and an orphan. At most capacity keys: an
	// orphan is smaller than a counter, but a flood of fresh ids must
	// not grow a shard without end while pushes fail. Only groups above 0
	// have orphans.
	orphans   map[string]window.Counter
	evictions uint64
	// lost counts counters whose hits were dropped to stay within the
	// bounds: evicted below 0, or above 0 with the shard's orphans full.
	lost uint64
}

// counter is one (limit, id) counter. Each part is a window.Counter: hits
// of the window starting at Start and of the one before.
type counter struct {
	period int64 // ms; a change of period is another counter
	// synced is the source's total as the last cycle read it.
	synced window.Counter
	// inflight are the hits the running cycle pushes, zero between cycles.
	inflight window.Counter
	// pending are hits counted since the last cycle's snapshot, not
	// pushed yet (for a limit below 0: all its hits).
	pending window.Counter
	// fetched is set once a cycle read the counter's totals; until then
	// a cycle keeps it, even counting nothing, to read them.
	fetched bool
}

// at returns c's counts at nowMs for a window of period, as a counter of
// that window: zero when c was counted under another period.
func at(c window.Counter, nowMs, period int64) window.Counter {
	start, cur, prev := c.At(nowMs, period)
	return window.Counter{Period: period, Start: start, Cur: cur, Prev: prev}
}

// empty reports whether c holds no hit.
func empty(c window.Counter) bool { return c.Cur == 0 && c.Prev == 0 }

// state returns the sum of c's parts at nowMs for a window of period: what
// a decision reads.
func (c *counter) state(nowMs, period int64) window.Counter {
	if c == nil || c.period != period {
		return window.Counter{Period: period, Start: at(window.Counter{}, nowMs, period).Start}
	}
	s, f, p := at(c.synced, nowMs, period), at(c.inflight, nowMs, period), at(c.pending, nowMs, period)
	return window.Counter{Period: period, Start: s.Start, Cur: s.Cur + f.Cur + p.Cur, Prev: s.Prev + f.Prev + p.Prev}
}

// unpushed reports whether c holds hits the source has not been sent.
func (c *counter) unpushed(nowMs int64) bool {
	return !empty(at(c.pending, nowMs, c.period)) || !empty(at(c.inflight, nowMs, c.period))
}

// idle reports whether c counts nothing at nowMs and a cycle may forget
// it: its totals were read, and neither they nor any hit of its own still
// count.
func (c *counter) idle(nowMs int64) bool {
	return c.fetched && !c.unpushed(nowMs) && empty(at(c.synced, nowMs, c.period))
}

// add adds n hits to the current window of c at nowMs.
func add(c window.Counter, nowMs, period, n int64) window.Counter {
	c = at(c, nowMs, period)
	c.Cur += n
	return c
}

// merge adds b's hits to a's, both read at nowMs.
func merge(a, b window.Counter, nowMs, period int64) window.Counter {
	a, b = at(a, nowMs, period), at(b, nowMs, period)
	a.Cur += b.Cur
	a.Prev += b.Prev
	return a
}

// msOf is now (unix ns) in whole milliseconds, rounded down, as windows
// decide.
func msOf(now int64) int64 {
	ms := now / 1_000_000
	if now%1_000_000 < 0 {
		ms--
	}
	return ms
}

// groupOf returns the group of a sync_rate, made (and its loop started)
// on first use.
func (l *Layer) groupOf(rate time.Duration) *group {
	if rate <= 0 {
		rate = -1
	}
	if g := (*l.groups.Load())[rate]; g != nil {
		return g
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	groups := *l.groups.Load()
	if g := groups[rate]; g != nil {
		return g
	}
	g := &group{id: l.nextID, rate: rate, shards: make([]shard, l.nShards), cycle: make(chan struct{}, 1)}
	g.tables.Store(&map[string]*table{})
	l.nextID++
	for i := range g.shards {
		// The remainder spread, so the capacities add up to MaxCounters.
		capacity := l.opts.MaxCounters / l.nShards
		if i < l.opts.MaxCounters%l.nShards {
			capacity++
		}
		g.shards[i].counters = map[string]*counter{}
		g.shards[i].orphans = map[string]window.Counter{}
		g.shards[i].capacity = capacity
	}
	next := maps.Clone(groups)
	next[rate] = g
	l.groups.Store(&next)
	if rate > 0 && !l.closed {
		// The first tick is set before this call returns, so the loop
		// counts its sync_rate from the group's first hit.
		t := l.opts.Timers.NewTimer(rate)
		l.loops.Add(1)
		go l.loop(g, t)
	}
	return g
}

// syncedGroups returns the groups above 0 in the order of their ids.
func (l *Layer) syncedGroups() []*group {
	var gs []*group
	for _, g := range *l.groups.Load() {
		if g.rate > 0 {
			gs = append(gs, g)
		}
	}
	slices.SortFunc(gs, func(a, b *group) int { return a.id - b.id })
	return gs
}

// allGroups returns every group.
func (l *Layer) allGroups() []*group {
	groups := *l.groups.Load()
	gs := make([]*group, 0, len(groups))
	for _, g := range groups {
		gs = append(gs, g)
	}
	return gs
}

func (g *group) shardIndex(l *Layer, key string) int {
	return int(maphash.String(l.seed, key) % uint64(len(g.shards)))
}

// insert makes a counter for key, with the shard locked, making room
// first when the shard is full. The keys of batch are not evicted. The
// key's orphan, if it has one, becomes the new counter's unpushed hits.
//
// A counter of another period is replaced, and its unpushed hits are
// dropped: a window is its period and its start, so no decision reads
// them any more, and pushing them would make the source replace its
// counter of the new period (the one everyone now counts in) with one of
// the old. An orphan of another period is dropped likewise.
func (sh *shard) insert(l *Layer, key string, period, nowMs int64, batch []ratelimits.LocalOp, rate time.Duration) *counter {
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

// sweepSample is how many counters each insert looks at to forget those
// that count nothing.
const sweepSample = 2

// sweep forgets the counters that count nothing among sweepSample of the
// shard's (a map's iteration starts at a random place), so that a group
// without cycles (limits below 0) does not fill up with counters whose
// windows passed. Every insert calls it, as the memory source's sweep.
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

// keep puts unpushed hits of key back for the next cycle, with the shard
// locked: with the key's counter when it has one, else with its orphan.
// Hits of a period other than the counter's or the orphan's are dropped
// (that one is newer: see insert). keep reports false when it dropped the
// hits because the shard's orphans are full.
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

// evict removes one counter of a full shard: among up to evictSample of
// them (a map's iteration starts at a random place), one that counts
// nothing if there is one, else one without unpushed hits, else the one
// counting least. Counters of the running batch are passed over. rate is
// the group's: a counter of a limit below 0 takes its hits with it, one
// above 0 leaves its unpushed hits as the key's orphan while the shard has
// room for one (hits in flight stay with the counter: the running cycle
// settles them).
func (sh *shard) evict(nowMs int64, batch []ratelimits.LocalOp, rate time.Duration) {
	var victim string
	var vc *counter
	bestRank, bestCount := 3, int64(0)
	seen := 0
	for key, c := range sh.counters {
		if slices.ContainsFunc(batch, func(op ratelimits.LocalOp) bool { return op.Op.Key == key }) {
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

// loop runs a group's cycles every sync_rate until Close. The ticks keep
// their cadence (start, start + sync_rate, ...) whatever a cycle takes; a
// cycle that takes longer than sync_rate is followed by the next one at
// once, and the ticks it overran are not made up.
func (l *Layer) loop(g *group, t *clock.Timer) {
	defer l.loops.Done()
	defer t.Stop()
	for {
		select {
		case <-l.loopCtx.Done():
			return
		case tick := <-t.C:
			_, _ = l.runCycle(l.loopCtx, g, TriggerTimer) // a failure is reported to OnCycle; its hits wait for the next cycle
			t.Reset(max(tick.Add(g.rate).Sub(l.opts.Timers.Now()), 0))
			if l.rearmed != nil {
				l.rearmed(g.rate)
			}
		}
	}
}

// runCycle runs one cycle of g and reports it.
func (l *Layer) runCycle(ctx context.Context, g *group, trigger Trigger) (ratelimits.SyncResult, error) {
	if err := g.lock(ctx); err != nil {
		return ratelimits.SyncResult{}, err
	}
	defer g.unlock()
	start := l.opts.Timers.Now()
	res, err := l.cycle(ctx, g)
	if l.opts.OnCycle != nil {
		l.opts.OnCycle(Cycle{Trigger: trigger, SyncRate: g.rate, Pushed: res.Pushed, Fetched: res.Fetched,
			Duration: l.opts.Timers.Since(start), Err: err})
	}
	return res, err
}

// cycle runs g's cycle, with its cycle token held: its window counters'
// part, then its rate counters' and box entries' part. Each part keeps
// what it could not push whatever became of the other.
func (l *Layer) cycle(ctx context.Context, g *group) (ratelimits.SyncResult, error) {
	wres, werr := l.windowCycle(ctx, g)
	rres, rerr := l.rateCycle(ctx, g)
	if err := errors.Join(werr, rerr); err != nil {
		return ratelimits.SyncResult{}, err
	}
	return ratelimits.SyncResult{Pushed: wres.Pushed + rres.Pushed, Fetched: wres.Fetched + rres.Fetched}, nil
}

// windowCycle pushes every unpushed hit of g's window counters and reads
// back the totals of every one it holds, in one SyncWindows call.
// The pushes the source did not certainly apply (all of them when the
// call failed as a whole) put their hits back with the unpushed ones, for
// the next cycle; those it applied are done, even when others failed, and
// their counters take the totals read. Each key is pushed once: a key has
// a counter or an orphan, never both.
func (l *Layer) windowCycle(ctx context.Context, g *group) (ratelimits.SyncResult, error) {
	now := l.opts.Clock.Now().UnixNano()
	nowMs := msOf(now)
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
		return ratelimits.SyncResult{}, nil
	}
	err := l.syncWindows(ctx, g, now, pushes)
	// Settle under the shards' locks, with the clock's now: hits that
	// waited for a failed push are read as of when they are put back.
	nowMs = msOf(l.opts.Clock.Now().UnixNano())
	var res ratelimits.SyncResult
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
			// Back with the key's counter (this one, or the one made
			// since it was dropped) or as its orphan.
			if !sh.keep(p.Key, hitsOf(p), nowMs) {
				sh.lost++
			}
			continue
		}
		if c != nil && sh.counters[p.Key] == c {
			c.synced, c.fetched = p.Total, true
		}
		if err == nil {
			if p.Hits > 0 || p.PrevHits > 0 {
				res.Pushed++
			}
			if c != nil {
				res.Fetched++
			}
		}
	}
	if sh != nil {
		sh.mu.Unlock()
	}
	if err != nil {
		return ratelimits.SyncResult{}, err
	}
	return res, nil
}

// push is the WindowPush of a counter's hits, read at the cycle's now.
func push(key string, hits window.Counter) syncpush.Window {
	return syncpush.Window{Key: key, Period: hits.Period, Start: hits.Start, Hits: hits.Cur, PrevHits: hits.Prev}
}

// hitsOf is the hits a push carried, as a counter.
func hitsOf(p *syncpush.Window) window.Counter {
	return window.Counter{Period: p.Period, Start: p.Start, Cur: p.Hits, Prev: p.PrevHits}
}

// syncWindows makes the cycle's one call, within its timeout.
func (l *Layer) syncWindows(ctx context.Context, g *group, now int64, pushes []syncpush.Window) error {
	if l.opts.Syncer == nil {
		return ErrNoSyncer
	}
	ctx, cancel := context.WithTimeout(ctx, l.syncTimeout(g))
	defer cancel()
	if err := l.opts.Syncer.SyncWindows(ctx, now, pushes); err != nil {
		return fmt.Errorf("local: pushing %d counters of sync_rate %s: %w", len(pushes), g.rate, err)
	}
	return nil
}

// syncTimeout is the time one call of g's cycles to the source is given.
func (l *Layer) syncTimeout(g *group) time.Duration {
	if l.opts.SyncTimeout > 0 {
		return l.opts.SyncTimeout
	}
	return min(max(g.rate, minSyncTimeout), maxSyncTimeout)
}

// Sync implements ratelimits.Local: one cycle of every group above 0, one
// after the other. Every group is tried; the error joins those that failed.
func (l *Layer) Sync(ctx context.Context) (ratelimits.SyncResult, error) {
	var total ratelimits.SyncResult
	var errs []error
	for _, g := range l.syncedGroups() {
		res, err := l.runCycle(ctx, g, TriggerAdmin)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		total.Pushed += res.Pushed
		total.Fetched += res.Fetched
	}
	return total, errors.Join(errs...)
}

// Close stops the sync loops and pushes every unpushed hit, trying again
// after a pause (Options.ShutdownRetry) while the push fails, until ctx
// ends: at least one attempt is made per group. The error says how many
// counters kept hits that were not pushed. Decisions still work after
// Close (they count here only); no loop starts again. Close returns the
// same answer every time.
func (l *Layer) Close(ctx context.Context) error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		l.stopLoops()
		l.loops.Wait()
		var errs []error
		for _, g := range l.syncedGroups() {
			if err := l.finalPush(ctx, g); err != nil {
				errs = append(errs, err)
			}
		}
		l.closeError = errors.Join(errs...)
	})
	return l.closeError
}

// finalPush pushes g's hits until it succeeds or ctx ends.
func (l *Layer) finalPush(ctx context.Context, g *group) error {
	for {
		_, err := l.runCycle(ctx, g, TriggerShutdown)
		if err == nil {
			return nil
		}
		if ctx.Err() == nil && l.opts.ShutdownRetry > 0 {
			t := l.opts.Timers.NewTimer(l.opts.ShutdownRetry)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
		if ctx.Err() != nil {
			return fmt.Errorf("local: %d counters of sync_rate %s keep hits that were not pushed: %w", g.pending(l), g.rate, err)
		}
	}
}

// pending counts g's keys with unpushed hits or box expiries, counters,
// box entries and orphans.
func (g *group) pending(l *Layer) int {
	now := l.opts.Clock.Now().UnixNano()
	nowMs := msOf(now)
	n := 0
	for _, t := range g.tableList() {
		n += t.pending(now)
	}
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
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
		sh.mu.Unlock()
	}
	return n
}

// Pending returns how many counters and box entries of limits above 0
// hold hits or expiries not pushed to the source yet (counted when asked:
// it visits every one).
func (l *Layer) Pending() int {
	n := 0
	for _, g := range l.syncedGroups() {
		n += g.pending(l)
	}
	return n
}

// Counters returns how many counters the layer holds, window and rate
// counters, in every group.
func (l *Layer) Counters() int {
	n := 0
	for _, g := range l.allGroups() {
		for i := range g.shards {
			sh := &g.shards[i]
			sh.mu.Lock()
			n += len(sh.counters)
			sh.mu.Unlock()
		}
		for _, t := range g.tableList() {
			t.mu.Lock()
			n += t.counters.Len()
			t.mu.Unlock()
		}
	}
	return n
}

// Boxes returns how many penalty box entries the layer holds, in every
// group.
func (l *Layer) Boxes() int {
	n := 0
	for _, g := range l.allGroups() {
		for _, t := range g.tableList() {
			t.mu.Lock()
			n += t.boxes.Len()
			t.mu.Unlock()
		}
	}
	return n
}

// Evictions returns how many counters and box entries were evicted to
// stay within the bounds (MaxCounters for window counters, a limit's
// capacity for its rate counters and box), and how many counters lost hits
// to stay within them: evicted ones of limits below 0 that still counted,
// and, above 0, those whose unpushed hits found the orphans full (at an
// eviction, or when a failed push put back the hits of a counter evicted
// meanwhile).
func (l *Layer) Evictions() (evicted, lost uint64) {
	for _, g := range l.allGroups() {
		for i := range g.shards {
			sh := &g.shards[i]
			sh.mu.Lock()
			evicted += sh.evictions
			lost += sh.lost
			sh.mu.Unlock()
		}
		for _, t := range g.tableList() {
			t.mu.Lock()
			evicted += t.evictions
			lost += t.lost
			t.mu.Unlock()
		}
	}
	return evicted, lost
}

// Layer is the ratelimits.Local the service wires in front of a shared
// source.
var _ ratelimits.Local = (*Layer)(nil)
