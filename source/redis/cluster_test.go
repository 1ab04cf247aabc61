package redis_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/source/redis"
)

// bucketsInSlots returns n bucket keys in n different hash slots, in
// ascending slot order (the order a multi-slot batch is applied in).
func bucketsInSlots(n int) []string {
	var out []string
	last := -1
	for i := 0; len(out) < n; i++ {
		b := fmt.Sprintf("b:%d", i)
		if s := redis.Slot(b); s > last+500 {
			out, last = append(out, b), s
		}
	}
	return out
}

// A batch denied in a later slot gives back what its earlier slot took:
// the buckets are exactly as before, stored TATs and absent keys alike,
// and spend-only ops are given back too.
func TestClusterDeniedBatchLeavesNoTrace(t *testing.T) {
	opts := cluster(t)
	src := newSource(t, opts)
	c := rawClient(t, opts)
	ctx := context.Background()
	b := bucketsInSlots(4)
	first, fresh, spendOnly, last := b[0], b[1], b[2], b[3]
	spend(t, src, now, hourly(first, 7))
	spend(t, src, now, hourly(last, 100)) // empty: the batch will be denied here
	before, err := c.Get(ctx, src.Key(first)).Result()
	if err != nil {
		t.Fatal(err)
	}
	so := hourly(spendOnly, 5)
	so.Mode = bucket.SpendOnly
	out := spend(t, src, now, hourly(first, 3), hourly(fresh, 4), so, hourly(last, 1))
	if !out[0].Allowed || !out[1].Allowed || !out[2].Allowed || out[3].Allowed {
		t.Fatalf("outcomes %+v: want the first three allowed, the last denied", out)
	}
	for i, o := range out {
		if o.Write {
			t.Fatalf("op %d of a denied batch marked written", i)
		}
	}
	if after, _ := c.Get(ctx, src.Key(first)).Result(); after != before {
		t.Fatalf("first bucket %q after the denied batch, want %q as before", after, before)
	}
	for _, k := range []string{fresh, spendOnly} {
		if n, _ := c.Exists(ctx, src.Key(k)).Result(); n != 0 {
			t.Fatalf("bucket %s was full before the denied batch but is stored after it", k)
		}
	}
	// The same batch, the empty bucket first: nothing after it is written.
	out = spend(t, src, now, hourly(last, 1), hourly(first, 3))
	if out[0].Allowed || !out[1].Allowed {
		t.Fatalf("outcomes %+v", out)
	}
	if after, _ := c.Get(ctx, src.Key(first)).Result(); after != before {
		t.Fatalf("first bucket %q after the second denied batch, want %q", after, before)
	}
}

// An allowed batch across slots is written in every slot, with the same
// outcomes as the gcra functions give on the same TATs.
func TestClusterAllowedBatchAcrossSlots(t *testing.T) {
	src := newSource(t, cluster(t))
	b := bucketsInSlots(3)
	spend(t, src, now, hourly(b[1], 10))
	out := spend(t, src, now, hourly(b[2], 1), hourly(b[1], 2), hourly(b[0], 3))
	for i, want := range []int64{99, 88, 97} {
		if !out[i].Allowed || !out[i].Write || out[i].Remaining != want {
			t.Fatalf("op %d: %+v, want allowed, written, %d remaining", i, out[i], want)
		}
	}
	got := refund(t, src, now, hourly(b[0], 3), hourly(b[1], 12), hourly(b[2], 0))
	if !got[0].Allowed || got[0].Remaining != 100 || !got[1].Allowed || got[1].Remaining != 100 || got[2].Allowed {
		t.Fatalf("refund across slots: %+v", got)
	}
	if n, err := src.Reset(context.Background(), now, redis.ResetOps(b[0], b[1], b[2])); err != nil || n != 1 {
		t.Fatalf("Reset across slots = %d, %v; want 1 (only the third bucket was not full)", n, err)
	}
}

