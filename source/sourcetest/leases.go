package sourcetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/concurrency"
)

// RunLeases runs the tests of concurrency limits: leases acquired,
// released, renewed and expiring, in batches beside other algorithms,
// remembered under idempotency records, and never more held than the
// count however the source interleaves acquires.
func RunLeases(t *testing.T, newSource Factory) {
	t.Run("LeasesAcquireReleaseRenew", func(t *testing.T) { testLeases(t, newSource) })
	t.Run("LeasesDeniedBatchTakesNone", func(t *testing.T) { testLeasesDeniedBatch(t, newSource) })
	t.Run("LeasesReset", func(t *testing.T) { testLeasesReset(t, newSource) })
	t.Run("LeasesOnceReplaysTheLeases", func(t *testing.T) { testLeasesOnce(t, newSource) })
	t.Run("LeasesMatchModel", func(t *testing.T) { testLeasesMatchModel(t, newSource) })
	t.Run("LeasesNoOvershoot", func(t *testing.T) { testLeasesNoOvershoot(t, newSource) })
	t.Run("LeasesBefore1970", func(t *testing.T) { testLeasesBefore1970(t, newSource) })
}

// msNs is a millisecond in the nanoseconds of now and of a decision.
const msNs = int64(time.Millisecond)

// leaseIDs makes the ids the Limiter would: distinct, per test run.
var leaseIDs atomic.Uint64

// acquireOp is an acquire of cost slots of a limit of count slots whose
// leases live ttl ms, with a fresh lease id.
func acquireOp(key string, count, ttl, cost int64, mode bucket.Mode) bucket.Op {
	return bucket.Op{
		Key: key, Algorithm: bucket.Concurrency, Lease: concurrency.Limit{Count: count, TTL: ttl},
		LeaseID: fmt.Sprintf("%032x", leaseIDs.Add(1)), Cost: cost, Mode: mode,
	}
}

// leaseOp releases or renews lease of a limit of count slots.
func leaseOp(key string, count, ttl int64, lease string, action bucket.LeaseAction) bucket.Op {
	return bucket.Op{
		Key: key, Algorithm: bucket.Concurrency, Lease: concurrency.Limit{Count: count, TTL: ttl},
		LeaseID: lease, LeaseAction: action,
	}
}

// liveLeases returns st with a copy of its leases live at now (unix ns).
func liveLeases(now int64, st bucket.State) bucket.State {
	return bucket.WithLeases(concurrency.Live(floorDiv(now, msNs), slices.Clone(bucket.LeasesOf(st))))
}

func testLeases(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	k := key(t, "a")
	const count, ttl = 3, 1_000
	var leases []string
	for i := range count {
		o := spend(t, src, base+int64(i)*msNs, acquireOp(k, count, ttl, 1, bucket.CheckAndSpend))[0]
		if !o.Allowed || o.Remaining != int64(count-1-i) || o.Lease == "" {
			t.Fatalf("acquire %d: %+v, want allowed with %d left and a lease", i, o.Decision, count-1-i)
		}
		leases = append(leases, o.Lease)
	}
	// Full: the next slot frees when the first lease ends, 1000 ms after
	// base, 2 ms from now.
	at := base + 2*msNs
	if o := spend(t, src, at, acquireOp(k, count, ttl, 1, bucket.CheckAndSpend))[0]; o.Allowed || o.Lease != "" || o.RetryIn != (ttl-2)*msNs || o.ResetIn != ttl*msNs {
		t.Fatalf("acquire on a full bucket: %+v, want denied, retry in %d ms, reset in %d ms", o.Decision, ttl-2, ttl)
	}
	if o := refund(t, src, at, leaseOp(k, count, ttl, leases[1], bucket.Release))[0]; !o.Allowed || o.Remaining != 1 {
		t.Fatalf("release: %+v, want allowed with 1 left", o.Decision)
	}
	if o := refund(t, src, at, leaseOp(k, count, ttl, leases[1], bucket.Release))[0]; o.Allowed || o.Remaining != 1 {
		t.Fatalf("release again: %+v, want not allowed (nothing released), 1 left", o.Decision)
	}
	// Renewed at base+500ms, the first lease ends at base+1500ms.
	if o := refund(t, src, base+500*msNs, leaseOp(k, count, ttl, leases[0], bucket.Renew))[0]; !o.Allowed || o.ResetIn != ttl*msNs {
		t.Fatalf("renew: %+v, want allowed, reset in %d ms", o.Decision, ttl)
	}
	// At base+1002ms the third lease has ended; the first is live.
	if o := spend(t, src, base+1_002*msNs, acquireOp(k, count, ttl, 0, bucket.CheckOnly))[0]; o.Remaining != 2 || o.ResetIn != 498*msNs {
		t.Fatalf("read after expiries: %+v, want 2 left, reset in 498 ms", o.Decision)
	}
	if o := refund(t, src, base+1_002*msNs, leaseOp(k, count, ttl, leases[2], bucket.Renew))[0]; o.Allowed {
		t.Fatalf("renew of an expired lease: %+v, want not renewed", o.Decision)
	}
	if o := spend(t, src, base+1_500*msNs, acquireOp(k, count, ttl, 0, bucket.CheckOnly))[0]; o.Remaining != count || o.ResetIn != 0 {
		t.Fatalf("read once every lease ended: %+v, want %d left, reset in 0", o.Decision, count)
	}
}

