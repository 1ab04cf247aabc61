// Package memory is the embedded bucket source: GCRA buckets and window
// counters in this process's memory, in shards with a lock each, bounded
// in number; and rate counters and penalty boxes, per limit name, each
// bounded by its limit's capacity.
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
// A calendar quota's counter is kept in the table of window counters (a
// slot of the same size), under a key that names its period (periodKey),
// expiring at the end of its period.
//
// Each shard's entries are two hash tables of the internal table package,
// one per kind, which hold no pointer, so the garbage collector never scans
// them. A stored GCRA bucket takes one 32-byte slot and a window counter
// one 56-byte slot, plus the key's bytes when it is longer than 16 bytes;
// a table is at most three quarters full and is never shrunk.
// BenchmarkMemoryPerBucket and BenchmarkMemoryPerWindowCounter measure the
// cost per entry.
//
// Rate counters and penalty boxes live apart from the shards, one group
// per limit name (the enum part of a key "<enum>:<id>"), each with a lock
// of its own, a table of rate counters (table.Rates) and one of box
// entries (table.Boxes). A limit's capacity bounds each of them exactly,
// which shares per shard could not: a counter at its capacity evicts its
// least recently incremented entry, a box the entry with the least time
// left. Counter entries with no hit in the last minute and box entries
// past their expiry are forgotten, when read and by every insert. These
// entries do not count against the bound given to New: each name holds
// at most its capacity of each kind (default DefaultCapacity), about 223
// bytes per counter entry and 68 per box entry with keys of up to 16
// bytes (BenchmarkMemoryPerRateCounter, BenchmarkMemoryPerBoxEntry).
//
// Every call takes its locks in one order: an idempotency record's stripe
// first, then the shards of its GCRA buckets and window counters in
// ascending order, then the groups of its rate counters and box entries
// in the order they were first used. A batch that mixes them, or an ERL
// call on counters and a box of several names, is so one atomic step, and
// no two calls can deadlock.
package memory

import (
	"context"
	"hash/maphash"
	"sync/atomic"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
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
	// groups hold the rate counters and penalty boxes, one group per
	// limit name.
	groups groups
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

// Reset implements ratelimits.Source. It deletes each op's bucket (or rate
// counter) and, for an op with a box, its box entry, and counts the ops
// for which that gave anything back (bucket.Busy).
func (s *Source) Reset(_ context.Context, now int64, ops []bucket.Op) (int, error) {
	var refsBuf [smallBatch]opRef
	var shardsBuf [smallBatch]uint32
	var groupsBuf [2 * smallBatch]*group
	refs, held := s.lockBatch(ops, refsBuf[:0], shardsBuf[:0], groupsBuf[:0])
	defer s.unlockBatch(held)
	sec := ratecounter.Second(now)
	n := 0
	var c ratecounter.Counter
	for i := range ops {
		op, r := &ops[i], &refs[i]
		var st bucket.State
		if op.Algorithm == bucket.RateCounter {
			st = bucket.State{TAT: gcra.Missing}
			if r.group.rates.Get(op.Key, r.h, sec, &c) {
				st.Rate = &c
				r.group.rates.Delete(op.Key, r.h)
			}
		} else if op.Algorithm == bucket.Concurrency {
			st = bucket.WithLeases(s.shardOf(r.h).entries.TakeLeases(op.Key, now))
		} else if op.Algorithm == bucket.Calendar {
			st = s.shardOf(r.h).entries.Take(periodKey(now, op), r.h, true, now)
		} else {
			st = s.shardOf(r.h).entries.Take(op.Key, r.h, op.Algorithm.Counted(), now)
		}
		if op.Box != "" {
			st.BoxExpires = r.boxGroup.boxes.Get(op.Box, r.boxH, now)
			r.boxGroup.boxes.Delete(op.Box, r.boxH)
		}
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
