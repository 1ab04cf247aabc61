package redis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/concurrency"
	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/source/redis"
)

// acquire is an acquire of one slot of a concurrency limit of count
// slots whose leases live ttl ms, with a fresh lease id.
func acquire(key string, count, ttl int64) bucket.Op {
	return bucket.Op{
		Key: key, Algorithm: bucket.Concurrency, Lease: concurrency.Limit{Count: count, TTL: ttl},
		LeaseID: concurrency.NewID(), Cost: 1,
	}
}

// release releases lease of a limit of count slots.
func release(key string, count, ttl int64, lease string) bucket.Op {
	return bucket.Op{
		Key: key, Algorithm: bucket.Concurrency, Lease: concurrency.Limit{Count: count, TTL: ttl},
		LeaseID: lease, LeaseAction: bucket.Release,
	}
}

// storedLeases returns how many leases Redis holds for bucket, and the
// slots they take, by reading its lease set.
func storedLeases(t *testing.T, v string) (n, slots int) {
	t.Helper()
	if v == "" {
		return 0, 0
	}
	if !strings.HasPrefix(v, "L") {
		t.Fatalf("a lease set %q", v)
	}
	for _, l := range strings.Split(v[1:], ",") {
		var id string
		var cost, exp int64
		if _, err := fmt.Sscanf(strings.ReplaceAll(l, ":", " "), "%s %d %d", &id, &cost, &exp); err != nil || !concurrency.ValidID(id) {
			t.Fatalf("a lease %q in %q: %v", l, v, err)
		}
		n, slots = n+1, slots+int(cost)
	}
	return n, slots
}

// Four sources on one Redis (as four limiter processes would be) and 64
// goroutines acquire slots of one limit of 5, each releasing its leases at
// random. Whatever the interleaving, the leases held never exceed 5: the
// acquires allowed less the releases made never do, every release finds
// its lease, and once all is done the lease set Redis holds is exactly
// the leases not released.
func TestLeasesSeveralSourcesNeverExceedCount(t *testing.T) {
	for _, b := range []backend{backends[0], backends[1], backends[2]} {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			opts.Namespace = fmt.Sprintf("t%x:", rand.Uint64())
			var sources [4]*redis.Source
			for i := range sources {
				sources[i] = openSource(t, opts)
			}
			const count, ttl, workers, rounds = 5, 600_000, 64, 40
			var held, peak, allowed atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			left := make(chan []string, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					src := sources[w%len(sources)]
					rng := rand.New(rand.NewPCG(uint64(w), 1))
					var mine []string
					ctx := context.Background()
					out := make([]bucket.Outcome, 1)
					for r := range rounds {
						at := now + int64(r)*int64(time.Millisecond)
						if len(mine) > 0 && rng.IntN(2) == 0 {
							i := rng.IntN(len(mine))
							lease := mine[i]
							mine = append(mine[:i], mine[i+1:]...)
							held.Add(-1) // before the release: held never counts a lease Redis no longer has
							if err := src.Refund(ctx, at, []bucket.Op{release("c:x", count, ttl, lease)}, out); err != nil {
								errs <- err
								return
							}
							if !out[0].Allowed {
								errs <- fmt.Errorf("release of a held lease %s: %+v", lease, out[0].Decision)
								return
							}
							continue
						}
						if err := src.Spend(ctx, at, []bucket.Op{acquire("c:x", count, ttl)}, out); err != nil {
							errs <- err
							return
						}
						if out[0].Allowed {
							allowed.Add(1)
							h := held.Add(1) // after the acquire: held never counts a lease Redis has not
							for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
							}
							mine = append(mine, out[0].Lease)
						}
					}
					left <- mine
				}()
			}
			wg.Wait()
			close(errs)
			close(left)
			for err := range errs {
				t.Fatal(err)
			}
			remaining := 0
			for m := range left {
				remaining += len(m)
			}
			if p := peak.Load(); p > count {
				t.Fatalf("%d leases held at once, count %d", p, count)
			}
			v, _ := stored(t, rawClient(t, opts), sources[0], "c:x")
			if n, slots := storedLeases(t, v); n != remaining || slots != remaining || int64(remaining) != held.Load() {
				t.Fatalf("Redis holds %d leases (%d slots), the workers %d, held %d", n, slots, remaining, held.Load())
			}
			if allowed.Load() < count {
				t.Fatalf("only %d acquires allowed", allowed.Load())
			}
			t.Logf("%d acquires allowed, peak %d held, %d left", allowed.Load(), peak.Load(), remaining)
		})
	}
}

