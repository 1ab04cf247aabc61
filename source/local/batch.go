package local

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// lockRef is one lock a batch or a call takes. They are all taken in one
// order (group id, then a group's window shards before its tables, then
// index), so two batches never deadlock; a cycle holds one at a time.
type lockRef struct {
	group, kind, index int
	mu                 *sync.Mutex
}

// The kinds of lock, in the order they are taken within a group.
const (
	kindShard = iota
	kindTable
)

// opRef is where one op's state lives: the shard of its window counter or
// the table of its rate counter, and the table of its box entry, if any.
type opRef struct {
	sh     *shard
	rt, bt *table
}

func lockAll(order []lockRef) []lockRef {
	slices.SortFunc(order, func(a, b lockRef) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.kind, b.kind), cmp.Compare(a.index, b.index))
	})
	order = slices.CompactFunc(order, func(a, b lockRef) bool { return a.mu == b.mu })
	for _, r := range order {
		r.mu.Lock()
	}
	return order
}

func unlock(order []lockRef) {
	for i := len(order) - 1; i >= 0; i-- {
		order[i].mu.Unlock()
	}
}

func tableLock(g *group, t *table) lockRef {
	return lockRef{group: g.id, kind: kindTable, index: t.id, mu: &t.mu}
}

// lockBatch finds where every op's state lives and takes all their locks.
// The slices are passed in and returned so that a small batch's stay on
// its caller's stack.
func (l *Layer) lockBatch(ops []bucket.Op, refs []opRef, order []lockRef) ([]opRef, []lockRef) {
	for i := range ops {
		op := &ops[i]
		g := l.groupOf(ops[i].SyncRate)
		var r opRef
		if op.Algorithm == bucket.RateCounter {
			r.rt = g.tableOf(op.Key)
			order = append(order, tableLock(g, r.rt))
		} else {
			idx := g.shardIndex(l, op.Key)
			r.sh = &g.shards[idx]
			order = append(order, lockRef{group: g.id, kind: kindShard, index: idx, mu: &r.sh.mu})
		}
		if op.Box != "" {
			r.bt = g.tableOf(op.Box)
			order = append(order, tableLock(g, r.bt))
		}
		refs = append(refs, r)
	}
	return refs, lockAll(order)
}

func unpin(ops []bucket.Op, refs []opRef) {
	for i := range ops {
		if refs[i].rt != nil {
			if r := refs[i].rt.rate(ops[i].Key); r != nil {
				r.pinned = false
			}
		}
		if refs[i].bt != nil {
			if b := refs[i].bt.box(ops[i].Box); b != nil {
				b.pinned = false
			}
		}
	}
}

// decide decides ops, all counted here, as one batch (bucket.SpendBatch)
// and writes nothing; outcomes say which ops commit must write.
func (l *Layer) decide(now int64, ops []bucket.Op, outcomes []bucket.Outcome) bool {
	return l.batch(now, ops, outcomes, true, false)
}

// spend is decide and commit in one atomic step. As bucket.SpendBatch
// says, a denied batch still writes its rate-counter hits and box entries.
func (l *Layer) spend(now int64, ops []bucket.Op, outcomes []bucket.Outcome) bool {
	return l.batch(now, ops, outcomes, true, true)
}

// commit adds the cost of every op whose outcome says Write, and boxes the
// id of every op whose outcome says WriteBox until New.BoxExpires at
// least: an add, never a replacement by the state decide saw, so that
// other batches' hits and boxings since stay. The caller clears the Write
// of window ops whose batch the inner source denied.
func (l *Layer) commit(now int64, ops []bucket.Op, outcomes []bucket.Outcome) {
	l.batch(now, ops, outcomes, false, true)
}

func (l *Layer) batch(now int64, ops []bucket.Op, outcomes []bucket.Outcome, decide, write bool) bool {
	var refsBuf [smallBatch]opRef
	var orderBuf [2 * smallBatch]lockRef
	refs, order := l.lockBatch(ops, refsBuf[:0], orderBuf[:0])
	defer unlock(order)
	defer unpin(ops, refs)
	allowed := decide && l.decideLocked(now, ops, outcomes, refs)
	if write {
		l.commitLocked(now, ops, outcomes, refs)
	}
	return allowed
}

