package memory_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/source/memory"
)

// Spending a rate-counter limit, alone or beside a penalised GCRA limit,
// refunding it, and every ERL call allocate nothing once the entries
// exist.
func TestERLCallsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers")
	}
	src := memory.New(0)
	single := []bucket.Op{rateOp("130:192.0.2.1", 1, now, 0)}
	mixed := []bucket.Op{rateOp("130:192.0.2.1", 1, now, 0), penalised(hourly("7:192.0.2.1", 1), now, minute)}
	out := make([]bucket.Outcome, 2)
	calls := []*bucket.Call{
		checkRate("130:192.0.2.1", 1, 10, 10, "130:192.0.2.1", now+minute, 0),
		increment("130:192.0.2.1", 1, 0),
		boxCall("130:192.0.2.1", bucket.BoxRead, 0, 0),
	}
	var res bucket.CallResult
	run := func() {
		_ = src.Spend(context.Background(), now, single, out[:1])
		_ = src.Refund(context.Background(), now, single, out[:1])
		_ = src.Spend(context.Background(), now, mixed, out)
		for _, c := range calls {
			_ = src.Call(context.Background(), now, c, &res)
		}
	}
	run()
	if allocs := testing.AllocsPerRun(100, run); allocs != 0 {
		t.Fatalf("%.1f allocations per round of spends, refunds and calls, want 0", allocs)
	}
}

// erlKey is the i-th of realistic entry keys: IPv4 addresses behind the
// enum of a rate-counter limit, 11 to 15 bytes, held inline.
func erlKey(i int) string {
	return fmt.Sprintf("306:10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
}

// erlKeyV6 is the i-th of keys of IPv6 addresses, 23 or 24 bytes, held
// in the arena.
func erlKeyV6(i int) string {
	return fmt.Sprintf("306:2001:db8:%x::%x", 0x1000+i>>16, 0x1000+i&0xffff)
}

// BenchmarkMemoryPerRateCounter measures the heap a rate counter entry
// takes, keys included, at 200,000 entries of one limit: in a counter at
// its capacity (240,000 ids offered, so it evicted), and in one of twice
// that capacity, and at capacity with keys of 23 or 24 bytes. Each entry
// has hits in three seconds, as an id that keeps sending would.
func BenchmarkMemoryPerRateCounter(b *testing.B) {
	const entries = 200_000
	for _, c := range []struct {
		name             string
		capacity, offers int
		key              func(int) string
	}{
		{"full", entries, entries + entries/5, erlKey},
		{"half-full", 2 * entries, entries, erlKey},
		{"full,ipv6-keys", entries, entries + entries/5, erlKeyV6},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				perEntry := measure(b, func(src *memory.Source, keys []string) {
					for d := range int64(3) {
						for _, k := range keys {
							call(b, src, now+d*sec, increment(k, 1+d, c.capacity))
						}
					}
				}, c.offers, c.key, func(st memory.ERLStats) int { return st.Counters }, min(c.capacity, c.offers))
				b.ReportMetric(perEntry, "bytes/counter")
			}
		})
	}
}

// BenchmarkMemoryPerBoxEntry is BenchmarkMemoryPerRateCounter for box
// entries, each boxed for a time of its own.
func BenchmarkMemoryPerBoxEntry(b *testing.B) {
	const entries = 200_000
	for _, c := range []struct {
		name             string
		capacity, offers int
		key              func(int) string
	}{
		{"full", entries, entries + entries/5, erlKey},
		{"half-full", 2 * entries, entries, erlKey},
		{"full,ipv6-keys", entries, entries + entries/5, erlKeyV6},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				perEntry := measure(b, func(src *memory.Source, keys []string) {
					for i, k := range keys {
						call(b, src, now, boxCall(k, bucket.BoxReplace, now+minute+int64(i)*sec, c.capacity))
					}
				}, c.offers, c.key, func(st memory.ERLStats) int { return st.Boxes }, min(c.capacity, c.offers))
				b.ReportMetric(perEntry, "bytes/entry")
			}
		})
	}
}

// measure returns the heap bytes per entry that fill leaves in a new
// source, given offers keys (key(i)) made before the first reading (so
// their bytes count) and dropped before the second. held reads how many entries the
// source holds, which must be want.
func measure(b *testing.B, fill func(*memory.Source, []string), offers int, key func(int) string, held func(memory.ERLStats) int, want int) float64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	keys := make([]string, offers)
	for i := range keys {
		keys[i] = key(i)
	}
	src := memory.New(0)
	fill(src, keys)
	keys = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := held(src.ERLStats()); n != want {
		b.Fatalf("holds %d entries, want %d", n, want)
	}
	runtime.KeepAlive(src)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(want)
}

// BenchmarkCheckRate times check_rate on entries of one limit, serially
// and from every core at once (one lock per limit name).
func BenchmarkCheckRate(b *testing.B) {
	src := memory.New(0)
	const ids = 10_000
	calls := make([]*bucket.Call, ids)
	for i := range calls {
		calls[i] = checkRate(erlKey(i), 1, 10, 1000, erlKey(i), now+minute, 0)
	}
	b.Run("serial", func(b *testing.B) {
		var res bucket.CallResult
		i := 0
		for b.Loop() {
			_ = src.Call(context.Background(), now, calls[i%ids], &res)
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			var res bucket.CallResult
			i := 0
			for pb.Next() {
				_ = src.Call(context.Background(), now, calls[i%ids], &res)
				i += 7
			}
		})
	})
}