// A lease set is stored as "L<id>:<cost>:<exp>,…" and its key (in format
// v2, its hash) expires margin after its latest lease, counted from the
// now passed in; releasing the last lease deletes it.
func TestLeaseSetExpiresAfterLatestLease(t *testing.T) {
	for _, b := range standalones {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			opts.ExpiryMargin = 7 * time.Second
			src := newSource(t, opts)
			c := rawClient(t, opts)
			ctx := context.Background()
			a := spend(t, src, now, acquire("c:a", 3, 10_000))[0]
			later := spend(t, src, now+int64(time.Second), acquire("c:a", 3, 10_000))[0]
			exp := now/int64(time.Millisecond) + 10_000
			want := fmt.Sprintf("L%s:1:%d,%s:1:%d", a.Lease, exp, later.Lease, exp+1000)
			if v, ok := stored(t, c, src, "c:a"); !ok || v != want {
				t.Fatalf("stored %q (%v), want %q", v, ok, want)
			}
			// The latest lease ends 10 s after now + 1 s, the key 7 s later.
			ttl, err := c.PTTL(ctx, src.Key("c:a")).Result()
			if wantTTL := 17 * time.Second; err != nil || ttl > wantTTL || ttl < wantTTL-2*time.Second {
				t.Fatalf("PTTL %v (%v), want %v", ttl, err, wantTTL)
			}
			for _, l := range []string{a.Lease, later.Lease} {
				if o := refund(t, src, now+int64(time.Second), release("c:a", 3, 10_000, l))[0]; !o.Allowed {
					t.Fatalf("release %s: %+v", l, o.Decision)
				}
			}
			if v, ok := stored(t, c, src, "c:a"); ok {
				t.Fatalf("a lease set of no lease is stored: %q", v)
			}
		})
	}
}

// In format v2 the sweep of a hash tells a lease set from the other
// values: one whose leases have all expired goes, a live one stays as it
// was, and a foreign value is left alone.
func TestSweepDropsExpiredLeaseSets(t *testing.T) {
	src, c, hash := oneHash(t)
	if err := c.HSet(context.Background(), hash, "foreign", "L not a lease set").Err(); err != nil {
		t.Fatal(err)
	}
	short := spend(t, src, now, acquire("c:short", 2, 1_000))[0]
	long := spend(t, src, now, acquire("c:long", 2, 86_400_000))[0]
	keep, _ := stored(t, c, src, "c:long")
	at := now + int64(2*time.Second) // short's lease has expired
	for i := range 40 {              // past the first sweep at 32 fields
		spend(t, src, at, perSecond(fmt.Sprintf("a:%d", i)))
	}
	if v, ok := stored(t, c, src, "c:short"); ok {
		t.Fatalf("an expired lease set (lease %s) was not swept: %q", short.Lease, v)
	}
	if v, ok := stored(t, c, src, "c:long"); !ok || v != keep || !strings.Contains(v, long.Lease) {
		t.Fatalf("a live lease set holds %q (%v) after the sweep, want %q", v, ok, keep)
	}
	if v, err := c.HGet(context.Background(), hash, "foreign").Result(); err != nil || v != "L not a lease set" {
		t.Fatalf("a foreign field starting with L holds %q (%v) after the sweep", v, err)
	}
}

// A limit whose algorithm changed reads the other's value as empty: an
// acquire a TAT or a window counter, a GCRA or window spend a lease set.
func TestLeaseSetAndOtherAlgorithms(t *testing.T) {
	for _, b := range standalones {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			c := rawClient(t, opts)
			storeRaw(t, c, src, "c:tat", fmt.Sprint(now+int64(time.Hour)))
			storeRaw(t, c, src, "c:win", "60000:29833334:17:40")
			for _, k := range []string{"c:tat", "c:win"} {
				if o := spend(t, src, now, acquire(k, 2, 1_000))[0]; !o.Allowed || o.Remaining != 1 {
					t.Fatalf("acquire over %s: %+v, want allowed with 1 left", k, o.Decision)
				}
			}
			if o := spend(t, src, now, hourly("c:tat", 1))[0]; !o.Allowed || o.Remaining != 99 {
				t.Fatalf("GCRA spend over a lease set: %+v, want a bucket read as full", o.Decision)
			}
			if o := spend(t, src, now, perMinute("c:win", 1))[0]; !o.Allowed || o.Remaining != 99 {
				t.Fatalf("window spend over a lease set: %+v, want an empty counter", o.Decision)
			}
			// A reset counts a TAT under a concurrency op as no lease.
			storeRaw(t, c, src, "c:reset", fmt.Sprint(now+int64(time.Hour)))
			if n, err := src.Reset(context.Background(), now, []bucket.Op{acquire("c:reset", 2, 1_000)}); err != nil || n != 0 {
				t.Fatalf("Reset over a TAT = %d, %v; want 0", n, err)
			}
		})
	}
}

// An op the source refuses before sending anything certainly changed
// nothing: its error says so (once.ErrNotApplied).
func TestInvalidLeaseOpIsNotApplied(t *testing.T) {
	src := newSource(t, standalone(t))
	bad := []bucket.Op{
		func() bucket.Op { op := acquire("c:x", 2, 1_000); op.LeaseID = "NOT-AN-ID"; return op }(),
		func() bucket.Op { op := acquire("c:x", 2, 1_000); op.Cost = 3; return op }(),
		func() bucket.Op { op := acquire("c:x", 0, 1_000); op.Cost = 0; return op }(),
		func() bucket.Op { op := acquire("c:x", 2, 0); return op }(),
		func() bucket.Op { op := acquire("c:x", 2, 1_000); op.Box = "c:x"; return op }(),
	}
	out := make([]bucket.Outcome, 1)
	for _, op := range bad {
		err := src.Spend(context.Background(), now, []bucket.Op{op}, out)
		if !errors.Is(err, redis.ErrInvalidOp) || !errors.Is(err, once.ErrNotApplied) {
			t.Errorf("Spend of %+v: %v, want ErrInvalidOp and ErrNotApplied", op, err)
		}
	}
}