// 48 goroutines spend cost 1 on a batch of three buckets in three slots,
// each of burst 100: exactly 100 batches are allowed, and every bucket
// ends empty (no token lost to a give-back, none taken twice).
func TestClusterNoOvershootAcrossSlots(t *testing.T) {
	src := newSource(t, cluster(t))
	b := bucketsInSlots(3)
	ops := []bucket.Op{hourly(b[2], 1), hourly(b[0], 1), hourly(b[1], 1)}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 48)
	for range 48 {
		wg.Go(func() {
			out := make([]bucket.Outcome, len(ops))
			for range 5 {
				if err := src.Spend(context.Background(), now, ops, out); err != nil {
					errs <- err
					return
				}
				if out[0].Allowed && out[1].Allowed && out[2].Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := allowed.Load(); got != 100 {
		t.Fatalf("%d batches allowed, want exactly 100", got)
	}
	for _, k := range b[:3] {
		check := hourly(k, 0)
		check.Mode = bucket.CheckOnly
		if r := spend(t, src, now, check)[0].Remaining; r != 0 {
			t.Fatalf("bucket %s has %d remaining, want 0", k, r)
		}
	}
}

// A slot moves from one master to another (IMPORTING, MIGRATING, MIGRATE
// of its keys, SETSLOT NODE: what redis-cli --cluster reshard does) while
// eight callers spend on a bucket in it and on buckets of the same master
// in other slots, so that calls are packed with the moving key, answered
// ASK, then MOVED. No spend is lost or counted twice: the tokens taken
// and the tokens left add up to the burst.
func TestClusterSlotMigrationUnderLoad(t *testing.T) {
	cl := redistest.NewCluster(t)
	ctx := context.Background()
	nodes := map[string]*goredis.Client{}
	for _, s := range cl.Servers {
		c := goredis.NewClient(&goredis.Options{Addr: s.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		nodes[s.Addr()] = c
	}
	// Both key formats, one after the other on the same cluster: each
	// source has a namespace of its own, so each moves a slot of its own.
	for _, groups := range []int{0, 1024} {
		t.Run(fmt.Sprintf("groups=%d", groups), func(t *testing.T) {
			src := newSource(t, redis.Options{Addrs: cl.Addrs(), Cluster: true, Groups: groups})
			masterOf := func(bucket string) string {
				t.Helper()
				slots, err := nodes[cl.Servers[0].Addr()].ClusterSlots(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				slot := int(redis.Slot(src.Key(bucket)))
				for _, r := range slots {
					if slot >= r.Start && slot <= r.End {
						return r.Nodes[0].Addr
					}
				}
				t.Fatalf("no master serves slot %d", slot)
				return ""
			}
			const moving = "m:0"
			slot := int(redis.Slot(src.Key(moving)))
			from := masterOf(moving)
			var to string
			for addr := range nodes {
				if addr != from {
					to = addr
					break
				}
			}
			var neighbours []string
			for i := 1; len(neighbours) < 5; i++ {
				b := fmt.Sprintf("m:%d", i)
				if int(redis.Slot(src.Key(b))) != slot && masterOf(b) == from {
					neighbours = append(neighbours, b)
				}
			}
			id := func(addr string) string {
				t.Helper()
				s, err := nodes[addr].Do(ctx, "CLUSTER", "MYID").Text()
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			fromID, toID := id(from), id(to)

			var allowed, failed, attempts atomic.Int64
			var migrated atomic.Bool
			started := make(chan struct{})
			var once sync.Once
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					after := 0
					for i := 0; after < 20; i++ {
						if migrated.Load() {
							after++
						}
						out := make([]bucket.Outcome, 1)
						if err := src.Spend(ctx, now, []bucket.Op{hourly(moving, 1)}, out); err != nil {
							if failed.Add(1) <= 3 {
								t.Logf("spend during the move: %v", err)
							}
						} else if out[0].Allowed {
							allowed.Add(1)
						}
						_ = src.Spend(ctx, now, []bucket.Op{hourly(neighbours[(g+i)%len(neighbours)], 0)}, out)
						if attempts.Add(1) == 40 {
							once.Do(func() { close(started) })
						}
					}
				})
			}
			<-started
			do := func(addr string, args ...any) {
				t.Helper()
				if err := nodes[addr].Do(ctx, args...).Err(); err != nil {
					t.Fatalf("%v on %s: %v", args, addr, err)
				}
			}
			do(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID)
			do(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID)
			host, port, _ := net.SplitHostPort(to)
			for {
				keys, err := nodes[from].ClusterGetKeysInSlot(ctx, slot, 10).Result()
				if err != nil {
					t.Fatal(err)
				}
				if len(keys) == 0 {
					break
				}
				for _, k := range keys {
					do(from, "MIGRATE", host, port, k, 0, 5000)
				}
			}
			// The new owner first, then the old one, then the rest, as redis-cli
			// does: the other way round, the old owner answers MOVED to a node that
			// still sends callers back, until the client gives up.
			do(to, "CLUSTER", "SETSLOT", slot, "NODE", toID)
			do(from, "CLUSTER", "SETSLOT", slot, "NODE", toID)
			for addr := range nodes {
				if addr != to && addr != from {
					do(addr, "CLUSTER", "SETSLOT", slot, "NODE", toID)
				}
			}
			migrated.Store(true)
			wg.Wait()

			if n, err := nodes[to].Exists(ctx, src.Key(moving)).Result(); err != nil || n != 1 {
				t.Fatalf("the bucket is not on its new master (exists=%d, %v)", n, err)
			}
			// Every call is answered: a call sent to the slot's old master is sent
			// again through the cluster client, which follows the redirect.
			if n := failed.Load(); n != 0 {
				t.Errorf("%d spends failed during the move, want 0", n)
			}
			out := spend(t, src, now, hourly(moving, 0))
			if got := allowed.Load() + out[0].Remaining; got != 100 {
				t.Fatalf("%d spends allowed and %d tokens left: %d, want the burst of 100 (%d calls failed)",
					allowed.Load(), out[0].Remaining, got, failed.Load())
			}
			t.Logf("%d attempts, %d allowed, %d failed during the move", attempts.Load(), allowed.Load(), failed.Load())
		})
	}
}
