package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/window"
	"github.com/limiter-dev/limiter/source/memory"
)

// login is a limit of 5 attempts refilling over 15 minutes.
func login(key string, cost int64) bucket.Op {
	ei := int64(3 * time.Minute)
	return bucket.Op{Key: key, EmissionInterval: ei, BurstOffset: 5 * ei, Cost: cost}
}

// A flood of one-attempt spends on fresh ids, twenty times the bound,
// does not give a user who used all 5 attempts a new burst: each flood
// bucket holds one attempt, the victim's five, so the flood's buckets are
// the ones evicted.
func TestFloodOfFreshIDsKeepsAnEmptiedBucket(t *testing.T) {
	const maxBuckets = 1000
	src := memory.New(maxBuckets)
	at := now
	for range 5 {
		if !spendOne(t, src, at, login("1:victim", 1)).Allowed {
			t.Fatal("the victim's first 5 attempts must be allowed")
		}
	}
	for i := range 20 * maxBuckets {
		at += int64(time.Millisecond) // 20 s in all: no flood bucket refills
		spendOne(t, src, at, login(fmt.Sprint("1:flood", i), 1))
	}
	if n := src.Len(); n != maxBuckets {
		t.Fatalf("holds %d buckets after the flood, want the bound %d", n, maxBuckets)
	}
	check := login("1:victim", 1)
	check.Mode = bucket.CheckOnly
	if o := spendOne(t, src, at, check); o.Allowed || o.Remaining != 0 {
		t.Fatalf("the victim after the flood: %+v, want denied with 0 remaining (its bucket was evicted)", o.Decision)
	}
	// Every flood id past the bound evicted a flood bucket with its one
	// attempt spent: a loss, if a small one, and counted as one.
	if n, lost := src.Evictions(), src.EvictionsNotFull(); n != 20*maxBuckets-(maxBuckets-1) || lost != n {
		t.Fatalf("%d evictions, %d not full; want %d of each", n, lost, 20*maxBuckets-(maxBuckets-1))
	}
}

// A bucket that has refilled is what makes room, rather than one with
// tokens spent; losing it changes no answer, so it is no loss. Here b is
// full again a second after its spend, and a and c are not.
func TestFullBucketsGoBeforeOthers(t *testing.T) {
	src := memory.New(3) // one shard
	secondly := bucket.Op{Key: "b", EmissionInterval: int64(time.Second), BurstOffset: int64(10 * time.Second), Cost: 1}
	spendOne(t, src, now, hourly("a", 1))
	spendOne(t, src, now, secondly)
	spendOne(t, src, now, hourly("c", 1))
	later := now + int64(2*time.Second)
	spendOne(t, src, later, hourly("d", 1))
	// The sweep for full buckets or eviction removed b: either way,
	// no subscriber lost anything.
	if n := src.EvictionsNotFull(); n != 0 {
		t.Errorf("%d evictions of buckets that were not full, want 0", n)
	}
	for _, k := range []string{"a", "c", "d"} {
		if r := spendOne(t, src, later, hourly(k, 0)).Remaining; r != 99 {
			t.Errorf("%s: %d remaining, want 99 (kept)", k, r)
		}
	}
}

// A batch that stores new buckets in a shard at its bound never evicts
// one of its own to make room for another: x is the bucket closest to
// full when y needs room, yet both keep what the batch spent.
func TestBatchNeverEvictsItsOwnBuckets(t *testing.T) {
	src := memory.New(3) // one shard
	for _, k := range []string{"a", "b", "c"} {
		spendOne(t, src, now, hourly(k, 50))
	}
	out := make([]bucket.Outcome, 2)
	if err := src.Spend(context.Background(), now, []bucket.Op{hourly("x", 1), hourly("y", 1)}, out); err != nil {
		t.Fatal(err)
	}
	if !out[0].Allowed || !out[1].Allowed {
		t.Fatalf("a fresh batch: %+v, want both allowed", out)
	}
	for _, k := range []string{"x", "y"} {
		if r := spendOne(t, src, now, hourly(k, 0)).Remaining; r != 99 {
			t.Errorf("%s: %d remaining, want 99 (written by the batch and kept)", k, r)
		}
	}
	kept := 0
	for _, k := range []string{"a", "b", "c"} {
		if spendOne(t, src, now, hourly(k, 0)).Remaining == 50 {
			kept++
		}
	}
	if kept != 1 || src.Len() != 3 || src.EvictionsNotFull() != 2 {
		t.Fatalf("%d of a, b and c kept, %d buckets, %d evictions; want 1, 3 and 2", kept, src.Len(), src.EvictionsNotFull())
	}
}

// When a batch has more new keys in a shard than the shard holds, the
// bound still holds: one of the batch's own buckets goes.
func TestBatchLargerThanAShardKeepsTheBound(t *testing.T) {
	src := memory.New(1)
	out := make([]bucket.Outcome, 3)
	if err := src.Spend(context.Background(), now, []bucket.Op{hourly("x", 1), hourly("y", 1), hourly("z", 1)}, out); err != nil {
		t.Fatal(err)
	}
	if n := src.Len(); n != 1 {
		t.Fatalf("holds %d buckets, bound 1", n)
	}
}