// decideLocked decides ops with their locks held (bucket.SpendBatch). A counter
// or box entry of a limit above 0 is made by its first read, so that the
// next cycle reads its totals; below 0, only by a write.
func (l *Layer) decideLocked(now int64, ops []bucket.Op, outcomes []bucket.Outcome, refs []opRef) bool {
	var statesBuf [smallBatch]bucket.State
	var opsBuf [smallBatch]bucket.Op
	states, bops := statesBuf[:0], opsBuf[:0]
	if len(ops) > smallBatch {
		states, bops = make([]bucket.State, 0, len(ops)), make([]bucket.Op, 0, len(ops))
	}
	nowMs := bucket.Millis(now)
	for i := range ops {
		op := &ops[i]
		synced := ops[i].SyncRate > 0
		var st bucket.State
		if op.Algorithm == bucket.RateCounter {
			if r := l.rateOf(refs[i].rt, op.Key, now, op.Capacity, ops[i].SyncRate, synced); r != nil {
				st.Rate = r.view()
			}
		} else {
			sh := refs[i].sh
			c := sh.counters[op.Key]
			if c == nil && synced {
				c = sh.insert(op.Key, op.Window.Period, nowMs, ops, ops[i].SyncRate)
			}
			st.Window = c.state(nowMs, op.Window.Period)
		}
		if op.Box != "" {
			if b := l.boxOf(refs[i].bt, op.Box, now, op.Capacity, ops[i].SyncRate, synced); b != nil {
				st.BoxExpires = b.expires()
			}
		}
		states = append(states, st)
		bops = append(bops, *op)
	}
	return bucket.SpendBatch(now, bops, states, outcomes)
}

// commitLocked writes what the outcomes ask for, with the locks held, as adds:
// another batch may have written since Decide.
func (l *Layer) commitLocked(now int64, ops []bucket.Op, outcomes []bucket.Outcome, refs []opRef) {
	nowMs, s := bucket.Millis(now), ratecounter.Second(now)
	for i := range ops {
		op := &ops[i]
		if outcomes[i].Write {
			if op.Algorithm == bucket.RateCounter {
				r := l.rateOf(refs[i].rt, op.Key, now, op.Capacity, ops[i].SyncRate, true)
				r.add(s, op.Cost)
				refs[i].rt.touch(r)
			} else {
				sh := refs[i].sh
				c := sh.counters[op.Key]
				if c == nil || c.period != op.Window.Period {
					c = sh.insert(op.Key, op.Window.Period, nowMs, ops, ops[i].SyncRate)
				}
				c.pending = add(c.pending, nowMs, c.period, op.Cost)
			}
		}
		if outcomes[i].WriteBox {
			b := l.boxOf(refs[i].bt, op.Box, now, op.Capacity, ops[i].SyncRate, true)
			refs[i].bt.setBox(b, outcomes[i].New.BoxExpires)
		}
	}
}

// sharedRefund gives back, on the shared source, the ops it is handed:
// parts of refunds of limits above 0, each with the cost the source is to
// give back. It is called once per refund, with no ops when the source
// has nothing to give back, so that the caller's own ops on the source
// can go in the same call (Front.Refund).
type sharedRefund func(ctx context.Context, ops []bucket.Op) error

// refund gives each op's cost back by bucket.RefundBatch's rules, applied
// to the counter as this process sees it (the totals read, the hits in
// flight and those not pushed): first from the hits this process has not
// pushed; for a limit above 0, when source is not nil, the rest comes off
// the totals on the source (source is given those ops, with that cost),
// and then off the totals read here, so that the refund shows here at
// once, as it does on the source. The source's part is given back while
// no cycle of the ops' groups runs: a push in flight would otherwise land
// after it, and the next read would not be what it gave back. A failed
// source call makes the refund fail, with nothing changed here.
func (l *Layer) refund(ctx context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome, source sharedRefund) error {
	var mineBuf, sharedBuf [smallBatch]int64
	mine, shared := mineBuf[:], sharedBuf[:]
	if len(ops) > smallBatch {
		mine, shared = make([]int64, len(ops)), make([]int64, len(ops))
	}
	mine, shared = mine[:len(ops)], shared[:len(ops)]
	if source == nil {
		shared = nil // nothing is given back on the source
	}
	// Most refunds are covered by the hits not pushed: one locked step
	// then, without waiting for a cycle.
	if !l.refundHere(now, ops, outcomes, mine, shared, false) {
		// The wait and the source's call together are bounded.
		var cancel context.CancelFunc
		ctx, cancel = l.bounded(ctx)
		defer cancel()
		groups := l.syncedGroupsOf(ops)
		if err := lockGroups(ctx, groups); err != nil {
			return err
		}
		defer unlockGroups(groups)
		l.refundHere(now, ops, outcomes, mine, shared, true)
	}
	if source == nil {
		return nil
	}
	var atSource []bucket.Op
	for i := range ops {
		if shared[i] > 0 {
			op := ops[i]
			op.Cost = shared[i]
			if op.Algorithm != bucket.RateCounter {
				// A window's synced counter is stored under its key
				// alone, whatever its box (SyncWindows).
				op.Box = ""
			}
			atSource = append(atSource, op)
		}
	}
	if err := source(ctx, atSource); err != nil {
		l.settleRefund(now, ops, mine, shared)
		return err
	}
	return nil
}

