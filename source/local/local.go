// Package local is the local layer: the counters of window and
// rate-counter limits whose sync_rate is not 0, and the penalty boxes of
// such limits, kept in this process's memory in front of a shared source,
// with the sync loops that push them to it and read back what every
// process did (docs/design.md, "Where the counting happens"). The Limiter
// sees it as its source (Layer.Front), which hands every other op to the
// shared one. Box expiries sync like hits (the source keeps the later
// one), and each cycle also reads the box entries the others stored
// (syncpush.BoxLog) for the limits it follows, so an id boxed in one
// process is boxed in another within about two sync intervals, also in
// one that never counted it.
//
// Everything lives in groups, one per sync_rate (all values below 0 share
// one that never syncs), each with its own loop, so that a limit is pushed
// on its own schedule and a cycle visits only its own counters. Window
// counters are spread over shards; rate counters and box entries are kept
// per limit name in tables, where the limit's capacity can be enforced
// exactly.
//
// Why not an in-process memory source as the store: a mixed batch's window
// costs are written only after the shared source's part was allowed,
// which needs an add that does not decide again (Commit), and a counter
// that syncs holds three things (totals read, hits in flight, hits not
// pushed) where a source stores one state per key.
//
// Memory is bounded. An evicted counter or entry of a limit above 0
// leaves what it had not pushed as the key's orphan (bounded too), which
// the next cycle pushes and a counter made again for the key takes back,
// so that decisions keep counting it. Above 0, counters that count
// nothing are kept a minute after their last lookup, so that the cycles
// go on reading what the others do to an id in use here.
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

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/window"
	"github.com/limiter-dev/limiter/source/syncpush"
)

// DefaultMaxCounters bounds each group's window counters when Options
// gives no bound.
const DefaultMaxCounters = 1_000_000

// DefaultShutdownRetry is the pause between two attempts of the push Close
// makes, when Options gives none.
const DefaultShutdownRetry = 100 * time.Millisecond

// A cycle's call is given its group's sync_rate by default (a cycle
// should not take longer than the wait for the next), at least
// minSyncTimeout for a large push to travel, at most maxSyncTimeout so
// that a hung source holds the resets and admin syncs waiting for a cycle
// no longer than that.
const (
	minSyncTimeout = time.Second
	maxSyncTimeout = 30 * time.Second
)

// shardsPerGroup is enough shards that a few cores rarely wait on the same
// lock; minPerShard keeps shards from being so small that per-shard
// eviction stops resembling a group-wide one.
const (
	shardsPerGroup = 64
	minPerShard    = 16
)

// smallBatch is the batch size handled with arrays on the stack.
const smallBatch = 8

// ErrNoSyncer is the error of every sync cycle of a Layer made without a
// Syncer: the source cannot take pushes, so hits stay here, unpushed.
var ErrNoSyncer = errors.New("local: the source offers no window sync")

// Trigger says what started a sync cycle.
type Trigger string

const (
	TriggerTimer    Trigger = "timer"    // the group's loop, every sync_rate
	TriggerAdmin    Trigger = "admin"    // Sync (POST /v1/admin/sync)
	TriggerShutdown Trigger = "shutdown" // Close
	TriggerReload   Trigger = "reload"   // Move: a reload changed a limit's sync_rate
)

// Cycle reports one sync cycle of one group, for metrics and logs.
type Cycle struct {
	Trigger  Trigger
	SyncRate time.Duration
	// Pushed and Fetched count as Sync does; both are 0 when Err is set.
	Pushed, Fetched int
	// Duration excludes waiting for an earlier cycle of the group.
	Duration time.Duration
	// Err is the push's failure; what the source did not certainly apply
	// is kept for the next cycle.
	Err error
	// BoxLogErr is the failure to read a followed limit's box log
	// (Follow); the next cycle reads on from where this one stopped.
	BoxLogErr error
}

// syncResult is what a cycle did, as Sync counts it.
type syncResult struct {
	Pushed  int
	Fetched int
}

