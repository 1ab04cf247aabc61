package local

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/limiter-dev/limiter/ratelimits"
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
// the table of its rate counter, and the table of its box entry (nil when
// the op has no box).
type opRef struct {
	sh     *shard
	rt, bt *table
}

// lockAll sorts order, drops the locks it names twice and takes them. It
// returns what unlock takes.
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

// unlock releases what lockAll took, in reverse order.
func unlock(order []lockRef) {
	for i := len(order) - 1; i >= 0; i-- {
		order[i].mu.Unlock()
	}
}

// tableLock is the lockRef of t in g.
func tableLock(g *group, t *table) lockRef {
	return lockRef{group: g.id, kind: kindTable, index: t.id, mu: &t.mu}
}

// lockBatch finds where every op's state lives (appended to refs, in op
// order) and takes the locks of all of them (appended to order, which
// unlock takes). The slices are passed in and returned so that a small
// batch's stay on its caller's stack.
func (l *Layer) lockBatch(ops []ratelimits.LocalOp, refs []opRef, order []lockRef) ([]opRef, []lockRef) {
	for i := range ops {
		op := &ops[i].Op
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

// fetch reports whether a counter or box entry of a limit above 0 (synced)
// must have its totals read by a cycle before it may be forgotten: not
// when the source offers no sync of rate counters and boxes.
func (l *Layer) fetch(synced bool) bool { return synced && l.rates != nil }

// unpin releases the counters and box entries of ops that spend or commit
// pinned, with their tables locked.
func unpin(ops []ratelimits.LocalOp, refs []opRef) {
	for i := range ops {
		op := &ops[i].Op
		if refs[i].rt != nil {
			if r := refs[i].rt.rate(op.Key); r != nil {
				r.pinned = false
			}
		}
		if refs[i].bt != nil {
			if b := refs[i].bt.box(op.Box); b != nil {
				b.pinned = false
			}
		}
	}
}

// Decide implements ratelimits.Local.
func (l *Layer) Decide(now int64, ops []ratelimits.LocalOp, outcomes []bucket.Outcome) bool {
	return l.spend(now, ops, outcomes, false)
}

// Spend implements ratelimits.Local.
func (l *Layer) Spend(now int64, ops []ratelimits.LocalOp, outcomes []bucket.Outcome) bool {
	return l.spend(now, ops, outcomes, true)
}

// spend decides ops under their locks and, when write is set, writes what
// the outcomes ask for under the same locks: the costs of an allowed
// batch, and, allowed or not, rate-counter hits and box entries
// (bucket.SpendBatch).
//
// A counter or box entry of a limit above 0 is made by its first read, so
// that the next cycle reads its totals; below 0, only by a write.
func (l *Layer) spend(now int64, ops []ratelimits.LocalOp, outcomes []bucket.Outcome, write bool) bool {
	var refsBuf [smallBatch]opRef
	var orderBuf [2 * smallBatch]lockRef
	var statesBuf [smallBatch]bucket.State
	var opsBuf [smallBatch]bucket.Op
	states, bops := statesBuf[:0], opsBuf[:0]
	if len(ops) > smallBatch {
		states, bops = make([]bucket.State, 0, len(ops)), make([]bucket.Op, 0, len(ops))
	}
	refs, order := l.lockBatch(ops, refsBuf[:0], orderBuf[:0])
	defer unlock(order)
	defer unpin(ops, refs)
	nowMs := msOf(now)
	for i := range ops {
		op := &ops[i].Op
		synced := ops[i].SyncRate > 0
		var st bucket.State
		if op.Algorithm == bucket.RateCounter {
			if r := refs[i].rt.rateOf(op.Key, now, op.Capacity, synced, synced, l.fetch(synced)); r != nil {
				r.pinned = true
				st.Rate = r.view()
			}
		} else {
			sh := refs[i].sh
			c := sh.counters[op.Key]
			if c == nil && synced {
				// Held from now on, so the next cycle reads its totals.
				c = sh.insert(l, op.Key, op.Window.Period, nowMs, ops, ops[i].SyncRate)
			}
			st.Window = c.state(nowMs, op.Window.Period)
		}
		if op.Box != "" {
			if b := refs[i].bt.boxOf(op.Box, now, op.Capacity, synced, synced, l.fetch(synced)); b != nil {
				b.pinned = true
				st.BoxExpires = b.expires()
			}
		}
		states = append(states, st)
		bops = append(bops, *op)
	}
	allowed := bucket.SpendBatch(now, bops, states, outcomes)
	if write {
		l.commit(now, ops, outcomes, refs)
	}
	return allowed
}

// Commit implements ratelimits.Local.
func (l *Layer) Commit(now int64, ops []ratelimits.LocalOp, outcomes []bucket.Outcome) {
	var refsBuf [smallBatch]opRef
	var orderBuf [2 * smallBatch]lockRef
	refs, order := l.lockBatch(ops, refsBuf[:0], orderBuf[:0])
	defer unlock(order)
	defer unpin(ops, refs)
	l.commit(now, ops, outcomes, refs)
}

// commit writes what the outcomes ask for, with the locks held: an op's
// cost added to its counter's unpushed hits (Write), and its box entry
// boxed until the outcome's expiry at least (WriteBox: automatic boxing
// never shortens, also when another batch boxed the id since Decide).
func (l *Layer) commit(now int64, ops []ratelimits.LocalOp, outcomes []bucket.Outcome, refs []opRef) {
	nowMs, s := msOf(now), ratecounter.Second(now)
	for i := range ops {
		op := &ops[i].Op
		synced := ops[i].SyncRate > 0
		if outcomes[i].Write {
			if op.Algorithm == bucket.RateCounter {
				t := refs[i].rt
				r := t.rateOf(op.Key, now, op.Capacity, true, synced, l.fetch(synced))
				r.pinned = true
				r.add(s, op.Cost)
				t.touch(r)
			} else {
				sh := refs[i].sh
				c := sh.counters[op.Key]
				if c == nil || c.period != op.Window.Period {
					c = sh.insert(l, op.Key, op.Window.Period, nowMs, ops, ops[i].SyncRate)
				}
				c.pending = add(c.pending, nowMs, c.period, op.Cost)
			}
		}
		if outcomes[i].WriteBox {
			t := refs[i].bt
			b := t.boxOf(op.Box, now, op.Capacity, true, synced, l.fetch(synced))
			b.pinned = true
			t.setBox(b, outcomes[i].New.BoxExpires)
		}
	}
}

// Refund implements ratelimits.Local: each op gives back at most the hits
// its counter has not pushed (bucket.RefundBatch rules otherwise: check-only
// ops give back nothing, a refund never creates a counter, and an id in its
// box answers boxed).
func (l *Layer) Refund(now int64, ops []ratelimits.LocalOp, outcomes []bucket.Outcome) {
	var refsBuf [smallBatch]opRef
	var orderBuf [2 * smallBatch]lockRef
	refs, order := l.lockBatch(ops, refsBuf[:0], orderBuf[:0])
	defer unlock(order)
	nowMs, s := msOf(now), ratecounter.Second(now)
	for i := range ops {
		op := ops[i].Op
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
		// The refund's arithmetic, on what a decision reads, for what is
		// actually given back.
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

// Reset implements ratelimits.Local: the ops' counters and box entries are
// forgotten here once source succeeded.
func (l *Layer) Reset(ctx context.Context, now int64, ops []ratelimits.LocalOp, source func(context.Context) (int, error)) (int, error) {
	// No cycle of these groups runs while the source resets: a push in
	// flight could otherwise land after the reset and bring hits back.
	var synced []*group
	for i := range ops {
		if g := l.groupOf(ops[i].SyncRate); g.rate > 0 && !slices.Contains(synced, g) {
			synced = append(synced, g)
		}
	}
	slices.SortFunc(synced, func(a, b *group) int { return a.id - b.id })
	locked := 0
	defer func() {
		for i := locked - 1; i >= 0; i-- {
			synced[i].unlock()
		}
	}()
	for _, g := range synced {
		if err := g.lock(ctx); err != nil {
			return 0, err
		}
		locked++
	}
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

// forget deletes what op holds here, with its locks held, and reports
// whether the source could not have counted it: below 0, whether it still
// counted something; above 0, whether this process's own unpushed hits or
// box entry still counted while what it had read from the source did not.
func (l *Layer) forget(now int64, lop *ratelimits.LocalOp, ref opRef) bool {
	op := &lop.Op
	nowMs, s := msOf(now), ratecounter.Second(now)
	// mine is what this process counted alone, read what it read from
	// the source (above 0); below 0 mine is everything.
	var mine, read bucket.State
	found := false
	if op.Algorithm == bucket.RateCounter {
		if r := ref.rt.rate(op.Key); r != nil {
			found = true
			mine.Rate = r.pending
			if lop.SyncRate > 0 && r.readUntil > s {
				read.Rate = r.total // holds hits the source counted
			}
			ref.rt.removeRate(r)
		}
		delete(ref.rt.orphans, op.Key)
	} else {
		sh := ref.sh
		if c := sh.counters[op.Key]; c != nil {
			found = true
			if c.period == op.Window.Period {
				mine.Window = at(c.pending, nowMs, c.period)
				read.Window = at(c.synced, nowMs, c.period)
			}
			delete(sh.counters, op.Key)
		}
		delete(sh.orphans, op.Key)
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
	if lop.SyncRate < 0 {
		return bucket.Busy(now, op, mine)
	}
	return bucket.Busy(now, op, mine) && !bucket.Busy(now, op, read)
}