// syncedGroupsOf returns the groups above 0 of ops, in the order of their
// ids.
func (l *Layer) syncedGroupsOf(ops []bucket.Op) []*group {
	var gs []*group
	for i := range ops {
		if g := l.groupOf(ops[i].SyncRate); g.rate > 0 && !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	slices.SortFunc(gs, func(a, b *group) int { return a.id - b.id })
	return gs
}

// refundHere decides ops' refunds under their locks and takes each op's
// part off the hits not pushed (mine[i]) and, for a limit above 0 when
// shared is not nil, the rest off the totals read (shared[i]), which the
// source is then to give back. Only while the ops' groups hold their
// cycle locks (cycles) may it take a part off the totals: without them,
// when an op needs one, it puts back what it took and reports false.
func (l *Layer) refundHere(now int64, ops []bucket.Op, outcomes []bucket.Outcome, mine, shared []int64, cycles bool) bool {
	var refsBuf [smallBatch]opRef
	var orderBuf [2 * smallBatch]lockRef
	refs, order := l.lockBatch(ops, refsBuf[:0], orderBuf[:0])
	defer unlock(order)
	nowMs, s := bucket.Millis(now), ratecounter.Second(now)
	for i := range ops {
		op := ops[i]
		var st bucket.State
		var cur, own int64 // the current window's (second's) hits as seen here, and those not pushed
		var r *rate
		var c *counter
		if op.Algorithm == bucket.RateCounter {
			r = refs[i].rt.rate(op.Key)
			st.Rate = r.view()
			if st.Rate != nil {
				cur = st.Rate.At(s)
			}
			if r != nil && r.pending != nil {
				own = r.pending.At(s)
			}
		} else {
			c = refs[i].sh.counters[op.Key]
			st.Window = c.state(nowMs, op.Window.Period)
			cur = st.Window.Cur
			if c != nil && c.period == op.Window.Period {
				own = at(c.pending, nowMs, c.period).Cur
			}
		}
		if op.Box != "" {
			if b := refs[i].bt.box(op.Box); b != nil {
				st.BoxExpires = b.expires()
			}
		}
		given := min(op.Cost, cur)
		if op.Mode == bucket.CheckOnly {
			given = 0
		}
		mine[i] = min(given, own)
		if shared != nil && op.SyncRate > 0 {
			shared[i] = given - mine[i]
			if shared[i] > 0 && !cycles {
				shared[i] = 0
				for j := range i {
					putBack(refs[j], &ops[j], nowMs, s, mine[j], 0)
				}
				return false
			}
		} else {
			given = mine[i]
		}
		// The refund's arithmetic, for what is actually given back.
		op.Cost, op.Mode = given, bucket.CheckAndSpend
		one, states := [1]bucket.Op{op}, [1]bucket.State{st}
		bucket.RefundBatch(now, one[:], states[:], outcomes[i:i+1])
		if given == 0 {
			continue
		}
		// Taken at once, so that a later op of the batch on the same
		// counter sees it. With no cycle running, the totals read are what
		// the counter holds beyond the hits not pushed.
		if r != nil {
			r.remove(s, mine[i])
			if shared != nil && shared[i] > 0 {
				r.total.Remove(s, shared[i])
			}
		} else {
			c.pending = at(c.pending, nowMs, c.period)
			c.pending.Cur -= mine[i]
			if shared != nil && shared[i] > 0 {
				c.synced = at(c.synced, nowMs, c.period)
				c.synced.Cur -= shared[i]
			}
		}
	}
	return true
}

// settleRefund puts back, when the source's call failed, what refundHere
// took: the hits not pushed as a failed push puts its hits back (with
// their counter, or as its key's orphan), and the totals read on the
// counter if it is still held (a cycle reads them again otherwise).
func (l *Layer) settleRefund(now int64, ops []bucket.Op, mine, shared []int64) {
	var refsBuf [smallBatch]opRef
	var orderBuf [2 * smallBatch]lockRef
	refs, order := l.lockBatch(ops, refsBuf[:0], orderBuf[:0])
	defer unlock(order)
	nowMs, s := bucket.Millis(now), ratecounter.Second(now)
	for i := range ops {
		putBack(refs[i], &ops[i], nowMs, s, mine[i], shared[i])
	}
}

// putBack counts again, with op's locks held, mine of its hits not pushed
// and shared of its totals read, which a refund had taken.
func putBack(ref opRef, op *bucket.Op, nowMs, s, mine, shared int64) {
	if op.Algorithm == bucket.RateCounter {
		if mine > 0 {
			var hits ratecounter.Counter
			hits.Add(s, mine)
			ref.rt.keepRate(op.Key, &hits, nil, s)
		}
		if r := ref.rt.rate(op.Key); shared > 0 && r != nil && r.synced {
			r.total = addTo(r.total, s, shared)
		}
		return
	}
	if mine > 0 && !ref.sh.keep(op.Key, add(window.Counter{}, nowMs, op.Window.Period, mine), nowMs) {
		ref.sh.lost++
	}
	if c := ref.sh.counters[op.Key]; shared > 0 && c != nil && c.period == op.Window.Period {
		c.synced = add(c.synced, nowMs, c.period, shared)
	}
}

// reset calls source, which resets the inner source's part, while no
// cycle of ops' groups runs (a push in flight could otherwise land after
// the reset and bring hits back), and then, when it succeeded, forgets
// ops' counters and box entries here. It returns source's count plus the
// ops that still counted something the source could not know of.
func (l *Layer) reset(ctx context.Context, now int64, ops []bucket.Op, source func(context.Context) (int, error)) (int, error) {
	ctx, cancel := l.bounded(ctx)
	defer cancel()
	synced := l.syncedGroupsOf(ops)
	if err := lockGroups(ctx, synced); err != nil {
		return 0, err
	}
	defer unlockGroups(synced)
	n, err := source(ctx)
	if err != nil && !errors.Is(err, errPartlyApplied) {
		// Nothing changed, or maybe nothing did: what this process holds
		// stays, and is pushed. At worst the hits of a reset that did
		// apply come back, which counts too much, never too little.
		return 0, err
	}
	// A reset that failed after a step of it took effect forgets here
	// too: what this process holds of the ops reset on the source would
	// otherwise be pushed back. A retry of the reset completes it.
	refs, order := l.lockBatch(ops, nil, nil)
	defer unlock(order)
	for i := range ops {
		if l.forget(now, &ops[i], refs[i]) {
			n++
		}
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

func unlockGroups(gs []*group) {
	for i := len(gs) - 1; i >= 0; i-- {
		gs[i].unlock()
	}
}

// forget deletes what op holds here, with its locks held, and reports
// whether the source could not have counted it: below 0, whether it still
// counted something; above 0, whether this process's own unpushed hits or
// box entry still counted while what it had read from the source did not.
func (l *Layer) forget(now int64, op *bucket.Op, ref opRef) bool {
	nowMs, s := bucket.Millis(now), ratecounter.Second(now)
	var mine, read bucket.State
	found := false
	if op.Algorithm == bucket.RateCounter {
		if r := ref.rt.rate(op.Key); r != nil {
			found = true
			mine.Rate = r.pending
			if op.SyncRate > 0 && r.readUntil > s {
				read.Rate = r.total // holds hits the source counted
			}
			ref.rt.removeRate(r)
		}
		delete(ref.rt.orphans, op.Key)
	} else {
		if c := ref.sh.counters[op.Key]; c != nil {
			found = true
			if c.period == op.Window.Period {
				mine.Window = at(c.pending, nowMs, c.period)
				read.Window = at(c.synced, nowMs, c.period)
			}
			delete(ref.sh.counters, op.Key)
		}
		delete(ref.sh.orphans, op.Key)
	}
	if op.Box != "" {
		if b := ref.bt.box(op.Box); b != nil {
			found = true
			mine.BoxExpires, read.BoxExpires = b.pending, b.read
			ref.bt.removeBox(b)
		}
		delete(ref.bt.boxOrphans, op.Box)
	}
	if !found {
		return false
	}
	if op.SyncRate < 0 {
		// Every part is this process's own: what it counted, and what a
		// counter moved here started from (Move).
		return bucket.Busy(now, op, mine) || bucket.Busy(now, op, read)
	}
	return bucket.Busy(now, op, mine) && !bucket.Busy(now, op, read)
}

// holdsBoth reports whether op, a window limit above 0 with a box, counts
// hits here and boxes its id here, at now: what a reset of its counter
// and of its box entry each find on the source, as this process last saw
// it.
func (l *Layer) holdsBoth(now int64, op *bucket.Op) bool {
	one := [1]bucket.Op{*op}
	refs, order := l.lockBatch(one[:], nil, nil)
	defer unlock(order)
	nowMs := bucket.Millis(now)
	c := refs[0].sh.counters[op.Key]
	if c == nil || c.period != op.Window.Period {
		return false
	}
	st := c.state(nowMs, c.period)
	b := refs[0].bt.box(op.Box)
	return (st.Cur > 0 || (st.Prev > 0 && op.Algorithm == bucket.SlidingWindow)) && b != nil && b.expires() > now
}
