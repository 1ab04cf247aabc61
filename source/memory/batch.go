package memory

import (
	"hash/maphash"
	"slices"
	"sync"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// action is what a batch does to its entries.
type action int

const (
	spend action = iota
	refund
)

// decide computes a batch's outcomes from the states it read.
func (a action) decide(now int64, ops []bucket.Op, states []bucket.State, outcomes []bucket.Outcome) {
	if a == refund {
		bucket.RefundBatch(now, ops, states, outcomes)
	} else {
		bucket.SpendBatch(now, ops, states, outcomes)
	}
}

// apply decides and writes one batch under the locks of all its shards
// and groups, and reports whether a write evicted an entry (a GCRA bucket
// or window counter) that had not expired.
func (s *Source) apply(now int64, ops []bucket.Op, outcomes []bucket.Outcome, act action) (evictedNotFull bool) {
	if len(ops) == 1 && ops[0].Algorithm != bucket.RateCounter && ops[0].Algorithm != bucket.Concurrency && ops[0].Box == "" {
		return s.applyOne(now, ops, outcomes, act)
	}
	evictedNotFull, _, _, _ = s.applyBatch(now, ops, outcomes, act, false)
	return evictedNotFull
}

// applyOne is apply for a batch of one GCRA or window op without a box:
// one lock, nothing sorted, and nothing pinned (the one entry it may
// insert is not in the table yet).
func (s *Source) applyOne(now int64, ops []bucket.Op, outcomes []bucket.Outcome, act action) bool {
	switch {
	case ops[0].Algorithm.Windowed():
		return s.applyOneWindow(now, ops, outcomes, act)
	case ops[0].Algorithm == bucket.Calendar:
		return s.applyOneCalendar(now, ops, outcomes, act)
	}
	key := ops[0].Key
	h := s.hash(key)
	sh := s.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	pos, tat := sh.entries.GetTAT(key, h, now)
	states := [1]bucket.State{{TAT: tat}}
	// act.decide written out: a call through it is not inlined, and this
	// is every single-key spend.
	if act == refund {
		bucket.RefundBatch(now, ops, states[:], outcomes)
	} else {
		bucket.SpendBatch(now, ops, states[:], outcomes)
	}
	return outcomes[0].Write && sh.entries.PutTAT(key, h, pos, outcomes[0].New.TAT, now, false)
}

// applyOneWindow is applyOne for a window op. It is a function of its own
// so that the GCRA path, the most common, has no window code in it.
func (s *Source) applyOneWindow(now int64, ops []bucket.Op, outcomes []bucket.Outcome, act action) bool {
	key := ops[0].Key
	h := s.hash(key)
	sh := s.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	pos, c := sh.entries.GetWindow(key, h, now)
	states := [1]bucket.State{{TAT: gcra.Missing, Window: c}}
	if act == refund {
		bucket.RefundBatch(now, ops, states[:], outcomes)
	} else {
		bucket.SpendBatch(now, ops, states[:], outcomes)
	}
	return outcomes[0].Write && sh.entries.PutWindow(key, h, pos, &outcomes[0].New.Window, now, false)
}

// applyOneCalendar is applyOne for a calendar op, whose counter lives in
// the table of window counters.
func (s *Source) applyOneCalendar(now int64, ops []bucket.Op, outcomes []bucket.Outcome, act action) bool {
	key := periodKey(now, &ops[0])
	h := s.hash(ops[0].Key)
	sh := s.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	pos, c := sh.entries.GetCalendar(key, h, now)
	states := [1]bucket.State{{TAT: gcra.Missing, Calendar: c}}
	if act == refund {
		bucket.RefundBatch(now, ops, states[:], outcomes)
	} else {
		bucket.SpendBatch(now, ops, states[:], outcomes)
	}
	return outcomes[0].Write && sh.entries.PutCalendar(key, h, pos, &outcomes[0].New.Calendar, now, false)
}

// scratch holds the rate counters a batch reads, as the bucket package
// reads them (the tables keep them compactly): a pool of them keeps
// batches of rate-counter ops from allocating.
var scratch = sync.Pool{New: func() any { return new([smallBatch]ratecounter.Counter) }}

// applyBatch is apply for any batch. With pack it also returns the states
// it read, packed for an idempotency record (packStates), and the leases
// of its concurrency ops (nil when it has none).
func (s *Source) applyBatch(now int64, ops []bucket.Op, outcomes []bucket.Outcome, act action, pack bool) (evictedNotFull bool, words []int64, windowed bool, leased *leaseRecord) {
	var refsBuf [smallBatch]opRef
	var shardsBuf [smallBatch]uint32
	var groupsBuf [2 * smallBatch]*group
	refs, held := s.lockBatch(ops, refsBuf[:0], shardsBuf[:0], groupsBuf[:0])
	defer s.unlockBatch(held)
	var statesBuf [smallBatch]bucket.State
	states := statesBuf[:0]
	if len(ops) > smallBatch {
		states = make([]bucket.State, 0, len(ops))
	}
	var rates []ratecounter.Counter
	if held.rateOps > smallBatch {
		rates = make([]ratecounter.Counter, held.rateOps)
	} else if held.rateOps > 0 {
		buf := scratch.Get().(*[smallBatch]ratecounter.Counter)
		defer scratch.Put(buf)
		rates = buf[:held.rateOps]
	}
	sec := ratecounter.Second(now)
	// Every GCRA bucket and window counter of the batch is pinned until
	// the batch is written, so that making room for one of its new
	// entries never evicts another.
	for i := range ops {
		op, r := &ops[i], &refs[i]
		st := bucket.State{TAT: gcra.Missing}
		switch {
		case op.Algorithm == bucket.RateCounter:
			c := &rates[0]
			rates = rates[1:]
			r.group.rates.Get(op.Key, r.h, sec, c)
			st.Rate = c
		case op.Algorithm == bucket.Concurrency:
			entries := &s.shardOf(r.h).entries
			leases := entries.GetLeases(op.Key, now)
			entries.PinLeases(op.Key, true)
			if pack {
				leased = leased.add(i, len(ops), op, leases)
			}
			st.Leases = &leases
		case op.Algorithm.Windowed():
			entries := &s.shardOf(r.h).entries
			var pos int
			pos, st.Window = entries.GetWindow(op.Key, r.h, now)
			entries.Pin(true, pos)
		case op.Algorithm == bucket.Calendar:
			entries := &s.shardOf(r.h).entries
			r.key = periodKey(now, op)
			var pos int
			pos, st.Calendar = entries.GetCalendar(r.key, r.h, now)
			entries.Pin(true, pos)
		default:
			entries := &s.shardOf(r.h).entries
			var pos int
			pos, st.TAT = entries.GetTAT(op.Key, r.h, now)
			entries.Pin(false, pos)
		}
		if op.Box != "" {
			st.BoxExpires = r.boxGroup.boxes.Get(op.Box, r.boxH, now)
		}
		states = append(states, st)
	}
	act.decide(now, ops, states, outcomes)
	for i := range ops {
		op, r, o := &ops[i], &refs[i], &outcomes[i]
		switch {
		case !o.Write:
		case op.Algorithm == bucket.RateCounter:
			// The hits go to the counter as read: the group's lock is
			// still held, so that is the stored one.
			c := states[i].Rate
			if op.Mode != bucket.CheckOnly {
				if act == refund {
					c.Remove(sec, op.Cost)
				} else {
					c.Add(sec, op.Cost)
				}
			}
			r.group.rates.Put(op.Key, r.h, c, sec, capacityOr(op.Capacity), act == spend)
		case op.Algorithm == bucket.Concurrency:
			lost := s.shardOf(r.h).entries.PutLeases(op.Key, bucket.LeasesOf(o.New), now, true)
			evictedNotFull = evictedNotFull || lost
		default:
			// Found again by key: a read above that dropped an expired
			// entry, or an eviction, may have moved others of the same
			// shard.
			entries := &s.shardOf(r.h).entries
			var lost bool
			switch {
			case op.Algorithm.Windowed():
				lost = entries.PutWindow(op.Key, r.h, entries.FindWindow(op.Key, r.h), &o.New.Window, now, true)
			case op.Algorithm == bucket.Calendar:
				lost = entries.PutCalendar(r.key, r.h, entries.FindWindow(r.key, r.h), &o.New.Calendar, now, true)
			default:
				lost = entries.PutTAT(op.Key, r.h, entries.FindTAT(op.Key, r.h), o.New.TAT, now, true)
			}
			evictedNotFull = evictedNotFull || lost
		}
		if o.WriteBox && op.Box != "" {
			r.boxGroup.boxes.Put(op.Box, r.boxH, o.New.BoxExpires, now, capacityOr(op.Capacity))
		}
	}
	for i := range ops {
		op, h := &ops[i], refs[i].h
		if op.Algorithm == bucket.RateCounter {
			continue
		}
		entries := &s.shardOf(h).entries
		switch {
		case op.Algorithm == bucket.Concurrency:
			entries.PinLeases(op.Key, false)
		case op.Algorithm == bucket.Calendar:
			entries.Unpin(true, entries.FindWindow(refs[i].key, h))
		case op.Algorithm.Counted():
			entries.Unpin(true, entries.FindWindow(op.Key, h))
		default:
			entries.Unpin(false, entries.FindTAT(op.Key, h))
		}
	}
	if pack {
		words, windowed = packStates(ops, states)
	}
	return evictedNotFull, words, windowed, leased
}

// opRef is where one op of a batch lives: its key's hash, and the group
// of its rate counter (a rate-counter op) and of its box entry (an op with
// a box), with its hash.
type opRef struct {
	h, boxH         uint64
	group, boxGroup *group
	// key is where a calendar op's counter is stored (periodKey), under
	// the hash h of its bucket key.
	key string
}

// heldLocks are the locks a batch holds, and how many of its ops are
// rate-counter ops.
type heldLocks struct {
	shards  []uint32
	groups  []*group
	rateOps int
}

// lockBatch hashes the keys of ops into refs, and locks the shards of
// their GCRA buckets and window counters in ascending order, then the
// groups of their rate counters and box entries in ascending order: the
// one lock order every call follows (after an idempotency record's
// stripe), so that no two calls can deadlock. The buffers only save
// allocations.
func (s *Source) lockBatch(ops []bucket.Op, refs []opRef, shards []uint32, groups []*group) ([]opRef, heldLocks) {
	var held heldLocks
	for i := range ops {
		op := &ops[i]
		r := opRef{h: s.hash(op.Key)}
		if op.Algorithm == bucket.RateCounter {
			r.group = s.groups.of(op.Key)
			groups = append(groups, r.group)
			held.rateOps++
		} else {
			shards = append(shards, uint32(r.h&s.mask))
		}
		if op.Box != "" {
			r.boxH = r.h
			if op.Box != op.Key {
				r.boxH = s.hash(op.Box)
			}
			r.boxGroup = s.groups.of(op.Box)
			groups = append(groups, r.boxGroup)
		}
		refs = append(refs, r)
	}
	slices.Sort(shards)
	held.shards = slices.Compact(shards)
	s.lock(held.shards)
	held.groups = lockGroups(groups)
	return refs, held
}

// unlockBatch releases what lockBatch locked.
func (s *Source) unlockBatch(held heldLocks) {
	unlockGroups(held.groups)
	s.unlock(held.shards)
}

// hash is a key's hash: its low bits choose the shard, its high bits the
// place in the shard's table.
func (s *Source) hash(key string) uint64 {
	return maphash.String(s.seed, key)
}

func (s *Source) shardOf(h uint64) *shard {
	return &s.shards[h&s.mask]
}

func (s *Source) lock(idx []uint32) {
	for _, i := range idx {
		s.shards[i].mu.Lock()
	}
}

func (s *Source) unlock(idx []uint32) {
	for j := len(idx) - 1; j >= 0; j-- {
		s.shards[idx[j]].mu.Unlock()
	}
}
