package memory_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/source/memory"
)

// Many goroutines calling check_rate on one entry at one instant count
// every hit exactly once: with a limit of 600 hits a minute, the 600 first
// calls to reach the source are within it and every later one goes above
// it, so exactly calls − 600 answer above, and exactly as many answer
// penalized (the first above boxes the entry for all that follow).
func TestConcurrentCheckRateCountsExactly(t *testing.T) {
	src := memory.New(0)
	const workers, perWorker = 16, 200
	const limit = 10 // hits a second over 60 seconds: 600
	var above, penalized atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := checkRate("130:192.0.2.1", 1, 60, limit, "130:192.0.2.1", now+5*minute, 0)
			for range perWorker {
				var res bucket.CallResult
				if err := src.Call(context.Background(), now, c, &res); err != nil {
					t.Error(err)
					return
				}
				if res.Above[0] {
					above.Add(1)
				}
				if res.Expires > now {
					penalized.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	const calls = workers * perWorker
	if got := hits60(t, src, now, "130:192.0.2.1"); got != calls {
		t.Fatalf("%d hits counted, want %d", got, calls)
	}
	if above.Load() != calls-600 || penalized.Load() != calls-600 {
		t.Fatalf("%d calls above and %d penalized, want %d each", above.Load(), penalized.Load(), calls-600)
	}
}

// Calls and batches that span several names and shards, in every order,
// run concurrently with resets and never deadlock, and each is one atomic
// step: the hits of every counter add up exactly.
func TestCallsAcrossNamesDoNotDeadlock(t *testing.T) {
	src := memory.New(1000)
	names := []string{"130", "131", "132"}
	const workers, perWorker = 8, 400
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, b, c := workerNames(names, w)
			for i := range perWorker {
				id := i % 4
				key := func(n string) string { return fmt.Sprintf("%s:%d", n, id) }
				// check_rates on two names, the box in the third.
				cl := &bucket.Call{
					Counters: []bucket.CounterCheck{
						{Key: key(a), Delta: 1, Limit: ratecounter.Limit{Window: 60, Rate: 10}},
						{Key: key(b), Delta: 1, Limit: ratecounter.Limit{Window: 60, Rate: 10}},
					},
					Box: key(c), Action: bucket.BoxWhenAbove, Until: now + minute,
				}
				var res bucket.CallResult
				if err := src.Call(context.Background(), now, cl, &res); err != nil {
					t.Error(err)
					return
				}
				// A batch of GCRA buckets in several shards, with boxes, and
				// rate counters of two names, each spent with cost 1.
				ops := []bucket.Op{
					penalised(hourly(fmt.Sprintf("7:%d:%d", w, i), 1), now, minute),
					rateOp(key(b), 1, now, 0),
					penalised(hourly(fmt.Sprintf("8:%d", i%16), 1), now, minute),
					rateOp(key(c), 1, now, 0),
				}
				batch(t, src, now, false, ops...)
				if i%50 == 0 {
					// Reset names no counter of the test uses, with boxes.
					if _, err := src.Reset(context.Background(), now, []bucket.Op{rateOp(key("140"), 0, now, 0), penalised(hourly("9:x", 0), now, minute)}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("calls across names did not finish in 60 s: deadlock")
	}
	// Each iteration of a worker adds one hit to the entries of a and b
	// by its call, and one to those of b and c by its batch.
	want := map[string]int64{}
	for w := range workers {
		a, b, c := workerNames(names, w)
		for i := range perWorker {
			id := i % 4
			want[fmt.Sprintf("%s:%d", a, id)]++
			want[fmt.Sprintf("%s:%d", b, id)] += 2
			want[fmt.Sprintf("%s:%d", c, id)]++
		}
	}
	for k, w := range want {
		if got := hits60(t, src, now, k); got != w {
			t.Errorf("%s: %d hits, want %d", k, got, w)
		}
	}
}

// workerNames returns the names worker w's calls and batches use, in an
// order that differs between workers: odd workers name the two counters
// of their calls the other way round.
func workerNames(names []string, w int) (a, b, c string) {
	a, b, c = names[w%3], names[(w+1)%3], names[(w+2)%3]
	if w%2 == 1 {
		a, b = b, a
	}
	return a, b, c
}
