package redis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/source/redis"
	"github.com/limiter-dev/limiter/source/sourcetest"
)

// perSecond is a limit of burst 1 refilling in a second: a bucket spent
// once is full again a second later.
func perSecond(key string) bucket.Op {
	return bucket.Op{Key: key, EmissionInterval: int64(time.Second), BurstOffset: int64(time.Second), Cost: 1}
}

// daily is a limit of burst 100 refilling over a day.
func daily(key string, cost int64) bucket.Op {
	ei := int64(864 * time.Second)
	return bucket.Op{Key: key, EmissionInterval: ei, BurstOffset: ei * 100, Cost: cost}
}

// oneHash opens a source in key format v2 with a single group, so that all
// its buckets are fields of one hash, and returns it, a plain client, and
// the hash's key.
func oneHash(t *testing.T) (*redis.Source, goredis.UniversalClient, string) {
	t.Helper()
	opts := standalone(t)
	opts.Groups = 1
	src := newSource(t, opts)
	return src, rawClient(t, opts), src.Key("x")
}

// In key format v2 a hash's expiry only grows, so a hash that is written
// often never expires, and the ids that passed through it would stay in
// it as fields of full buckets. Writes that add a field sweep them out now
// and then: here one hash (a single group) sees 3,000 one-time ids, ten a
// second, beside 20 buckets that stay not full throughout. It never holds
// more than about twice the buckets that are not full, the 20 keep their
// TATs to the nanosecond, and after the last id has refilled, the next
// sweep leaves only the 20; with TATs in either form.
func TestSweepKeepsAHashSmall(t *testing.T) {
	for _, binary := range []bool{false, true} {
		t.Run(fmt.Sprintf("binary=%t", binary), func(t *testing.T) { testSweepKeepsAHashSmall(t, binary) })
	}
}

func testSweepKeepsAHashSmall(t *testing.T, binary bool) {
	opts := standalone(t)
	opts.Groups, opts.BinaryTATs = 1, binary
	src := newSource(t, opts)
	c, hash := rawClient(t, opts), src.Key("x")
	ctx := context.Background()
	hlen := func() int {
		t.Helper()
		n, err := c.HLen(ctx, hash).Result()
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	}

	steady := make(map[string]int64)
	for i := range 20 {
		k := fmt.Sprintf("steady:%d", i)
		steady[k] = spend(t, src, now, daily(k, 1))[0].New.TAT
	}
	at, largest := now, 0
	for i := range 3000 {
		at += int64(100 * time.Millisecond)
		if out := spend(t, src, at, perSecond(fmt.Sprintf("once:%d", i)))[0]; !out.Allowed {
			t.Fatalf("id %d: a new bucket denied", i)
		}
		largest = max(largest, hlen())
	}
	// Not full at any moment: the 20, the ten ids of the last second, and
	// the sweep's own record. Sweeps start at 32 fields and then come at
	// twice what the last one left.
	const live = 20 + 10 + 1
	if largest > 2*live {
		t.Fatalf("the hash reached %d fields with at most %d not full; want at most %d", largest, live, 2*live)
	}
	for k, tat := range steady {
		if v, ok := stored(t, c, src, k); !ok || v != storedTAT(opts, tat) {
			t.Fatalf("bucket %s holds %q (%v) after the sweeps, want %d", k, v, ok, tat)
		}
	}
	// Two seconds on, every one-time id is full: the next sweep leaves the
	// 20, the new ids so far (all of this moment) and the record.
	at += int64(2 * time.Second)
	for i := 1; ; i++ {
		spend(t, src, at, perSecond(fmt.Sprintf("late:%d", i)))
		if hlen() == 20+i+1 {
			break
		}
		if i > 2*live {
			t.Fatalf("no sweep after %d new fields; the hash holds %d", i, hlen())
		}
	}
	t.Logf("largest hash: %d fields; after the last sweep: %d", largest, hlen())
}

