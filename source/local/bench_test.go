package local

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// BenchmarkLocalSpend is one spend of a limit above 0 decided locally:
// what a decision costs when it makes no round trip.
func BenchmarkLocalSpend(b *testing.B) {
	clk := fakeClock()
	l, err := New(Options{Syncer: newStore(), Clock: clk, Timers: clock.NewFake()})
	if err != nil {
		b.Fatal(err)
	}
	ops := []ratelimits.LocalOp{op("330:42", 1<<40, 1, time.Second)}
	out := make([]bucket.Outcome, 1)
	now := clk.Now().UnixNano()
	b.ReportAllocs()
	for b.Loop() {
		l.Spend(now, ops, out)
	}
}

// BenchmarkLocalSpendParallel is the same from every core, on distinct
// counters.
func BenchmarkLocalSpendParallel(b *testing.B) {
	clk := fakeClock()
	l, err := New(Options{Syncer: newStore(), Clock: clk, Timers: clock.NewFake()})
	if err != nil {
		b.Fatal(err)
	}
	now := clk.Now().UnixNano()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		out := make([]bucket.Outcome, 1)
		i := 0
		for pb.Next() {
			ops := []ratelimits.LocalOp{op("330:"+strconv.Itoa(i%1024), 1<<40, 1, time.Second)}
			l.Spend(now, ops, out)
			i++
		}
	})
}

// BenchmarkLocalMemoryPerCounter reports the heap one counter of a limit
// above 0 takes, with its key, at 100,000 counters.
func BenchmarkLocalMemoryPerCounter(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		clk := fakeClock()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l, err := New(Options{Syncer: newStore(), Clock: clk, Timers: clock.NewFake()})
		if err != nil {
			b.Fatal(err)
		}
		out := make([]bucket.Outcome, 1)
		now := clk.Now().UnixNano()
		for i := range n {
			l.Spend(now, []ratelimits.LocalOp{op("330:"+strconv.Itoa(100_000_000+i), 10, 1, time.Second)}, out)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if l.Counters() != n {
			b.Fatalf("%d counters held, want %d", l.Counters(), n)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/counter")
		runtime.KeepAlive(l)
	}
}
