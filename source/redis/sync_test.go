package redis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/limiter-dev/limiter/source/syncpush"

	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/window"
	"github.com/limiter-dev/limiter/source/redis"
)

// syncWindows runs one sync and fails the test on an error.
func syncWindows(t testing.TB, src *redis.Source, at int64, pushes []syncpush.Window) {
	t.Helper()
	if err := src.SyncWindows(context.Background(), at, pushes); err != nil {
		t.Fatalf("SyncWindows: %v", err)
	}
}

// Hits pushed by many processes at once add up exactly: 8 goroutines, each
// its own source (as separate processes would be), push 40 times to 30
// counters of a one-minute window, some hits to the current minute and
// some to the previous one. Every total read back is at least what that
// goroutine has pushed so far, and at the end a read-only push finds
// exactly the sums, and a sliding window decides from them.
func TestSyncWindowsAddUp(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			opts.Namespace = fmt.Sprintf("sync%x:", rand.Uint64())
			first := openSource(t, opts)
			const w = 60_000
			start := int64(minuteStart)
			at := msToNs(start + 15_000)
			keys := make([]string, 30)
			for i := range keys {
				keys[i] = fmt.Sprintf("s:%d", i)
			}
			const procs, rounds = 8, 40
			var wg sync.WaitGroup
			errs := make(chan error, procs)
			for p := range procs {
				src := first
				if p > 0 {
					src = openSource(t, opts)
				}
				wg.Go(func() {
					pushes := make([]syncpush.Window, len(keys))
					mine := make([]int64, len(keys))
					for r := range rounds {
						for i, k := range keys {
							hits := int64((p+r+i)%3 + 1)
							pushes[i] = syncpush.Window{Key: k, Period: w, Start: start, Hits: hits, PrevHits: int64(p % 2)}
							mine[i] += hits
						}
						if err := src.SyncWindows(context.Background(), at, pushes); err != nil {
							errs <- err
							return
						}
						for i, push := range pushes {
							if push.Total.Start != start || push.Total.Period != w || push.Total.Cur < mine[i] {
								errs <- fmt.Errorf("proc %d round %d: %s total %+v after %d of its own hits", p, r, keys[i], push.Total, mine[i])
								return
							}
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			reads := make([]syncpush.Window, len(keys))
			for i, k := range keys {
				reads[i] = syncpush.Window{Key: k, Period: w, Start: start}
			}
			syncWindows(t, first, at, reads)
			for i, r := range reads {
				var cur int64
				for p := range procs {
					for round := range rounds {
						cur += int64((p+round+i)%3 + 1)
					}
				}
				want := window.Counter{Period: w, Start: start, Cur: cur, Prev: rounds * procs / 2}
				if r.Total != want {
					t.Fatalf("%s: total %+v, want %+v", r.Key, r.Total, want)
				}
			}
			// A decision reads the same counter: count 10,000, so that the
			// hits fit.
			out := spend(t, first, at, windowOp(keys[0], false, 10_000, w, 0))[0]
			want := 10_000 - reads[0].Total.Cur - (reads[0].Total.Prev*45_000+w-1)/w
			if out.Remaining != want {
				t.Fatalf("a spend after the syncs: %+v, want %d remaining", out, want)
			}
		})
	}
}

// A push adds its hits where they still count: the counter rolls forward
// to the latest of its own window, the pushed one and the window of now;
// a previous window's hits land in the counter's previous count, and hits
// of older windows are dropped. A push with no hits only reads, and one
// of another period replaces the old period's counter.
func TestSyncWindowsRoll(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			c := rawClient(t, opts)
			const w = 60_000
			x := int64(minuteStart / w)
			minute := func(i int64) int64 { return (x + i) * w }
			push := func(atMinute, startMinute, hits, prev int64) window.Counter {
				t.Helper()
				p := []syncpush.Window{{Key: "r", Period: w, Start: minute(startMinute), Hits: hits, PrevHits: prev}}
				syncWindows(t, src, msToNs(minute(atMinute)+1234), p)
				return p[0].Total
			}
			storedIs := func(want string) {
				t.Helper()
				if v, _ := stored(t, c, src, "r"); v != want {
					t.Fatalf("stored %q, want %q", v, want)
				}
			}
			counter := func(i, cur, prev int64) window.Counter {
				return window.Counter{Period: w, Start: minute(i), Cur: cur, Prev: prev}
			}
			if got := push(0, 0, 5, 2); got != counter(0, 5, 2) {
				t.Fatalf("first push: %+v", got)
			}
			// A minute later, a process still pushing the old minute: its
			// hits become the previous minute's, and its previous ones are
			// too old to count.
			if got := push(1, 0, 3, 4); got != counter(1, 0, 8) {
				t.Fatalf("an old minute's push: %+v", got)
			}
			storedIs(fmt.Sprintf("%d:%d:0:8", w, x+1))
			if got := push(1, 1, 2, 1); got != counter(1, 2, 9) {
				t.Fatalf("the current minute's push: %+v", got)
			}
			// Nothing to add: only a read, nothing written.
			if got := push(1, 1, 0, 0); got != counter(1, 2, 9) {
				t.Fatalf("a read: %+v", got)
			}
			// Two minutes on, everything stored and pushed is too old.
			if got := push(3, 1, 7, 7); got != counter(3, 0, 0) {
				t.Fatalf("a push too old to count: %+v", got)
			}
			// A process whose clock is a minute ahead wrote the next
			// minute; a push of this minute counts as its previous one,
			// which the pushing process reads as its own minute's hits.
			push(4, 4, 6, 0)
			if got := push(3, 3, 1, 0); got != counter(3, 1, 0) {
				t.Fatalf("a push behind the stored minute reads (at its now) %+v", got)
			}
			storedIs(fmt.Sprintf("%d:%d:6:1", w, x+4))
			// Another period replaces the counter.
			p := []syncpush.Window{{Key: "r", Period: w / 2, Start: minute(4), Hits: 1}}
			syncWindows(t, src, msToNs(minute(4)), p)
			if want := (window.Counter{Period: w / 2, Start: minute(4), Cur: 1}); p[0].Total != want {
				t.Fatalf("another period: %+v, want %+v", p[0].Total, want)
			}
			storedIs(fmt.Sprintf("%d:%d:1:0", w/2, 2*(x+4)))
		})
	}
}