// A sweep runs while a batch is being written, where an error would stop
// the write half way. A field that does not hold a TAT (someone else wrote
// it) is left alone, and the batch is written whole.
func TestSweepLeavesForeignValues(t *testing.T) {
	src, c, hash := oneHash(t)
	ctx := context.Background()
	if err := c.HSet(ctx, hash, "foreign", "not a number").Err(); err != nil {
		t.Fatal(err)
	}
	at := now
	var last []bucket.Outcome
	for i := range 40 { // past the first sweep at 32 fields
		at += int64(2 * time.Second) // every earlier id is full
		last = spend(t, src, at, perSecond(fmt.Sprintf("a:%d", i)), daily(fmt.Sprintf("b:%d", i), 1))
	}
	if v, err := c.HGet(ctx, hash, "foreign").Result(); err != nil || v != "not a number" {
		t.Fatalf("the foreign field holds %q (%v) after the sweeps", v, err)
	}
	for i, k := range []string{"a:39", "b:39"} {
		if v, ok := stored(t, c, src, k); !ok || v != strconv.FormatInt(last[i].New.TAT, 10) {
			t.Fatalf("bucket %s of the last batch holds %q (%v), want %d", k, v, ok, last[i].New.TAT)
		}
	}
	// a:0 was full from the second batch on and never read again: only
	// a sweep removes it.
	if _, ok := stored(t, c, src, "a:0"); ok {
		t.Fatal("a full bucket is still stored: no sweep ran")
	}
}

// The empty bucket key would be the field that a sweep keeps its record
// in: format v2 refuses it (the Limiter's keys are "<enum>:<id>").
func TestGroupedRefusesEmptyKey(t *testing.T) {
	opts := standalone(t)
	opts.Groups = 4
	src := newSource(t, opts)
	out := make([]bucket.Outcome, 1)
	if err := src.Spend(context.Background(), now, []bucket.Op{hourly("", 1)}, out); !errors.Is(err, redis.ErrInvalidOp) {
		t.Fatalf("Spend of an empty key: %v, want ErrInvalidOp", err)
	}
	if _, err := src.Reset(context.Background(), now, redis.ResetOps("")); !errors.Is(err, redis.ErrInvalidOp) {
		t.Fatalf("Reset of an empty key: %v, want ErrInvalidOp", err)
	}
}

// Sweeps delete only full buckets. 300 buckets in two hashes, on limits
// that refill in a second, in half a second and in an hour, get random
// batches of spends and refunds over a simulated hour and a half: every
// decision is the model's, and at the end the hashes hold every bucket
// that is not full with the model's TAT, and nothing else but full buckets
// not yet swept and the sweeps' records.
func TestSweepMatchesModel(t *testing.T) {
	opts := standalone(t)
	opts.Groups = 2
	src := newSource(t, opts)
	c := rawClient(t, opts)
	ctx := context.Background()
	limits := []struct{ ei, burst int64 }{
		{int64(time.Second), 1},
		{int64(100 * time.Millisecond), 5},
		{int64(36 * time.Second), 100},
	}
	keys := make([]string, 300)
	for i := range keys {
		keys[i] = fmt.Sprintf("m:%d", i)
	}
	rng := rand.New(rand.NewPCG(5, 8))
	m := sourcetest.Model{}
	at := now
	for step := range 4000 {
		at += rng.Int64N(int64(3 * time.Second))
		n := 1 + rng.IntN(3)
		ops := make([]bucket.Op, n)
		for i, k := range rng.Perm(len(keys))[:n] {
			l := limits[k%len(limits)]
			ops[i] = bucket.Op{Key: keys[k], EmissionInterval: l.ei, BurstOffset: l.ei * l.burst, Cost: rng.Int64N(l.burst + 1)}
		}
		applyAsModel(t, src, m, step, at, ops, rng.IntN(5) == 0)
	}
	checkStored(t, opts, src, m, at)
	hashes := map[string]bool{}
	for _, k := range keys {
		hashes[src.Key(k)] = true
	}
	if len(hashes) != 2 {
		t.Fatalf("%d hashes for 2 groups", len(hashes))
	}
	fields := 0
	for hash := range hashes {
		all, err := c.HGetAll(ctx, hash).Result()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := all[""]; !ok {
			t.Fatalf("hash %s has no sweep record: no sweep ran", hash)
		}
		for f, v := range all {
			if f == "" {
				continue
			}
			fields++
			if tat, _ := strconv.ParseInt(v, 10, 64); tat > at && m[f].TAT != tat {
				t.Errorf("field %s holds %s, the model %d", f, v, m[f].TAT)
			}
		}
	}
	t.Logf("%d fields left of %d buckets", fields, len(m))
}
