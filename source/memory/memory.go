// Package memory is the embedded bucket source: GCRA buckets and window
// counters in this process's memory, in shards with a lock each, bounded
// in number.
//
// A batch locks the shards of all its keys in ascending shard order (so two
// batches can never deadlock), reads every key's state, decides with the
// bucket package, writes, and unlocks: batches on the same keys behave as
// if one ran fully before the other, whatever algorithms they mix.
// Single-key batches, the common case, take one lock and allocate nothing.
//
// An entry, a GCRA bucket or a window counter, expires when it stops
// counting anything: a bucket when its TAT has passed (it is full), a
// counter when its windows with hits are no longer read
// (window.Counter.Expires). Memory stays bounded two ways. Expired entries
// are forgotten, which no answer can tell apart from keeping them. And the
// bound given to New (the service's --max-buckets) counts entries,
// buckets and counters together; each shard holds at most its share. To
// make room a shard evicts an expired entry if it finds one, else the one
// closest to expiring (of counters expiring together, the one with fewest
// hits), so that an evicted subscriber, who starts again from a full
// bucket or from windows without hits, gains the least. A flood of cheap
// spends on fresh ids thus evicts its own entries, not those of
// subscribers who spent more. Evictions of entries that had not expired,
// the ones that cost a subscriber something, are counted apart
// (EvictionsNotFull).
//
// Each shard's entries are two hash tables of the internal table package,
// one per kind, which hold no pointer, so the garbage collector never scans
// them. A stored GCRA bucket takes one 32-byte slot and a window counter
// one 56-byte slot, plus the key's bytes when it is longer than 16 bytes;
// a table is at most three quarters full and is never shrunk.
// BenchmarkMemoryPerBucket and BenchmarkMemoryPerWindowCounter measure the
// cost per entry.
package memory

import (
	"context"
	"errors"
	"hash/maphash"
	"slices"
	"sync/atomic"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
)

// DefaultMaxBuckets is the bound on entries (GCRA buckets and window
// counters together) used when none is given.
const DefaultMaxBuckets = 1_000_000

// minShards is how many shards a source splits into when its bound allows
// minPerShard entries each: enough that two cores (or a few dozen) rarely
// wait on the same lock.
const minShards = 256

// maxPerShard is the most entries a shard is meant to hold: beyond it, a
// source splits into more shards. A shard's table is doubled under its
// lock, and one of 4,096 entries (at most 8,192 slots, 256 KiB of buckets
// or 448 KiB of window counters) is rebuilt in a fraction of a
// millisecond; ten times that would stall the shard's callers for
// milliseconds.
const maxPerShard = 4096

// maxShards caps the shards (256 MiB of them) for bounds past four billion.
const maxShards = 1 << 20

// minPerShard keeps shards from being so small that per-shard eviction
// stops resembling a global one.
const minPerShard = 64

// smallBatch is the batch size handled with arrays on the stack.
const smallBatch = 8

// Source stores GCRA buckets and window counters in memory. Its zero value
// is not usable; call New.
type Source struct {
	seed   maphash.Seed
	mask   uint64
	shards []shard
	// onNotFullEviction is called once, by the call that first evicts an
	// entry that had not expired (see OnFirstNotFullEviction); warned
	// records that it was.
	onNotFullEviction func()
	warned            atomic.Bool
	// records are the idempotency records of SpendOnce and RefundOnce.
	records *records
}

// Option configures a Source.
type Option func(*Source)

// OnFirstNotFullEviction has the source call f once, the first time it
// evicts an entry that had not expired (a bucket that was not full, a
// window counter still counting): the moment the bound starts to give
// subscribers back tokens they spent or hits they made. The source has no logger of its own;
// f is where its owner logs that. f runs on the goroutine of the Spend or
// Refund that evicted, after it released its locks, so it may call the
// source's methods.
func OnFirstNotFullEviction(f func()) Option {
	return func(s *Source) { s.onNotFullEviction = f }
}

