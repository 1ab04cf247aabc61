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
// full buckets are forgotten (on read, and by a sweep that each insert moves
// two positions on), which no answer can tell apart from keeping them. And
// each shard holds at most its share of MaxBuckets, evicting to make room a
// bucket not read recently (CLOCK, a close approximation of least recently
// used that writes nothing but the bucket's own slot when it is read): an
// evicted subscriber starts again from a full bucket. A full bucket the
// eviction hand meets is dropped instead, and is not counted as evicted.
//
// Each shard is an open-addressing hash table of its own, not a Go map:
// the key's hash, the TAT and the key itself sit in one 32-byte slot, so a
// spend on a bucket not in the CPU's caches waits for memory about once.
// Keys of up to 16 bytes ("<enum>:<id>" with ids of up to 13 characters)
// live in the slot; longer ones in an arena of bytes beside the table,
// rebuilt when removed keys make up most of it. Neither holds a pointer,
// so the garbage collector never scans buckets: with a Go string per
// bucket, marking a million of them took about 30 ms per collection.
//
// Memory cost: a stored bucket takes one 32-byte slot, and a key longer
// than 16 bytes its bytes in the arena too (at most about twice that,
// counting removed keys not yet dropped). A table is doubled when three
// quarters full, up to the size its shard's bound needs at three quarters
// full, and never shrunk: a shard that once held many buckets keeps its
// table. A full source thus takes about 43 bytes per bucket for short
// keys; BenchmarkMemoryPerBucket measures it at one million buckets.
package memory

import (
	"context"
	"hash/maphash"
	"slices"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
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
	// records are the idempotency records of SpendOnce and RefundOnce.
	records *records
}

// New returns an empty source holding at most maxBuckets buckets
// (DefaultMaxBuckets when maxBuckets <= 0).
func New(maxBuckets int) *Source {
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
		s.shards[i].init(capacity)
	}
	return s
}

// Spend implements ratelimits.Source.
func (s *Source) Spend(_ context.Context, now int64, ops []gcra.Op, outcomes []gcra.Outcome) error {
	s.apply(now, ops, outcomes, false)
	return nil
}

// Refund implements ratelimits.Source.
func (s *Source) Refund(_ context.Context, now int64, ops []gcra.Op, outcomes []gcra.Outcome) error {
	s.apply(now, ops, outcomes, true)
	return nil
}

// Reset implements ratelimits.Source.
func (s *Source) Reset(_ context.Context, now int64, keys []string) (int, error) {
	var hashesBuf [smallBatch]uint64
	var shardsBuf [smallBatch]uint32
	hashes := hashesBuf[:0]
	for _, key := range keys {
		hashes = append(hashes, s.hash(key))
	}
	idx := s.shardIndexes(hashes, shardsBuf[:0])
	s.lock(idx)
	defer s.unlock(idx)
	n := 0
	for i, key := range keys {
		if s.shardOf(hashes[i]).delete(key, hashes[i], now) {
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
		n += sh.count
		sh.mu.Unlock()
	}
	return n
}

// Evictions returns how many buckets were evicted to stay within the bound.
func (s *Source) Evictions() uint64 {
	var n uint64
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.evicted
		sh.mu.Unlock()
	}
	return n
}

// apply decides and writes one batch under the locks of all its shards.
func (s *Source) apply(now int64, ops []gcra.Op, outcomes []gcra.Outcome, refund bool) {
	if len(ops) == 1 {
		s.applyOne(now, ops, outcomes, refund)
		return
	}
	var tatsBuf [smallBatch]int64
	tats := tatsBuf[:0]
	if len(ops) > smallBatch {
		tats = make([]int64, 0, len(ops))
	}
	s.applyBatch(now, ops, tats, outcomes, refund)
}

// applyBatch is apply for any batch: it appends the TATs it read (gcra's
// input) to tats, whose capacity must hold them all.
func (s *Source) applyBatch(now int64, ops []gcra.Op, tats []int64, outcomes []gcra.Outcome, refund bool) {
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
	for i := range ops {
		_, tat := s.shardOf(hashes[i]).get(ops[i].Key, hashes[i], now)
		tats = append(tats, tat)
	}
	decide(now, ops, tats, outcomes, refund)
	for i := range ops {
		if outcomes[i].Write {
			// Found again by key: a read above that dropped a full bucket
			// may have moved others of the same shard.
			s.shardOf(hashes[i]).put(ops[i].Key, hashes[i], outcomes[i].NewTAT, now)
		}
	}
}

// decide computes a batch's outcomes from the TATs it read.
func decide(now int64, ops []gcra.Op, tats []int64, outcomes []gcra.Outcome, refund bool) {
	if refund {
		gcra.RefundBatch(now, ops, tats, outcomes)
	} else {
		gcra.SpendBatch(now, ops, tats, outcomes)
	}
}

// applyOne is apply for a batch of one op: one lock, nothing sorted.
func (s *Source) applyOne(now int64, ops []gcra.Op, outcomes []gcra.Outcome, refund bool) {
	key := ops[0].Key
	h := s.hash(key)
	sh := s.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	pos, tat := sh.get(key, h, now)
	tats := [1]int64{tat}
	if refund {
		gcra.RefundBatch(now, ops, tats[:], outcomes)
	} else {
		gcra.SpendBatch(now, ops, tats[:], outcomes)
	}
	if outcomes[0].Write {
		sh.putAt(key, h, pos, outcomes[0].NewTAT, now)
	}
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
