package local

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
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

// refund gives each op's cost back (bucket.RefundBatch rules) from the
// hits its counter has not pushed: pushed hits are everyone's and stay
// counted until their window ends.
func (l *Layer) refund(now int64, ops []bucket.Op, outcomes []bucket.Outcome) {
	var refsBuf [smallBatch]opRef
	var orderBuf [2 * smallBatch]lockRef
	refs, order := l.lockBatch(ops, refsBuf[:0], orderBuf[:0])
	defer unlock(order)
	nowMs, s := bucket.Millis(now), ratecounter.Second(now)
	for i := range ops {
		op := ops[i]
		var st bucket.State
		var given int64
		var r *rate
		var c *counter
		if op.Algorithm == bucket.RateCounter {
			r = refs[i].rt.rate(op.Key)
			if r != nil && r.pending != nil && op.Mode != bucket.CheckOnly {
				given = min(op.Cost, r.pending.At(s))
			}
			st.Rate = r.view()
		} else {
			c = refs[i].sh.counters[op.Key]
			if c != nil && c.period == op.Window.Period && op.Mode != bucket.CheckOnly {
				c.pending = at(c.pending, nowMs, c.period)
				given = min(op.Cost, c.pending.Cur)
			}
			st.Window = c.state(nowMs, op.Window.Period)
		}
		if op.Box != "" {
			if b := refs[i].bt.box(op.Box); b != nil {
				st.BoxExpires = b.expires()
			}
		}
		// The refund's arithmetic, for what is actually given back.
		op.Cost, op.Mode = given, bucket.CheckAndSpend
		one, states := [1]bucket.Op{op}, [1]bucket.State{st}
		bucket.RefundBatch(now, one[:], states[:], outcomes[i:i+1])
		switch {
		case given == 0:
		case r != nil:
			r.remove(s, given)
		default:
			c.pending.Cur -= given
		}
	}
}

// reset calls source, which resets the inner source's part, while no
// cycle of ops' groups runs (a push in flight could otherwise land after
// the reset and bring hits back), and then, when it succeeded, forgets
// ops' counters and box entries here. It returns source's count plus the
// ops that still counted something the source could not know of.
func (l *Layer) reset(ctx context.Context, now int64, ops []bucket.Op, source func(context.Context) (int, error)) (int, error) {
	var synced []*group
	for i := range ops {
		if g := l.groupOf(ops[i].SyncRate); g.rate > 0 && !slices.Contains(synced, g) {
			synced = append(synced, g)
		}
	}
	slices.SortFunc(synced, func(a, b *group) int { return a.id - b.id })
	for i, g := range synced {
		if err := g.lock(ctx); err != nil {
			unlockGroups(synced[:i])
			return 0, err
		}
	}
	defer unlockGroups(synced)
	n, err := source(ctx)
	if err != nil {
		return 0, err
	}
	refs, order := l.lockBatch(ops, nil, nil)
	defer unlock(order)
	for i := range ops {
		if l.forget(now, &ops[i], refs[i]) {
			n++
		}
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
		return bucket.Busy(now, op, mine)
	}
	return bucket.Busy(now, op, mine) && !bucket.Busy(now, op, read)
}
