package local

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/source/syncpush"

	"github.com/jmhodges/clock"

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
	ops := []bucket.Op{op("330:42", 1<<40, 1, time.Second)}
	out := make([]bucket.Outcome, 1)
	now := clk.Now().UnixNano()
	b.ReportAllocs()
	for b.Loop() {
		l.spend(now, ops, out)
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
			ops := []bucket.Op{op("330:"+strconv.Itoa(i%1024), 1<<40, 1, time.Second)}
			l.spend(now, ops, out)
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
			l.spend(now, []bucket.Op{op("330:"+strconv.Itoa(100_000_000+i), 10, 1, time.Second)}, out)
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

// BenchmarkLocalRateSpend is one spend of a rate-counter limit above 0
// decided locally, its counter and box entry held.
func BenchmarkLocalRateSpend(b *testing.B) {
	clk := fakeClock()
	l, err := New(Options{Syncer: newStore(), Clock: clk, Timers: clock.NewFake()})
	if err != nil {
		b.Fatal(err)
	}
	o := rop("330:42", 1, time.Second, 0)
	o.Mode = bucket.SpendOnly
	ops := []bucket.Op{o}
	out := make([]bucket.Outcome, 1)
	now := clk.Now().UnixNano()
	b.ReportAllocs()
	for b.Loop() {
		l.spend(now, ops, out)
	}
}

// BenchmarkLocalMemoryPerRateCounter reports the heap one rate counter of
// a limit above 0 and its box entry take, with their key, at 100,000 ids,
// before and after a sync (which reads their totals).
func BenchmarkLocalMemoryPerRateCounter(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		clk := fakeClock()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l, err := New(Options{Syncer: echo{}, Clock: clk, Timers: clock.NewFake()})
		if err != nil {
			b.Fatal(err)
		}
		out := make([]bucket.Outcome, 1)
		now := clk.Now().UnixNano()
		for i := range n {
			l.spend(now, []bucket.Op{rop("330:"+strconv.Itoa(100_000_000+i), 1, time.Second, n)}, out)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/unsynced")
		if _, _, err := l.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if l.Counters() != n {
			b.Fatalf("%d counters held, want %d", l.Counters(), n)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/synced")
		runtime.KeepAlive(l)
	}
}

// echo is a source that keeps nothing: every push reads back its own
// hits, so that a benchmark measures the layer's memory alone.
type echo struct{}

func (echo) SyncWindows(_ context.Context, _ int64, pushes []syncpush.Window) error {
	for i := range pushes {
		pushes[i].Total, pushes[i].Applied = hitsOf(&pushes[i]), true
	}
	return nil
}

func (echo) SyncRates(_ context.Context, _ int64, pushes []syncpush.Rate) error {
	for i := range pushes {
		p := &pushes[i]
		p.Total, p.TotalBox, p.Applied = p.Hits, p.BoxExpires, true
	}
	return nil
}