func testLeasesDeniedBatch(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	g, c := key(t, "g"), key(t, "c")
	spend(t, src, base, threePerSec.op(g, 3, bucket.CheckAndSpend))
	out := spend(t, src, base, threePerSec.op(g, 1, bucket.CheckAndSpend), acquireOp(c, 2, 1_000, 1, bucket.CheckAndSpend))
	if out[0].Allowed || !out[1].Allowed || out[1].Lease != "" || out[1].Remaining != 1 {
		t.Fatalf("denied batch: %+v, want the GCRA op denied, the acquire allowed as if written, no lease", out)
	}
	if o := spend(t, src, base, acquireOp(c, 2, 1_000, 1, bucket.CheckOnly))[0]; o.Remaining != 1 || o.Lease != "" {
		t.Fatalf("check after the denied batch and a check: %+v, want 1 left (no lease held), no lease", o.Decision)
	}
}

func testLeasesReset(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	a, b := key(t, "a"), key(t, "b")
	spend(t, src, base, acquireOp(a, 2, 1_000, 2, bucket.CheckAndSpend))
	ops := []bucket.Op{acquireOp(a, 2, 1_000, 0, bucket.CheckAndSpend), acquireOp(b, 2, 1_000, 0, bucket.CheckAndSpend)}
	n, err := src.Reset(context.Background(), base, ops)
	if err != nil || n != 1 {
		t.Fatalf("Reset = %d, %v; want 1 (only a held leases)", n, err)
	}
	if o := spend(t, src, base, acquireOp(a, 2, 1_000, 2, bucket.CheckAndSpend))[0]; !o.Allowed {
		t.Fatalf("acquire after reset: %+v, want allowed", o.Decision)
	}
}

func testLeasesOnce(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	k := key(t, "a")
	rec := record(t, "lease", "fp-lease", base)
	first, replayed := spendOnce(t, src, base, rec, acquireOp(k, 2, 60_000, 1, bucket.CheckAndSpend))
	if replayed || first[0].Lease == "" {
		t.Fatalf("first call: %+v, replayed %v; want a lease", first[0], replayed)
	}
	again, replayed := spendOnce(t, src, base+msNs, rec, acquireOp(k, 2, 60_000, 1, bucket.CheckAndSpend))
	if !replayed || again[0].Decision != first[0].Decision {
		t.Fatalf("replay: %+v, replayed %v; want %+v", again[0].Decision, replayed, first[0].Decision)
	}
	if o := spend(t, src, base+msNs, acquireOp(k, 2, 60_000, 0, bucket.CheckOnly))[0]; o.Remaining != 1 {
		t.Fatalf("after the replay: %d left, want 1 (the replay acquired nothing)", o.Remaining)
	}
}