// Options configure a Layer.
type Options struct {
	// Syncer is the shared source's side of a sync (nil: every cycle
	// fails with ErrNoSyncer). When it is also a syncpush.RateSyncer, rate
	// counters and box entries sync too (else ErrNoRateSyncer); when it
	// also has the ERL Call of a ratelimits.Source, a box removal above 0
	// is applied with it.
	Syncer syncpush.WindowSyncer
	Clock  clock.Clock // the Limiter's: now for decisions and syncs; required
	// Timers schedules the sync loops and the pauses between Close's
	// attempts: real time (clock.New()) when nil. Tests pass a fake.
	Timers clock.Clock
	// MaxCounters bounds the window counters of each group
	// (DefaultMaxCounters when <= 0).
	MaxCounters int
	// SyncTimeout bounds one call of a cycle to the source; when <= 0, a
	// group's calls get its sync_rate, from 1s to 30s.
	SyncTimeout time.Duration
	// ShutdownRetry is the pause between two attempts of Close's push
	// (DefaultShutdownRetry when 0; < 0 retries at once).
	ShutdownRetry time.Duration
	// SourceTimeout bounds each call a Front makes to its inner source (0:
	// the caller's deadline alone); for a refund, reset or box removal
	// that must wait for a running cycle first, the wait and the call
	// together.
	SourceTimeout time.Duration
	// OnCycle, when set, is called after every cycle, on its goroutine.
	OnCycle func(Cycle)
}

// Layer is the local layer, made by New; safe for concurrent use.
type Layer struct {
	opts    Options
	seed    maphash.Seed
	nShards int // per group
	// rates and caller are the Syncer's other sides, when it has them.
	rates  syncpush.RateSyncer
	caller caller
	boxLog syncpush.BoxLog

	// groups maps a sync_rate to its group (all rates below 0 to -1's).
	// The map is replaced, never changed, under mu, so that finding a
	// group takes no lock.
	groups atomic.Pointer[map[time.Duration]*group]
	mu     sync.Mutex
	closed bool

	loopCtx    context.Context
	stopLoops  context.CancelFunc
	loops      sync.WaitGroup
	closeOnce  sync.Once
	closeError error
	// rearmed, set by tests, is called when a loop has set its timer, so
	// that a fake clock is not moved before.
	rearmed func(time.Duration)
}

// New returns an empty Layer; a loop starts with the first hit of each
// sync_rate above 0.
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
		l.boxLog, _ = opts.Syncer.(syncpush.BoxLog)
	}
	l.groups.Store(&map[time.Duration]*group{})
	if opts.MaxCounters/shardsPerGroup < minPerShard {
		l.nShards = 1 // a small bound is one shard's
	}
	l.loopCtx, l.stopLoops = context.WithCancel(context.Background())
	return l, nil
}

// group holds the counters and box entries of one sync_rate.
type group struct {
	id     int           // the lock order of groups
	rate   time.Duration // < 0: local only, never synced
	shards []shard
	// cycle is held (a token in it) by a cycle, a Reset and a box call
	// made on the source, so that no push is in flight while a reset or a
	// removal deletes: a channel, so that waiting ends with a context.
	cycle chan struct{}
	// tables maps a limit name ("<enum>:") to its rate counters and box
	// entries; like groups, the map is replaced, never changed.
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
		// Nothing was done while waiting: a retry is a first try.
		return fmt.Errorf("local: waiting for the running sync of sync_rate %s: %w: %w", g.rate, ratelimits.ErrNotApplied, ctx.Err())
	}
}

func (g *group) unlock() { <-g.cycle }

// lockGroups takes the cycle tokens of gs, in order, or none when ctx
// ends first.
func lockGroups(ctx context.Context, gs []*group) error {
	for i, g := range gs {
		if err := g.lock(ctx); err != nil {
			unlockGroups(gs[:i])
			return err
		}
	}
	return nil
}

// bounded bounds ctx by Options.SourceTimeout, for a call that waits for a
// running cycle before it calls the source: the wait and the call
// together, as a call to the source alone is bounded.
func (l *Layer) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.opts.SourceTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, l.opts.SourceTimeout)
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
	g := &group{id: len(groups), rate: rate, shards: make([]shard, l.nShards), cycle: make(chan struct{}, 1)}
	g.tables.Store(&map[string]*table{})
	for i := range g.shards {
		// The remainder spread, so the capacities add up to MaxCounters.
		capacity := l.opts.MaxCounters / l.nShards
		if i < l.opts.MaxCounters%l.nShards {
			capacity++
		}
		g.shards[i] = shard{counters: map[string]*counter{}, orphans: map[string]window.Counter{}, capacity: capacity}
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
	gs := slices.DeleteFunc(l.allGroups(), func(g *group) bool { return g.rate < 0 })
	slices.SortFunc(gs, func(a, b *group) int { return a.id - b.id })
	return gs
}