// The callback of OnFirstNotFullEviction runs once, at the first eviction
// of a bucket that was not full, and not for full buckets made room with.
// It runs with no lock held: it reads the source's counter.
func TestFirstNotFullEvictionIsReportedOnce(t *testing.T) {
	var calls []uint64
	var src *memory.Source
	src = memory.New(3, memory.OnFirstNotFullEviction(func() {
		calls = append(calls, src.EvictionsNotFull())
	}))
	secondly := func(key string) bucket.Op {
		return bucket.Op{Key: key, EmissionInterval: int64(time.Second), BurstOffset: int64(10 * time.Second), Cost: 1}
	}
	for _, k := range []string{"a", "b", "c"} {
		spendOne(t, src, now, secondly(k))
	}
	later := now + int64(2*time.Second) // a, b and c are full
	for _, k := range []string{"d", "e", "f"} {
		spendOne(t, src, later, hourly(k, 1))
	}
	if len(calls) != 0 {
		t.Fatalf("called %d times while only full buckets made room, want 0", len(calls))
	}
	for i := range 5 {
		spendOne(t, src, later, hourly(fmt.Sprint("g", i), 1))
	}
	if len(calls) != 1 || calls[0] != 1 {
		t.Fatalf("calls saw %v evictions, want one call at the first", calls)
	}
	if n := src.EvictionsNotFull(); n != 5 {
		t.Fatalf("%d evictions of buckets that were not full, want 5", n)
	}
}

// The same for windows: a flood of one-hit spends on fresh ids in the
// window in which a user spent all 100 hits does not give that user its
// window back. Every counter of the flood expires when the user's does,
// and holds fewer hits, so the flood's counters are the ones evicted.
func TestFloodOfFreshIDsKeepsAFullWindow(t *testing.T) {
	const maxBuckets = 1000
	src := memory.New(maxBuckets)
	at := now // 800 s into its hour: the flood stays in the same window
	if o := spendOne(t, src, at, slidingHourly("1:victim", 100)); !o.Allowed {
		t.Fatalf("the victim's 100 hits: %+v, want allowed", o.Decision)
	}
	for i := range 20 * maxBuckets {
		at += int64(time.Millisecond)
		spendOne(t, src, at, slidingHourly(fmt.Sprint("1:flood", i), 1))
	}
	check := slidingHourly("1:victim", 1)
	check.Mode = bucket.CheckOnly
	if o := spendOne(t, src, at, check); o.Allowed || o.Remaining != 0 {
		t.Fatalf("the victim after the flood: %+v, want denied with 0 remaining (its counter was evicted)", o.Decision)
	}
	if n, lost := src.Evictions(), src.EvictionsNotFull(); n != 20*maxBuckets-(maxBuckets-1) || lost != n {
		t.Fatalf("%d evictions, %d still counting; want %d of each", n, lost, 20*maxBuckets-(maxBuckets-1))
	}
}

// A window counter whose windows have passed is what makes room, rather
// than a bucket with tokens spent or a counter still counting. Here a
// counts hits of a one-second window and counts nothing two seconds on.
func TestExpiredCountersGoBeforeOthers(t *testing.T) {
	src := memory.New(3) // one shard
	secondly := bucket.Op{Key: "a", Algorithm: bucket.SlidingWindow, Window: window.Limit{Count: 10, Period: 1000}, Cost: 1}
	spendOne(t, src, now, secondly)
	spendOne(t, src, now, hourly("b", 1))
	spendOne(t, src, now, slidingHourly("c", 1))
	later := now + int64(2*time.Second)
	spendOne(t, src, later, fixedTenMinutes("d", 1))
	if n := src.EvictionsNotFull(); n != 0 {
		t.Errorf("%d evictions of entries still counting, want 0", n)
	}
	for _, op := range []bucket.Op{hourly("b", 0), slidingHourly("c", 0), fixedTenMinutes("d", 0)} {
		if r := spendOne(t, src, later, op).Remaining; r != 99 {
			t.Errorf("%s: %d remaining, want 99 (kept)", op.Key, r)
		}
	}
}

// A batch that stores a new bucket and a new counter in a shard at its
// bound never evicts one of them to make room for the other.
func TestMixedBatchNeverEvictsItsOwnEntries(t *testing.T) {
	src := memory.New(3) // one shard
	for _, k := range []string{"a", "b", "c"} {
		spendOne(t, src, now, slidingHourly(k, 50))
	}
	out := make([]bucket.Outcome, 3)
	if err := src.Spend(context.Background(), now, []bucket.Op{hourly("x", 1), slidingHourly("y", 1), fixedTenMinutes("z", 1)}, out); err != nil {
		t.Fatal(err)
	}
	for _, op := range []bucket.Op{hourly("x", 0), slidingHourly("y", 0), fixedTenMinutes("z", 0)} {
		if r := spendOne(t, src, now, op).Remaining; r != 99 {
			t.Errorf("%s: %d remaining, want 99 (written by the batch and kept)", op.Key, r)
		}
	}
	if src.Len() != 3 || src.EvictionsNotFull() != 3 {
		t.Fatalf("%d entries, %d evictions; want 3 and 3", src.Len(), src.EvictionsNotFull())
	}
}