// testLeasesMatchModel runs random acquires, releases and renewals of a
// few buckets, mixed with a GCRA bucket, and compares every decision with
// the model's.
func testLeasesMatchModel(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	rng := rand.New(rand.NewPCG(7, 11))
	model := Model{}
	keys := []string{key(t, "a"), key(t, "b"), key(t, "c")}
	held := map[string][]string{}
	now := base
	for step := range 600 {
		now += rng.Int64N(300) * msNs
		k := keys[rng.IntN(len(keys))]
		count := 1 + rng.Int64N(4)
		ttl := 200 + rng.Int64N(800)
		var ops []bucket.Op
		isRefund := rng.IntN(3) == 0 && len(held[k]) > 0
		if isRefund {
			lease := held[k][rng.IntN(len(held[k]))]
			ops = append(ops, leaseOp(k, count, ttl, lease, bucket.LeaseAction(rng.IntN(2))))
		} else {
			ops = append(ops, acquireOp(k, count, ttl, rng.Int64N(count+1), bucket.Mode(rng.IntN(3))))
			if rng.IntN(3) == 0 {
				ops = append(ops, tenPerSecond.op(key(t, "g"), 1+rng.Int64N(4), bucket.CheckAndSpend))
			}
		}
		var got []bucket.Outcome
		if isRefund {
			got = refund(t, src, now, ops...)
		} else {
			got = spend(t, src, now, ops...)
		}
		want := model.Apply(now, ops, isRefund)
		for i := range ops {
			if got[i].Decision != want[i].Decision {
				t.Fatalf("step %d (refund=%v) op %d %+v at %d:\n got %+v\nwant %+v", step, isRefund, i, ops[i], now, got[i].Decision, want[i].Decision)
			}
		}
		if l := got[0].Lease; l != "" {
			held[k] = append(held[k], l)
		}
	}
}

// testLeasesNoOvershoot has many goroutines acquire one slot each of a
// limit of 10 at the same instant: exactly 10 may hold one.
func testLeasesNoOvershoot(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	k := key(t, "a")
	const workers, perWorker, count = 32, 4, 10
	var allowed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]bucket.Outcome, 1)
			for range perWorker {
				ops := []bucket.Op{acquireOp(k, count, 60_000, 1, bucket.CheckAndSpend)}
				if err := src.Spend(context.Background(), base, ops, out); err != nil {
					errs <- err
					return
				}
				if out[0].Allowed {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Spend: %v", err)
	}
	if got := allowed.Load(); got != count {
		t.Fatalf("%d concurrent acquires allowed, want exactly %d", got, count)
	}
}

// A lease taken before 1970 (a fake clock set there) expires, renews and
// releases as any other: its expiry is negative unix ms.
func testLeasesBefore1970(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	k := key(t, "a")
	const count, ttl = 3, 10_000
	at := -3600 * 1000 * msNs // 1969-12-31T23:00:00Z
	o := spend(t, src, at, acquireOp(k, count, ttl, 1, bucket.CheckAndSpend))[0]
	if !o.Allowed || o.Remaining != count-1 || o.ResetIn != ttl*msNs || o.Lease == "" {
		t.Fatalf("acquire: %+v, want allowed, %d left, reset in %d ms, a lease", o.Decision, count-1, ttl)
	}
	lease := o.Lease
	at += 5_000 * msNs
	if o := spend(t, src, at, acquireOp(k, count, ttl, 0, bucket.CheckAndSpend))[0]; !o.Allowed || o.Remaining != count-1 || o.ResetIn != 5_000*msNs {
		t.Fatalf("a read 5 s later: %+v, want %d left, reset in 5000 ms", o.Decision, count-1)
	}
	if o := refund(t, src, at, leaseOp(k, count, ttl, lease, bucket.Renew))[0]; !o.Allowed || o.ResetIn != ttl*msNs {
		t.Fatalf("renew: %+v, want allowed, reset in %d ms", o.Decision, ttl)
	}
	if o := refund(t, src, at, leaseOp(k, count, ttl, lease, bucket.Release))[0]; !o.Allowed || o.Remaining != count {
		t.Fatalf("release: %+v, want allowed, %d left", o.Decision, count)
	}
	o = spend(t, src, at, acquireOp(k, count, ttl, 2, bucket.CheckAndSpend))[0]
	if !o.Allowed || o.Remaining != count-2 {
		t.Fatalf("acquire after the release: %+v, want allowed, %d left", o.Decision, count-2)
	}
	at += (ttl + 1) * msNs
	if o := spend(t, src, at, acquireOp(k, count, ttl, 0, bucket.CheckAndSpend))[0]; o.Remaining != count || o.ResetIn != 0 {
		t.Fatalf("a read after every lease expired: %+v, want %d left, no reset", o.Decision, count)
	}
}
