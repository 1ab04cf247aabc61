package redis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/source/redis"
)

// callBudget is the deadline the fault tests give each call, as the
// Limiter's default --source-timeout does, and slack is how late past it
// an answer may come (the race detector and a busy machine included).
const (
	callBudget = 100 * time.Millisecond
	slack      = 150 * time.Millisecond
)

// spendWithin spends with a callBudget deadline and returns the error and
// how long the call took.
func spendWithin(src *redis.Source, at int64, op bucket.Op) (error, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), callBudget)
	defer cancel()
	start := time.Now()
	err := src.Spend(ctx, at, []bucket.Op{op}, make([]bucket.Outcome, 1))
	return err, time.Since(start)
}

// waitWorking polls until a spend succeeds again, within limit.
func waitWorking(t *testing.T, src *redis.Source, at int64, limit time.Duration) {
	t.Helper()
	waitWorkingOn(t, src, "probe", limit)
}

// waitWorkingOn polls until a spend on bucket succeeds, within limit.
func waitWorkingOn(t *testing.T, src *redis.Source, bucket string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err, _ := spendWithin(src, now, hourly(bucket, 0))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the source did not recover within %v: %v", limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Redis stopped: calls fail within their deadline, never hang, and Ping
// fails. Redis restarted on the same port: the same Source works again
// by itself (new connections, and the script reloaded after NOSCRIPT).
func TestFaultStopAndRestart(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src := newSource(t, redis.Options{Addrs: []string{srv.Addr()}, ReadTimeout: redis.DefaultTimeout})
	if err, _ := spendWithin(src, now, hourly("a", 1)); err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	for range 20 {
		err, took := spendWithin(src, now, hourly("a", 1))
		if err == nil {
			t.Fatal("a spend succeeded with Redis stopped")
		}
		if took > callBudget+slack {
			t.Fatalf("a spend with Redis stopped took %v, want at most %v", took, callBudget+slack)
		}
	}
	if err := src.Ping(context.Background()); err == nil {
		t.Fatal("Ping succeeded with Redis stopped")
	}
	srv.Start(t) // empty: no keys, no cached script
	waitWorking(t, src, now, 2*time.Second)
	if got := spend(t, src, now, hourly("a", 1))[0]; got.Remaining != 99 {
		t.Fatalf("after the restart: %+v, want a fresh bucket (Redis lost its data)", got)
	}
	if err := src.Ping(context.Background()); err != nil {
		t.Fatalf("Ping after the restart: %v", err)
	}
}

// Redis hanging (alive, accepting, not answering): calls give up at
// their deadline instead of waiting, and work again once it answers.
func TestFaultHangingRedis(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src := newSource(t, redis.Options{Addrs: []string{srv.Addr()}, ReadTimeout: redis.DefaultTimeout})
	spend(t, src, now, hourly("a", 1))
	srv.Pause(t)
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume(t)
		}
	}()
	for range 5 {
		err, took := spendWithin(src, now, hourly("a", 1))
		if err == nil {
			t.Fatal("a spend succeeded with Redis paused")
		}
		if took > callBudget+slack {
			t.Fatalf("a spend with Redis paused took %v, want at most %v", took, callBudget+slack)
		}
	}
	srv.Resume(t)
	resumed = true
	waitWorking(t, src, now, 2*time.Second)
	// Nothing spent while Redis hung was applied twice or lost: at most the
	// five attempts may have landed (a timed-out call may still run).
	if r := spend(t, src, now, hourly("a", 0))[0].Remaining; r > 99 || r < 94 {
		t.Fatalf("after the hang %d remaining, want 94..99", r)
	}
}

// The script cache flushed under a running source (SCRIPT FLUSH, or a
// failover to a replica that never saw the script): the next call loads
// it again transparently.
func TestScriptFlushIsTransparent(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src := newSource(t, redis.Options{Addrs: []string{srv.Addr()}})
	spend(t, src, now, hourly("a", 1))
	if _, err := redistest.Do(srv.Addr(), "SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	if got := spend(t, src, now, hourly("a", 1))[0]; got.Remaining != 98 {
		t.Fatalf("after SCRIPT FLUSH: %+v, want 98 remaining", got)
	}
}

// One cluster master hanging: calls on its slots fail within their
// deadline, calls on the other masters' slots go on working, and the
// hanging master's slots work again once it answers.
func TestFaultClusterMasterHanging(t *testing.T) {
	cl := redistest.NewCluster(t)
	opts := redis.Options{Addrs: cl.Addrs(), Cluster: true}
	src := newSource(t, opts)
	victim := cl.Servers[0]
	onVictim, elsewhere := bucketsApart(t, opts, victim.Addr(), false)
	spend(t, src, now, hourly(onVictim, 1), hourly(elsewhere, 1)) // connections to all
	victim.Pause(t)
	resumed := false
	defer func() {
		if !resumed {
			victim.Resume(t)
		}
	}()
	for range 3 {
		err, took := spendWithin(src, now, hourly(onVictim, 1))
		if err == nil {
			t.Fatal("a spend on a hanging master succeeded")
		}
		if took > callBudget+slack {
			t.Fatalf("a spend on a hanging master took %v, want at most %v", took, callBudget+slack)
		}
	}
	if err, _ := spendWithin(src, now, hourly(elsewhere, 1)); err != nil {
		t.Fatalf("a spend on a healthy master failed while another hangs: %v", err)
	}
	if err := src.Ping(context.Background()); err == nil {
		t.Fatal("Ping succeeded with a master hanging")
	}
	victim.Resume(t)
	resumed = true
	waitWorkingOn(t, src, onVictim, 2*time.Second)
}

