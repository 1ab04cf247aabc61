package redis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/source/redis"
	"github.com/limiter-dev/limiter/topdenied"
)

// Two processes sharing a Redis each answer the fleet's top list: the
// merge of both pushes, an id denied by both summed. A process whose push
// expired drops out.
func TestTopListsAcrossProcesses(t *testing.T) {
	for _, b := range []struct {
		name string
		opts redis.Options
	}{
		{"Standalone", redis.Options{Addrs: []string{redistest.Standalone(t).Addr()}}},
		{"Cluster", redis.Options{Addrs: redistest.SharedCluster(t).Addrs(), Cluster: true}},
	} {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			opts := b.opts
			opts.Namespace = fmt.Sprintf("t%x:", rand.Uint64()) // both processes' store, the test's own
			a := openSource(t, opts)
			clk := clock.NewFake()
			clk.Set(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
			ra, rb := topdenied.New(clk), topdenied.New(clk)
			fa := topdenied.NewFleet(ra, a, "a", time.Minute)
			fb := topdenied.NewFleet(rb, a, "b", 300*time.Millisecond)
			for range 3 {
				ra.Denied("L", "mallory")
			}
			rb.Denied("L", "mallory")
			rb.Denied("L", "eve")
			if err := fa.Push(ctx); err != nil {
				t.Fatal(err)
			}
			if err := fb.Push(ctx); err != nil {
				t.Fatal(err)
			}
			ra.Denied("L", "alice") // not pushed yet: a's own answer shows it, b's not
			want := map[string][]topdenied.Entry{
				"a": {{Limit: "L", ID: "mallory", Denied: 4}, {Limit: "L", ID: "alice", Denied: 1}, {Limit: "L", ID: "eve", Denied: 1}},
				"b": {{Limit: "L", ID: "mallory", Denied: 4}, {Limit: "L", ID: "eve", Denied: 1}},
			}
			for name, f := range map[string]*topdenied.Fleet{"a": fa, "b": fb} {
				got, err := f.Top(ctx, "L", topdenied.Window5m)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want[name]) {
					t.Fatalf("%s: %v, want %v", name, got, want[name])
				}
				for i := range got {
					if got[i] != want[name][i] {
						t.Errorf("%s: %v, want %v", name, got, want[name])
					}
				}
			}
			if b.name != "Standalone" {
				return
			}
			// b's push expires in Redis's own time: its key has a TTL no
			// longer than b's, and once it is gone b drops out.
			addr, key := b.opts.Addrs[0], redis.KeyPrefix+opts.Namespace+"{top}:p:b"
			if ttl, err := redistest.Do(addr, "PTTL", key); err != nil || ttl == "-1" || ttl == "-2" {
				t.Fatalf("PTTL %s = %s, %v; want an expiry", key, ttl, err)
			}
			if _, err := redistest.Do(addr, "DEL", key); err != nil {
				t.Fatal(err)
			}
			got, err := fa.Top(ctx, "", topdenied.Window5m)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0].Denied != 3 {
				t.Fatalf("after b's push expired: %v, want a's own alone", got)
			}
			raw, err := a.PullTops(ctx)
			if err != nil || len(raw) != 1 {
				t.Fatalf("pull after expiry: %d payloads, %v; want a's alone", len(raw), err)
			}
		})
	}
}

// A payload beyond the bound is refused, not stored.
func TestTopPushBounded(t *testing.T) {
	src := newSource(t, redis.Options{Addrs: []string{redistest.Standalone(t).Addr()}})
	if err := src.PushTop(context.Background(), "big", make([]byte, 5<<20), time.Minute); err == nil {
		t.Fatal("a 5 MiB push was accepted")
	}
}