// New returns an empty source holding at most maxBuckets entries, GCRA
// buckets and window counters together (DefaultMaxBuckets when
// maxBuckets <= 0).
func New(maxBuckets int, opts ...Option) *Source {
	if maxBuckets <= 0 {
		maxBuckets = DefaultMaxBuckets
	}
	n := minShards
	for n < maxShards && maxBuckets/n > maxPerShard {
		n *= 2
	}
	for n > 1 && maxBuckets/n < minPerShard {
		n /= 2
	}
	s := &Source{seed: maphash.MakeSeed(), mask: uint64(n - 1), shards: make([]shard, n)}
	s.records = newRecords(s.seed, max(maxBuckets/4, minRecords))
	for i := range s.shards {
		// Spread the remainder so the capacities add up to maxBuckets exactly.
		capacity := maxBuckets / n
		if i < maxBuckets%n {
			capacity++
		}
		s.shards[i].entries.Init(capacity)
	}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

// Spend implements ratelimits.Source.
func (s *Source) Spend(_ context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome) error {
	if s.apply(now, ops, outcomes, spend) {
		s.notFullEvicted()
	}
	return nil
}

// Refund implements ratelimits.Source.
func (s *Source) Refund(_ context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome) error {
	if s.apply(now, ops, outcomes, refund) {
		s.notFullEvicted()
	}
	return nil
}

// notFullEvicted calls onNotFullEviction the first time it is called. The
// load first keeps later evictions from writing to the shared flag.
func (s *Source) notFullEvicted() {
	if s.onNotFullEviction != nil && !s.warned.Load() && s.warned.CompareAndSwap(false, true) {
		s.onNotFullEviction()
	}
}

// Reset implements ratelimits.Source.
func (s *Source) Reset(_ context.Context, now int64, ops []bucket.Op) (int, error) {
	var hashesBuf [smallBatch]uint64
	var shardsBuf [smallBatch]uint32
	hashes := hashesBuf[:0]
	for _, op := range ops {
		hashes = append(hashes, s.hash(op.Key))
	}
	idx := s.shardIndexes(hashes, shardsBuf[:0])
	s.lock(idx)
	defer s.unlock(idx)
	n := 0
	for i := range ops {
		op := &ops[i]
		st := s.shardOf(hashes[i]).entries.Take(op.Key, hashes[i], op.Algorithm.Windowed(), now)
		if bucket.Busy(now, op, st) {
			n++
		}
	}
	return n, nil
}

// Ping implements ratelimits.Source; memory always answers.
func (s *Source) Ping(context.Context) error { return nil }

// Close implements ratelimits.Source; there is nothing to release.
func (s *Source) Close() error { return nil }

// Len returns how many entries are stored, GCRA buckets and window
// counters together. Some of them may have expired since they were last
// touched and not been forgotten yet.
func (s *Source) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.entries.Len()
		sh.mu.Unlock()
	}
	return n
}

// Evictions returns how many entries (GCRA buckets and window counters)
// were evicted to stay within the bound, expired or not. An expired entry
// is evicted only when eviction meets one before the sweep for expired
// entries does.
func (s *Source) Evictions() uint64 {
	return s.sumShards(func(sh *shard) uint64 { return sh.entries.Evicted() })
}

// EvictionsNotFull returns how many of the evicted entries had not
// expired: GCRA buckets that were not full, each of which gave its
// subscriber back the tokens it had spent, and window counters still
// counting, each of which gave back the hits counted. While it stays at 0,
// the bound costs no subscriber anything.
func (s *Source) EvictionsNotFull() uint64 {
	return s.sumShards(func(sh *shard) uint64 { return sh.entries.EvictedNotFull() })
}

// sumShards adds up a counter of every shard, each read under its lock.
func (s *Source) sumShards(counter func(*shard) uint64) uint64 {
	var n uint64
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += counter(sh)
		sh.mu.Unlock()
	}
	return n
}

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