// A sync of more counters than one script call takes is cut into several
// calls, and every total comes back right.
func TestSyncWindowsManyCounters(t *testing.T) {
	for _, b := range []backend{backends[0], backends[1]} {
		t.Run(b.name, func(t *testing.T) {
			src := newSource(t, b.opts(t))
			at := msToNs(minuteStart)
			pushes := make([]syncpush.Window, 1000)
			for i := range pushes {
				pushes[i] = syncpush.Window{Key: fmt.Sprintf("m:%d", i), Period: 60_000, Start: minuteStart, Hits: int64(i%7 + 1)}
			}
			syncWindows(t, src, at, pushes)
			syncWindows(t, src, at, pushes)
			for i, p := range pushes {
				if p.Total.Cur != 2*int64(i%7+1) || p.Total.Prev != 0 {
					t.Fatalf("%s: %+v after two pushes of %d", p.Key, p.Total, i%7+1)
				}
			}
		})
	}
}

// A sync that certainly changed nothing says so (ErrNotApplied): an
// invalid push, a context already done, a Redis that refuses connections.
func TestSyncWindowsNotApplied(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src := newSource(t, redis.Options{Addrs: []string{srv.Addr()}})
	at := msToNs(minuteStart)
	good := syncpush.Window{Key: "a", Period: 60_000, Start: minuteStart, Hits: 1}
	for _, bad := range []syncpush.Window{
		{Key: "a", Period: 60_000, Start: minuteStart + 1, Hits: 1},
		{Key: "a", Period: 0, Start: 0, Hits: 1},
		{Key: "a", Period: 60_000, Start: minuteStart, Hits: -1},
		{Key: "a", Period: 60_000, Start: minuteStart, PrevHits: window.MaxProduct + 1},
	} {
		err := src.SyncWindows(context.Background(), at, []syncpush.Window{good, bad})
		if !errors.Is(err, ratelimits.ErrNotApplied) || !errors.Is(err, redis.ErrInvalidOp) {
			t.Errorf("push %+v: %v, want ErrNotApplied and ErrInvalidOp", bad, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := src.SyncWindows(ctx, at, []syncpush.Window{good}); !errors.Is(err, ratelimits.ErrNotApplied) {
		t.Errorf("a cancelled sync: %v, want ErrNotApplied", err)
	}
	p := []syncpush.Window{{Key: "a", Period: 60_000, Start: minuteStart}}
	syncWindows(t, src, at, p)
	if p[0].Total.Cur != 0 {
		t.Fatalf("after syncs that were not applied, the counter holds %+v", p[0].Total)
	}
	srv.Stop(t)
	if err := src.SyncWindows(context.Background(), at, []syncpush.Window{good}); !errors.Is(err, ratelimits.ErrNotApplied) {
		t.Errorf("a sync with Redis stopped: %v, want ErrNotApplied", err)
	}
}

// checkApplied fails the test unless exactly the pushes failed says are
// not Applied, and the applied ones read back their own hits.
func checkApplied(t *testing.T, pushes []syncpush.Window, failed func(i int) bool) {
	t.Helper()
	var applied, notApplied int
	for i, p := range pushes {
		switch {
		case failed(i) && p.Applied:
			t.Fatalf("push %d (%s) of a failed call is Applied", i, p.Key)
		case !failed(i) && !p.Applied:
			t.Fatalf("push %d (%s) of a call that succeeded is not Applied", i, p.Key)
		case p.Applied && (p.Total.Cur != p.Hits || p.Total.Start != p.Start):
			t.Fatalf("push %d (%s): total %+v after its %d hits", i, p.Key, p.Total, p.Hits)
		}
		if p.Applied {
			applied++
		} else {
			notApplied++
		}
	}
	if applied == 0 || notApplied == 0 {
		t.Fatalf("%d pushes applied and %d not: the test wants both", applied, notApplied)
	}
}

// A sync cut into several calls, one of which fails: the pushes of the
// calls that got their answer are Applied, with their totals, and the
// others are not; the error does not claim that nothing was applied. On
// one Redis, a counter's key holding a list breaks the second call of
// 256 counters; the first is applied.
func TestSyncWindowsPartlyApplied(t *testing.T) {
	opts := standalone(t)
	src := newSource(t, opts)
	c := rawClient(t, opts)
	pushes := make([]syncpush.Window, 600)
	for i := range pushes {
		pushes[i] = syncpush.Window{Key: fmt.Sprintf("p:%d", i), Period: 60_000, Start: minuteStart, Hits: int64(i%5 + 1), Applied: true}
	}
	if err := c.LPush(context.Background(), src.Key("p:300"), "not a counter").Err(); err != nil {
		t.Fatal(err)
	}
	err := src.SyncWindows(context.Background(), msToNs(minuteStart), pushes)
	if err == nil || errors.Is(err, ratelimits.ErrNotApplied) {
		t.Fatalf("a sync with one call failing: %v, want an error without ErrNotApplied", err)
	}
	checkApplied(t, pushes, func(i int) bool { return i >= 256 && i < 512 })
}

// On a cluster with one master stopped, the calls to the others are
// applied and those to the stopped one are not.
func TestSyncWindowsPartlyAppliedOnACluster(t *testing.T) {
	cl := redistest.NewCluster(t)
	opts := redis.Options{Addrs: cl.Addrs(), Cluster: true}
	src := newSource(t, opts)
	slots, err := rawClient(t, opts).ClusterSlots(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	victim := cl.Servers[0]
	onVictim := func(key string) bool {
		s := redis.Slot(src.Key(key))
		for _, r := range slots {
			if s >= r.Start && s <= r.End {
				return r.Nodes[0].Addr == victim.Addr()
			}
		}
		t.Fatalf("no node serves slot %d", s)
		return false
	}
	pushes := make([]syncpush.Window, 60)
	for i := range pushes {
		pushes[i] = syncpush.Window{Key: fmt.Sprintf("q:%d", i), Period: 60_000, Start: minuteStart, Hits: int64(i%5 + 1)}
	}
	syncWindows(t, src, msToNs(minuteStart), []syncpush.Window{{Key: "q:0", Period: 60_000, Start: minuteStart}}) // connections up
	victim.Stop(t)
	err = src.SyncWindows(context.Background(), msToNs(minuteStart), pushes)
	if err == nil || errors.Is(err, ratelimits.ErrNotApplied) {
		t.Fatalf("a sync with a master stopped: %v, want an error without ErrNotApplied", err)
	}
	checkApplied(t, pushes, func(i int) bool { return onVictim(pushes[i].Key) })
}
