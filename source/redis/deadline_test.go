package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// A key's expiry is its value's deadline (deadline in lua/store.lua): for a
// TAT, the margin after it rounded up to a multiple of half the margin;
// for a window counter, the margin after the end of its counting. The fast
// path rewrites only the value of a key whose deadline stays (SET …
// KEEPTTL), so its PTTL keeps counting down from the write that set it;
// a write that moves the deadline sets the expiry anew. The times below
// are those of coalesceNow (unix ms 1,790,000,000,123) and the default
// margin of a minute (steps of 30 s).
func TestPackedSpendsKeepAnExpiryWhoseDeadlineStays(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src, _ := coalesceSource(t, srv)
	ctx := context.Background()
	p := testPipe(src, packKeys)
	fast := bucket.Op{EmissionInterval: int64(10 * time.Millisecond), BurstOffset: int64(time.Second), Cost: 1}
	// spendAt spends op at now in a packed call of two batches, as under
	// load (a call alone goes as a pack of one), and returns op's key's
	// PTTL after it.
	spendAt := func(t *testing.T, now int64, op bucket.Op) time.Duration {
		t.Helper()
		other := op
		other.Key = op.Key + ":other"
		var calls []*queued
		for _, o := range []bucket.Op{op, other} {
			keys, boxes, err := src.keys([]bucket.Op{o}, now)
			if err != nil {
				t.Fatal(err)
			}
			c := &scriptCall{op: opSpend, now: now, keys: keys, boxes: boxes, ops: []bucket.Op{o}}
			calls = append(calls, &queued{ctx: ctx, call: c, done: make(chan struct{})})
		}
		p.send(calls)
		for _, q := range calls {
			<-q.done
			if _, err := decode(q.call, q.reply, make([]bucket.State, 1)); q.err != nil || err != nil {
				t.Fatalf("packed spend: %v %v", q.err, err)
			}
		}
		ttl, err := src.client.PTTL(ctx, calls[0].call.keys[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		return ttl
	}
	// within allows for the real time the test takes: a PTTL counts down.
	within := func(t *testing.T, what string, ttl, want time.Duration) {
		t.Helper()
		if ttl > want || ttl < want-2*time.Second {
			t.Fatalf("%s: PTTL %v, want %v", what, ttl, want)
		}
	}
	sec := int64(time.Second)

	t.Run("gcra", func(t *testing.T) {
		op := fast
		op.Key = "deadline:gcra"
		// TAT unix ms 1,790,000,000,133; + 60 s, rounded up to 30 s steps:
		// deadline 1,790,000,070,000, 69.877 s after now.
		within(t, "first spend", spendAt(t, coalesceNow, op), 69877*time.Millisecond)
		// 5 s later the bucket is full again (and its key still there),
		// and the new TAT, now + 10 ms, has the same deadline: the PTTL
		// is not reset to 64.877 s.
		within(t, "spend 5 s later", spendAt(t, coalesceNow+5*sec, op), 69877*time.Millisecond)
		// 20 s later its deadline is 1,790,000,100,000: set anew.
		within(t, "spend 20 s later", spendAt(t, coalesceNow+20*sec, op), 79877*time.Millisecond)
		// A batch that writes nothing to a full bucket deletes its key.
		op.Cost = 0
		spendAt(t, coalesceNow+40*sec, op)
		if n, err := src.client.Exists(ctx, src.Key(op.Key)).Result(); err != nil || n != 0 {
			t.Fatalf("a full bucket's key is still there after a spend of 0 (%d, %v)", n, err)
		}
	})

	t.Run("window", func(t *testing.T) {
		op := winOp("deadline:window", false, 1)
		// Unix ms 1,790,000,000,123 is in the minute from
		// 1,789,999,980,000; a counter with hits there counts until
		// 1,790,000,100,000, its key the margin longer: 159.877 s on.
		within(t, "first spend", spendAt(t, coalesceNow, op), 159877*time.Millisecond)
		within(t, "spend 5 s later", spendAt(t, coalesceNow+5*sec, op), 159877*time.Millisecond)
		// 60 s later the window has moved on, and the deadline with it.
		within(t, "spend in the next window", spendAt(t, coalesceNow+60*sec, op), 159877*time.Millisecond)
	})

	t.Run("rate counter", func(t *testing.T) {
		op := bucket.Op{Key: "130:deadline", Algorithm: bucket.RateCounter, Rate: ratecounter.Limit{Window: 10, Rate: 100},
			Cost: 1, Box: "130:deadline", BoxUntil: coalesceNow + 60*sec}
		// A counter of second 1,790,000,000 counts until 60 s after it,
		// 1,790,000,060,000 unix ms: deadline 1,790,000,130,000 (+ 60 s,
		// rounded up to 30 s steps), 129.877 s on.
		within(t, "first spend", spendAt(t, coalesceNow, op), 129877*time.Millisecond)
		// Later seconds move the moment it stops counting, but up to
		// second 1,790,000,010 not its deadline.
		within(t, "spend 9 s later", spendAt(t, coalesceNow+9*sec, op), 129877*time.Millisecond)
		within(t, "spend 10 s later", spendAt(t, coalesceNow+10*sec, op), 129877*time.Millisecond)
		// At second 1,790,000,011 it moves to 1,790,000,160,000.
		within(t, "spend 11 s later", spendAt(t, coalesceNow+11*sec, op), 148877*time.Millisecond)
	})

	t.Run("box entry on a step boundary", func(t *testing.T) {
		// One hit a second: the second spend goes above and boxes the id
		// until unix ms 1,790,000,040,000, whose deadline (+ 60 s) is a
		// step boundary itself, 1,790,000,100,000: 99.877 s on, not a
		// step later.
		op := bucket.Op{Key: "131:boundary", Algorithm: bucket.RateCounter, Rate: ratecounter.Limit{Window: 1, Rate: 1},
			Cost: 1, Box: "131:boundary", BoxUntil: 1_790_000_040_000 * int64(time.Millisecond)}
		spendAt(t, coalesceNow, op)
		spendAt(t, coalesceNow, op)
		_, boxes, err := src.keys([]bucket.Op{op}, coalesceNow)
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := src.client.PTTL(ctx, boxes[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		within(t, "box entry", ttl, 99877*time.Millisecond)
	})

	t.Run("written with an exact expiry", func(t *testing.T) {
		// A key written as older versions write one, expiring exactly
		// ceil(TAT - now) + margin: 60.010 s. A spend whose deadline stays
		// keeps that expiry, which still outlives the new TAT (now + 20
		// ms) by more than the margin less a step: the expiry of a key
		// from before an upgrade is never shorter than that.
		op := fast
		op.Key = "deadline:exact"
		if err := src.client.Set(ctx, src.Key(op.Key), "1790000000133456789", 60010*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
		ttl := spendAt(t, coalesceNow, op)
		within(t, "spend of a key with an exact expiry", ttl, 60010*time.Millisecond)
		if floor := 20*time.Millisecond + time.Minute - 30*time.Second; ttl < floor {
			t.Fatalf("PTTL %v, below the new TAT plus the margin less a step (%v)", ttl, floor)
		}
	})
}

// A spend sent alone keeps an expiry whose deadline stays, and deletes
// nothing before writing a full bucket: in format v1 by the fast path (a
// pack of one), with SET … KEEPTTL; in v2, whose calls all take the
// general path (lua/batch.lua), by setting no expiry on the hash (no
// PEXPIRE).
func TestSingleSpendsKeepAnExpiryWhoseDeadlineStays(t *testing.T) {
	for _, groups := range []int{0, 4} {
		t.Run(fmt.Sprintf("groups %d", groups), func(t *testing.T) {
			srv := redistest.NewStandalone(t)
			src, err := New(Options{Addrs: []string{srv.Addr()}, Namespace: "single:", Groups: groups})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { src.Close() })
			ctx := context.Background()
			op := bucket.Op{Key: "a", EmissionInterval: int64(10 * time.Millisecond), BurstOffset: int64(time.Second), Cost: 1}
			spend := func(now int64) {
				t.Helper()
				out := make([]bucket.Outcome, 1)
				if err := src.Spend(ctx, now, []bucket.Op{op}, out); err != nil || !out[0].Allowed {
					t.Fatalf("spend: %+v %v", out[0], err)
				}
			}
			spend(coalesceNow)
			if err := src.client.ConfigResetStat(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			// 5 s later the bucket is full, and then not: the deadline of
			// both TATs is that of the first (see the packed test).
			spend(coalesceNow + 5*int64(time.Second))
			spend(coalesceNow + 5*int64(time.Second))
			stats, err := src.client.Info(ctx, "commandstats").Result()
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int{"set": 2, "psetex": 0, "del": 0}
			if groups > 0 {
				want = map[string]int{"hset": 2, "pexpire": 0, "hdel": 0}
			}
			for name, n := range want {
				if got := commandCalls(stats, name); got != n {
					t.Errorf("%d calls of %s, want %d:\n%s", got, name, n, stats)
				}
			}
			if groups == 0 {
				if ttl := src.client.PTTL(ctx, src.Key("a")).Val(); ttl > 69877*time.Millisecond || ttl < 67877*time.Millisecond {
					t.Errorf("PTTL %v, want 69.877 s, as the first spend set it", ttl)
				}
			}
		})
	}
}

// commandCalls reads a command's calls from INFO commandstats.
func commandCalls(stats, name string) int {
	for _, line := range strings.Split(stats, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+name+":calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// Work that must finish once begun (a give-back, a record's write) goes on
// past the caller's deadline, bounded by its own timeout, while the caller
// is answered at its deadline: a slow or hung master cannot hold the
// answer of a multi-slot batch past --source-timeout.
func TestFinishApartAnswersAtTheDeadline(t *testing.T) {
	s := &Source{rollbackTimeout: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	release, finished := make(chan struct{}), make(chan error, 1)
	answered := make(chan error, 1)
	go func() {
		answered <- s.finishApart(ctx, func(ctx context.Context) error {
			<-release
			finished <- ctx.Err()
			return nil
		})
	}()
	cancel() // the caller's deadline comes while the work is under way
	if err := <-answered; !errors.Is(err, context.Canceled) {
		t.Fatalf("finishApart = %v, want the caller's context error", err)
	}
	// Close waits for the work (here, what it waits on).
	waited := make(chan struct{})
	go func() { s.apart.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("the work in flight was not waited for")
	case <-time.After(10 * time.Millisecond):
	}
	close(release)
	<-waited
	if err := <-finished; err != nil {
		t.Errorf("the work's context ended with the caller's: %v", err)
	}
	// Work that ends in time gives its own answer.
	want := errors.New("refused")
	if err := s.finishApart(context.Background(), func(context.Context) error { return want }); err != want {
		t.Errorf("finishApart = %v, want the work's error", err)
	}
}

// Work that comes once Close has begun runs in its caller, so that
// Close's wait is never joined by more: a WaitGroup would panic.
func TestFinishApartAfterClose(t *testing.T) {
	s := &Source{rollbackTimeout: time.Minute}
	s.apartMu.Lock()
	s.closed = true
	s.apartMu.Unlock()
	ran := false
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.finishApart(ctx, func(ctx context.Context) error { ran = ctx.Err() == nil; return nil }); err != nil || !ran {
		t.Errorf("finishApart after Close: %v, ran %v; want the work run in the caller, to its end", err, ran)
	}
}

// Close while work is handed to finishApart from many callers: the work
// begun before Close is waited for, the rest runs in its caller, and the
// WaitGroup never gains work while it is waited on (it would panic, and
// the race detector would say so).
func TestFinishApartRacesClose(t *testing.T) {
	src, err := New(Options{Addrs: []string{redistest.Standalone(t).Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	var callers sync.WaitGroup
	var ran atomic.Int64
	for range 8 {
		callers.Add(1)
		go func() {
			defer callers.Done()
			for range 200 {
				_ = src.finishApart(context.Background(), func(context.Context) error { ran.Add(1); return nil })
			}
		}()
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	callers.Wait()
	if ran.Load() != 8*200 {
		t.Errorf("%d pieces of work ran, want %d", ran.Load(), 8*200)
	}
}