// apply decides and writes one batch under the locks of all its shards,
// and reports whether a write evicted an entry that had not expired.
func (s *Source) apply(now int64, ops []bucket.Op, outcomes []bucket.Outcome, act action) (evictedNotFull bool) {
	if len(ops) == 1 {
		return s.applyOne(now, ops, outcomes, act)
	}
	var statesBuf [smallBatch]bucket.State
	states := statesBuf[:0]
	if len(ops) > smallBatch {
		states = make([]bucket.State, 0, len(ops))
	}
	return s.applyBatch(now, ops, states, outcomes, act)
}

// applyOne is apply for a batch of one op: one lock, nothing sorted, and
// nothing pinned (the one entry it may insert is not in the table yet).
func (s *Source) applyOne(now int64, ops []bucket.Op, outcomes []bucket.Outcome, act action) bool {
	if ops[0].Algorithm.Windowed() {
		return s.applyOneWindow(now, ops, outcomes, act)
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

// applyBatch is apply for any batch: it appends the states it read (the
// bucket package's input) to states, whose capacity must hold them all.
func (s *Source) applyBatch(now int64, ops []bucket.Op, states []bucket.State, outcomes []bucket.Outcome, act action) (evictedNotFull bool) {
	var hashesBuf [smallBatch]uint64
	var shardsBuf [smallBatch]uint32
	hashes := hashesBuf[:0]
	if len(ops) > smallBatch {
		hashes = make([]uint64, 0, len(ops))
	}
	for i := range ops {
		hashes = append(hashes, s.hash(ops[i].Key))
	}
	idx := s.shardIndexes(hashes, shardsBuf[:0])
	s.lock(idx)
	defer s.unlock(idx)
	// Every entry of the batch is pinned until the batch is written, so
	// that making room for one of its new entries never evicts another.
	for i := range ops {
		entries := &s.shardOf(hashes[i]).entries
		windowed := ops[i].Algorithm.Windowed()
		st := bucket.State{TAT: gcra.Missing}
		var pos int
		if windowed {
			pos, st.Window = entries.GetWindow(ops[i].Key, hashes[i], now)
		} else {
			pos, st.TAT = entries.GetTAT(ops[i].Key, hashes[i], now)
		}
		entries.Pin(windowed, pos)
		states = append(states, st)
	}
	act.decide(now, ops, states, outcomes)
	for i := range ops {
		if !outcomes[i].Write {
			continue
		}
		// Found again by key: a read above that dropped an expired entry,
		// or an eviction, may have moved others of the same shard.
		key, h := ops[i].Key, hashes[i]
		entries := &s.shardOf(h).entries
		var lost bool
		if ops[i].Algorithm.Windowed() {
			lost = entries.PutWindow(key, h, entries.FindWindow(key, h), &outcomes[i].New.Window, now, true)
		} else {
			lost = entries.PutTAT(key, h, entries.FindTAT(key, h), outcomes[i].New.TAT, now, true)
		}
		evictedNotFull = evictedNotFull || lost
	}
	for i := range ops {
		key, h := ops[i].Key, hashes[i]
		entries := &s.shardOf(h).entries
		if ops[i].Algorithm.Windowed() {
			entries.Unpin(true, entries.FindWindow(key, h))
		} else {
			entries.Unpin(false, entries.FindTAT(key, h))
		}
	}
	return evictedNotFull
}

// hash is a key's hash: its low bits choose the shard, its high bits the
// place in the shard's table.
func (s *Source) hash(key string) uint64 {
	return maphash.String(s.seed, key)
}

func (s *Source) shardOf(h uint64) *shard {
	return &s.shards[h&s.mask]
}

// shardIndexes returns the distinct shard indexes of the keys whose hashes
// are given, in ascending order: the one lock order every batch follows.
func (s *Source) shardIndexes(hashes []uint64, buf []uint32) []uint32 {
	for _, h := range hashes {
		buf = append(buf, uint32(h&s.mask))
	}
	slices.Sort(buf)
	return slices.Compact(buf)
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

// Call is not implemented yet.
func (s *Source) Call(context.Context, int64, *bucket.Call, *bucket.CallResult) error {
	return errors.New("memory: Call: not implemented yet")
}
