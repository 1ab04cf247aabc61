// Package memory is the embedded bucket source: buckets in this process's
// memory, in shards with a lock each, bounded in number.
//
// A batch locks the shards of all its keys in ascending shard order (so two
// batches can never deadlock), reads every TAT, decides with the gcra
// package, writes, and unlocks: batches on the same buckets behave as if one
// ran fully before the other. Single-key batches, the common case, take one
// lock and allocate nothing.
//
// Memory stays bounded two ways. A bucket whose TAT has passed is full, and
// full buckets are forgotten, which no answer can tell apart from keeping
// them. And each shard holds at most its share of MaxBuckets: to make room
// it evicts a full bucket if it finds one, else the one closest to full, so
// that an evicted subscriber, who starts again from a full bucket, gains
// the least. A flood of cheap spends on fresh ids thus evicts its own
// buckets, not those of subscribers who spent more. Evictions of buckets
// that were not full, the ones that cost a subscriber something, are
// counted apart (EvictionsNotFull).
//
// Each shard's buckets are a hash table of the internal table package,
// which holds no pointer, so the garbage collector never scans buckets. A
// stored bucket takes one 32-byte slot, plus its key's bytes when the key
// is longer than 16 bytes; a table is at most three quarters full and is
// never shrunk. BenchmarkMemoryPerBucket measures the cost per bucket.
package memory

import (
	"context"
	"hash/maphash"
	"slices"
	"sync/atomic"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// DefaultMaxBuckets is the bucket bound used when none is given.
const DefaultMaxBuckets = 1_000_000

// minShards is how many shards a source splits into when its bound allows
// minPerShard buckets each: enough that two cores (or a few dozen) rarely
// wait on the same lock.
const minShards = 256

// maxPerShard is the most buckets a shard is meant to hold: beyond it, a
// source splits into more shards. A shard's table is doubled under its
// lock, and one of 4,096 buckets (at most 8,192 slots, 256 KiB) is rebuilt
// in a fraction of a millisecond; ten times that would stall the shard's
// callers for milliseconds.
const maxPerShard = 4096

// maxShards caps the shards (128 MiB of them) for bounds past four billion.
const maxShards = 1 << 20

// minPerShard keeps shards from being so small that per-shard eviction
// stops resembling a global one.
const minPerShard = 64

// smallBatch is the batch size handled with arrays on the stack.
const smallBatch = 8

// Source stores buckets in memory. Its zero value is not usable; call New.
type Source struct {
	seed   maphash.Seed
	mask   uint64
	shards []shard
	// onNotFullEviction is called once, by the call that first evicts a
	// bucket that was not full (see OnFirstNotFullEviction); warned
	// records that it was.
	onNotFullEviction func()
	warned            atomic.Bool
	// records are the idempotency records of SpendOnce and RefundOnce.
	records *records
}

// Option configures a Source.
type Option func(*Source)

// OnFirstNotFullEviction has the source call f once, the first time it
// evicts a bucket that was not full: the moment the bound starts to give
// subscribers back tokens they spent. The source has no logger of its own;
// f is where its owner logs that. f runs on the goroutine of the Spend or
// Refund that evicted, after it released its locks, so it may call the
// source's methods.
func OnFirstNotFullEviction(f func()) Option {
	return func(s *Source) { s.onNotFullEviction = f }
}

// New returns an empty source holding at most maxBuckets buckets
// (DefaultMaxBuckets when maxBuckets <= 0).
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
		s.shards[i].buckets.Init(capacity)
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
	for i, op := range ops {
		if s.shardOf(hashes[i]).buckets.Delete(op.Key, hashes[i], now) {
			n++
		}
	}
	return n, nil
}

// Ping implements ratelimits.Source; memory always answers.
func (s *Source) Ping(context.Context) error { return nil }

// Close implements ratelimits.Source; there is nothing to release.
func (s *Source) Close() error { return nil }

// Len returns how many buckets are stored. Some of them may have become
// full since they were last touched and not been forgotten yet.
func (s *Source) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.buckets.Len()
		sh.mu.Unlock()
	}
	return n
}

// Evictions returns how many buckets were evicted to stay within the
// bound, full or not. A full bucket is evicted only when eviction meets
// one before the sweep for full buckets does.
func (s *Source) Evictions() uint64 {
	return s.sumShards(func(sh *shard) uint64 { return sh.buckets.Evicted() })
}

// EvictionsNotFull returns how many of the evicted buckets were not full:
// each gave its subscriber back the tokens the bucket had spent. While it
// stays at 0, the bound costs no subscriber anything.
func (s *Source) EvictionsNotFull() uint64 {
	return s.sumShards(func(sh *shard) uint64 { return sh.buckets.EvictedNotFull() })
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

// action is what a batch does to its buckets.
type action int

const (
	spend action = iota
	refund
)

// decide computes a batch's outcomes from the TATs it read.
func (a action) decide(now int64, ops []bucket.Op, states []bucket.State, outcomes []bucket.Outcome) {
	if a == refund {
		bucket.RefundBatch(now, ops, states, outcomes)
	} else {
		bucket.SpendBatch(now, ops, states, outcomes)
	}
}

// apply decides and writes one batch under the locks of all its shards,
// and reports whether a write evicted a bucket that was not full.
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
// nothing pinned (the one bucket it may insert is not in the table yet).
func (s *Source) applyOne(now int64, ops []bucket.Op, outcomes []bucket.Outcome, act action) bool {
	key := ops[0].Key
	h := s.hash(key)
	sh := s.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	pos, tat := sh.buckets.Get(key, h, now)
	states := [1]bucket.State{{TAT: tat}}
	// act.decide written out: a call through it is not inlined, and this
	// is every single-key spend.
	if act == refund {
		bucket.RefundBatch(now, ops, states[:], outcomes)
	} else {
		bucket.SpendBatch(now, ops, states[:], outcomes)
	}
	return outcomes[0].Write && sh.buckets.PutAt(key, h, pos, outcomes[0].New.TAT, now)
}

// applyBatch is apply for any batch: it appends the TATs it read (gcra's
// input) to tats, whose capacity must hold them all.
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
	// Every bucket of the batch is pinned until the batch is written, so
	// that making room for one of its new buckets never evicts another.
	for i := range ops {
		buckets := &s.shardOf(hashes[i]).buckets
		pos, tat := buckets.Get(ops[i].Key, hashes[i], now)
		buckets.Pin(pos)
		states = append(states, bucket.State{TAT: tat})
	}
	act.decide(now, ops, states, outcomes)
	for i := range ops {
		if outcomes[i].Write {
			// Found again by key: a read above that dropped a full bucket,
			// or an eviction, may have moved others of the same shard.
			buckets := &s.shardOf(hashes[i]).buckets
			if buckets.PutPinnedAt(ops[i].Key, hashes[i], buckets.Find(ops[i].Key, hashes[i]), outcomes[i].New.TAT, now) {
				evictedNotFull = true
			}
		}
	}
	for i := range ops {
		s.shardOf(hashes[i]).buckets.Unpin(ops[i].Key, hashes[i])
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