func (l *Layer) allGroups() []*group {
	return slices.Collect(maps.Values(*l.groups.Load()))
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

// runCycle runs one cycle of g, with its cycle token held, and reports
// it. Each part keeps what it could not push whatever became of the other.
func (l *Layer) runCycle(ctx context.Context, g *group, trigger Trigger) (syncResult, error) {
	if err := g.lock(ctx); err != nil {
		return syncResult{}, err
	}
	defer g.unlock()
	start := l.opts.Timers.Now()
	wres, werr := l.windowCycle(ctx, g)
	rres, rerr := l.rateCycle(ctx, g)
	// The box logs are hints: a failure to read one is reported apart,
	// and fails no push.
	bres, berr := l.boxLogCycle(ctx, g)
	res := syncResult{Pushed: wres.Pushed + rres.Pushed, Fetched: wres.Fetched + rres.Fetched + bres.Fetched}
	err := errors.Join(werr, rerr)
	if err != nil {
		res = syncResult{}
	}
	if l.opts.OnCycle != nil {
		l.opts.OnCycle(Cycle{Trigger: trigger, SyncRate: g.rate, Pushed: res.Pushed, Fetched: res.Fetched,
			Duration: l.opts.Timers.Since(start), Err: err, BoxLogErr: berr})
	}
	return res, err
}

// syncCall makes one call of g's cycle to the source, within its timeout.
func (l *Layer) syncCall(ctx context.Context, g *group, what string, n int, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, l.syncTimeout(g))
	defer cancel()
	if err := call(ctx); err != nil {
		return fmt.Errorf("local: pushing %d %s of sync_rate %s: %w", n, what, g.rate, err)
	}
	return nil
}

func (l *Layer) syncTimeout(g *group) time.Duration {
	if l.opts.SyncTimeout > 0 {
		return l.opts.SyncTimeout
	}
	return min(max(g.rate, minSyncTimeout), maxSyncTimeout)
}

// Sync runs one cycle of every group above 0 now, one after the other,
// and counts the (limit, id) counters whose unpushed hits they pushed and
// those whose totals they read back. The error joins those of the cycles
// that failed, whose hits are kept for the next cycle; it wraps
// ratelimits.ErrSourceUnavailable, as any failure of the source does.
func (l *Layer) Sync(ctx context.Context) (pushed, fetched int, err error) {
	var errs []error
	for _, g := range l.syncedGroups() {
		res, err := l.runCycle(ctx, g, TriggerAdmin)
		errs = append(errs, err)
		pushed, fetched = pushed+res.Pushed, fetched+res.Fetched
	}
	if err := errors.Join(errs...); err != nil {
		return pushed, fetched, fmt.Errorf("%w: %w", ratelimits.ErrSourceUnavailable, err)
	}
	return pushed, fetched, nil
}

// Close stops the sync loops and pushes every unpushed hit, trying again
// every Options.ShutdownRetry until ctx ends (at least once per group).
// Decisions still work after Close, counting here only. Close returns the
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
			errs = append(errs, l.finalPush(ctx, g))
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

// pending counts g's keys with unpushed hits or box expiries.
func (g *group) pending(l *Layer) int {
	now := l.opts.Clock.Now().UnixNano()
	n := 0
	for _, t := range g.tableList() {
		n += t.pending(now)
	}
	for i := range g.shards {
		n += g.shards[i].pending(bucket.Millis(now))
	}
	return n
}

// Pending returns how many keys of limits above 0 hold hits or expiries
// not pushed yet (it visits every one).
func (l *Layer) Pending() int {
	n := 0
	for _, g := range l.syncedGroups() {
		n += g.pending(l)
	}
	return n
}

// Counters returns how many window and rate counters the layer holds.
func (l *Layer) Counters() int {
	n := 0
	l.each(func(sh *shard) { n += len(sh.counters) }, func(t *table) { n += t.counters.Len() })
	return n
}

// Boxes returns how many penalty box entries the layer holds.
func (l *Layer) Boxes() int {
	n := 0
	l.each(func(*shard) {}, func(t *table) { n += t.boxes.Len() })
	return n
}

// Evictions returns how many counters and box entries were evicted to
// stay within the bounds, and how many counters lost hits doing so (below
// 0 while counting, above 0 with the orphans full).
func (l *Layer) Evictions() (evicted, lost uint64) {
	l.each(func(sh *shard) { evicted, lost = evicted+sh.evictions, lost+sh.lost },
		func(t *table) { evicted, lost = evicted+t.evictions, lost+t.lost })
	return evicted, lost
}

// each calls onShard and onTable with every shard and table, locked.
func (l *Layer) each(onShard func(*shard), onTable func(*table)) {
	for _, g := range l.allGroups() {
		for i := range g.shards {
			sh := &g.shards[i]
			sh.mu.Lock()
			onShard(sh)
			sh.mu.Unlock()
		}
		for _, t := range g.tableList() {
			t.mu.Lock()
			onTable(t)
			t.mu.Unlock()
		}
	}
}