// slotOwners returns what tells the address of the master that serves a
// slot.
func slotOwners(t *testing.T, opts redis.Options) func(slot int) string {
	t.Helper()
	slots, err := rawClient(t, opts).ClusterSlots(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return func(slot int) string {
		for _, r := range slots {
			if slot >= r.Start && slot <= r.End {
				return r.Nodes[0].Addr
			}
		}
		t.Fatalf("no node serves slot %d", slot)
		return ""
	}
}

// bucketsApart returns a bucket key whose slot the cluster master at addr
// serves, and one that another master serves; with before, one of a lower
// slot, which a call in parts sends first (addr must not serve slot 0).
func bucketsApart(t *testing.T, opts redis.Options, addr string, before bool) (on, elsewhere string) {
	t.Helper()
	owner := slotOwners(t, opts)
	for i := 0; on == "" || elsewhere == ""; i++ {
		b := fmt.Sprintf("b:%d", i)
		switch {
		case owner(redis.Slot(b)) == addr:
			on = b
		case !before || redis.Slot(b) < redis.Slot(on):
			elsewhere = b
		}
		if i > 100000 {
			t.Fatalf("no buckets apart around %s", addr)
		}
	}
	return on, elsewhere
}

// A refund or reset across slots whose part fails on a stopped master
// after another part took effect does not say it changed nothing: a retry
// would give back, or delete, the first part twice. A part that failed
// first, with nothing done, still says so.
func TestFaultClusterPartsBeforeAFailure(t *testing.T) {
	cl := redistest.NewCluster(t)
	opts := redis.Options{Addrs: cl.Addrs(), Cluster: true}
	src := newSource(t, opts)
	// The victim serves no low slot: a part of a low slot, elsewhere, is
	// sent first.
	last := slotOwners(t, opts)(16383)
	victim := cl.Servers[slices.IndexFunc(cl.Servers, func(s *redistest.Server) bool { return s.Addr() == last })]
	onVictim, elsewhere := bucketsApart(t, opts, victim.Addr(), true)
	spend(t, src, now, hourly(onVictim, 10), hourly(elsewhere, 10))
	victim.Stop(t)
	ctx := context.Background()
	read := func() int64 {
		op := hourly(elsewhere, 0)
		op.Mode = bucket.CheckOnly
		return spend(t, src, now, op)[0].Remaining
	}
	calls := map[string]func(a, b string) error{
		"refund": func(a, b string) error {
			return src.Refund(ctx, now, []bucket.Op{hourly(a, 1), hourly(b, 1)}, make([]bucket.Outcome, 2))
		},
		"reset": func(a, b string) error {
			_, err := src.Reset(ctx, now, []bucket.Op{hourly(a, 0), hourly(b, 0)})
			return err
		},
	}
	for name, call := range calls {
		for _, order := range [][2]string{{elsewhere, onVictim}, {onVictim, elsewhere}} {
			spend(t, src, now, hourly(elsewhere, 10))
			before := read()
			err := call(order[0], order[1])
			if err == nil {
				t.Fatalf("a %s with a part on a stopped master succeeded", name)
			}
			if applied := read() != before; applied == errors.Is(err, once.ErrNotApplied) {
				t.Errorf("%s of %v: %s's part applied %v, and the error (%v) says not applied %v", name, order, elsewhere, applied, err, errors.Is(err, once.ErrNotApplied))
			}
		}
	}
}

// At its maxmemory with the noeviction policy, Redis refuses the first
// command of a script that would grow its memory. The script writes only
// after it has read and decided every bucket of the batch, so a spend that
// must store fails whole, with an error (503 at the service) and nothing
// written, and answers that store nothing (checks, denied batches) are
// still given. In both key formats.
func TestOutOfMemory(t *testing.T) {
	for _, groups := range []int{0, 4} {
		t.Run(fmt.Sprintf("groups=%d", groups), func(t *testing.T) {
			srv := redistest.NewStandalone(t)
			opts := redis.Options{Addrs: []string{srv.Addr()}, Groups: groups}
			src := newSource(t, opts)
			c := rawClient(t, opts)
			spend(t, src, now, hourly("a", 1))
			before, _ := stored(t, c, src, "a")
			config := func(name, value string) {
				t.Helper()
				if _, err := redistest.Do(srv.Addr(), "CONFIG", "SET", name, value); err != nil {
					t.Fatal(err)
				}
			}
			config("maxmemory-policy", "noeviction")
			config("maxmemory", "1") // below what an empty Redis uses
			// one bucket alone (the script's fast path in format v1)
			if err := src.Spend(context.Background(), now, []bucket.Op{hourly("a", 1)}, make([]bucket.Outcome, 1)); err == nil || !strings.Contains(err.Error(), "OOM") {
				t.Fatalf("a spend of one bucket at maxmemory: %v, want Redis's OOM error", err)
			}
			out := make([]bucket.Outcome, 2)
			if err := src.Spend(context.Background(), now, []bucket.Op{hourly("a", 1), hourly("b", 1)}, out); err == nil || !strings.Contains(err.Error(), "OOM") {
				t.Fatalf("a spend at maxmemory: %v, want Redis's OOM error", err)
			}
			if v, _ := stored(t, c, src, "a"); v != before {
				t.Fatalf("bucket a holds %q after the refused batch, want %q as before", v, before)
			}
			if _, ok := stored(t, c, src, "b"); ok {
				t.Fatal("bucket b was stored by the refused batch")
			}
			check := hourly("a", 5)
			check.Mode = bucket.CheckOnly
			if got := spend(t, src, now, check)[0]; !got.Allowed || got.Remaining != 94 {
				t.Fatalf("a check of 5 at maxmemory: %+v, want allowed, 94 left after it", got)
			}
			config("maxmemory", "0")
			if got := spend(t, src, now, hourly("a", 1))[0]; !got.Allowed || got.Remaining != 98 {
				t.Fatalf("a spend once memory is free: %+v, want allowed with 98 left", got)
			}
		})
	}
}

// A master that dies and whose replica takes over: no redirect says so,
// since the dead master answers nothing. The calls its slots fail make
// the source read the slot map again at once, so they work on the new
// master within moments, not at the map's next periodic reload (five
// seconds; go-redis's own default is a minute), and without a Ping.
func TestFaultClusterFailover(t *testing.T) {
	cl := redistest.NewClusterWithReplicas(t)
	opts := redis.Options{Addrs: cl.Addrs()[:3], Cluster: true}
	src := newSource(t, opts)
	victim := cl.Servers[0]
	replica := cl.ReplicaOf(t, victim)
	var buckets []string
	for i := range 40 {
		buckets = append(buckets, fmt.Sprintf("f:%d", i))
	}
	for _, b := range buckets {
		spend(t, src, now, hourly(b, 1)) // connections to every master
	}
	victim.Stop(t)
	cl.TakeOver(t, replica)
	tookOver := time.Now()
	for _, b := range buckets {
		for {
			err, _ := spendWithin(src, now, hourly(b, 1))
			if err == nil {
				break
			}
			if time.Since(tookOver) > 2*time.Second {
				t.Fatalf("%s still fails %v after the replica took over: %v", b, time.Since(tookOver).Round(time.Millisecond), err)
			}
		}
	}
}

// A redis:// source pointed at a server in cluster mode would answer PING
// and then fail most calls (MOVED for the keys of the slots the node does
// not serve; CROSSSLOT for a packed call even where one master serves
// every slot): its ping fails, so /readyz says so, where a standalone
// server's passes.
func TestPingRefusesAClusterNodeAsStandalone(t *testing.T) {
	node := redistest.SharedCluster(t).Servers[0]
	src := newSource(t, redis.Options{Addrs: []string{node.Addr()}})
	if err := src.Ping(context.Background()); !errors.Is(err, redis.ErrClusterNode) {
		t.Errorf("Ping of a cluster node as a standalone server: %v, want ErrClusterNode", err)
	}
	// A cluster of one master serves every slot, but refuses a script
	// call whose keys span slots (CROSSSLOT), which this source packs.
	one := newSource(t, redis.Options{Addrs: []string{redistest.NewOneMasterCluster(t).Addr()}})
	if err := one.Ping(context.Background()); !errors.Is(err, redis.ErrClusterNode) {
		t.Errorf("Ping of a one-master cluster as a standalone server: %v, want ErrClusterNode", err)
	}
	standalone := newSource(t, redis.Options{Addrs: []string{redistest.Standalone(t).Addr()}})
	if err := standalone.Ping(context.Background()); err != nil {
		t.Errorf("Ping of a standalone server: %v", err)
	}
	// A connection refused in its setup (a database the server does not
	// have) runs neither command: that is the refusal, not cluster mode.
	nodb := newSource(t, redis.Options{Addrs: []string{redistest.Standalone(t).Addr()}, DB: 16})
	if err := nodb.Ping(context.Background()); err == nil || errors.Is(err, redis.ErrClusterNode) || !strings.Contains(err.Error(), "DB index") {
		t.Errorf("Ping of a standalone server's database 16 (of 0 to 15): %v, want the server's refusal", err)
	}
}
