package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/calendar"
	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/ratelimits/window"
	"github.com/limiter-dev/limiter/source/memory"
	"github.com/limiter-dev/limiter/source/sourcetest"
)

var _ ratelimits.Source = (*memory.Source)(nil)

const now int64 = 1_790_000_000_000_000_000

func TestConformance(t *testing.T) {
	sourcetest.Run(t, func(*testing.T) ratelimits.Source { return memory.New(0) })
	sourcetest.RunLeases(t, func(*testing.T) ratelimits.Source { return memory.New(0) })
}

// hourly is a limit of burst 100 refilling over an hour.
func hourly(key string, cost int64) bucket.Op {
	ei := int64(36 * time.Second)
	return bucket.Op{Key: key, EmissionInterval: ei, BurstOffset: ei * 100, Cost: cost}
}

// slidingHourly is a sliding window of 100 hits an hour.
func slidingHourly(key string, cost int64) bucket.Op {
	return bucket.Op{Key: key, Algorithm: bucket.SlidingWindow, Window: window.Limit{Count: 100, Period: 3_600_000}, Cost: cost}
}

// fixedTenMinutes is a fixed window of 100 hits per 10 minutes.
func fixedTenMinutes(key string, cost int64) bucket.Op {
	return bucket.Op{Key: key, Algorithm: bucket.FixedWindow, Window: window.Limit{Count: 100, Period: 600_000, Fixed: true}, Cost: cost}
}

// kinds makes ops of each algorithm, by name, for tests run on each.
var kinds = []struct {
	name string
	op   func(key string, cost int64) bucket.Op
}{
	{"gcra", hourly},
	{"sliding-window", slidingHourly},
	{"fixed-window", fixedTenMinutes},
}

func spendOne(t testing.TB, src *memory.Source, at int64, op bucket.Op) bucket.Outcome {
	t.Helper()
	out := make([]bucket.Outcome, 1)
	if err := src.Spend(context.Background(), at, []bucket.Op{op}, out); err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// The source against sourcetest's model with keys of every length from 0
// to 39 bytes, so that batches mix keys held in the slot (up to 16 bytes)
// and in the arena, and GCRA buckets with window counters, in batches,
// with refunds, at random times, so buckets fill, windows pass, and both
// are forgotten and come back. (The shared conformance suite's keys
// are all long: they carry the test's name. That keys a slot holds alike
// are equal is TestKeyOfDeterminesTheKey's question: here, their hashes
// differ anyway.)
func TestMatchesModelAtEveryKeyLength(t *testing.T) {
	src := memory.New(0)
	rng := rand.New(rand.NewPCG(5, 6))
	var keys []string
	for n := range 40 {
		for _, c := range "ab" {
			b := []byte(strings.Repeat("a", n))
			if n > 0 {
				b[n/2] = byte(c)
			}
			keys = append(keys, string(b))
		}
	}
	keys = slices.Compact(keys)
	model := sourcetest.Model{}
	at := now
	for step := range 20_000 {
		at += rng.Int64N(int64(30 * time.Second))
		perm := rng.Perm(len(keys))[:1+rng.IntN(3)]
		ops := make([]bucket.Op, len(perm))
		for i, k := range perm {
			ops[i] = kinds[k%len(kinds)].op(keys[k], rng.Int64N(60))
			ops[i].Mode = bucket.Mode(rng.IntN(3))
		}
		isRefund := rng.IntN(4) == 0
		got := make([]bucket.Outcome, len(ops))
		if isRefund {
			_ = src.Refund(context.Background(), at, ops, got)
		} else {
			_ = src.Spend(context.Background(), at, ops, got)
		}
		want := model.Apply(at, ops, isRefund)
		for i := range ops {
			if got[i] != want[i] {
				t.Fatalf("step %d op %d (key %q, refund %v):\n got %+v\nwant %+v", step, i, ops[i].Key, isRefund, got[i], want[i])
			}
		}
	}
}

// A flood of distinct ids never holds more entries than the bound, with
// GCRA buckets, window counters, or both arriving mixed, and every entry
// past the bound is an eviction.
func TestBoundHoldsUnderFlood(t *testing.T) {
	const maxBuckets = 100_000
	for _, c := range []struct {
		name  string
		flood int
		op    func(i int) bucket.Op
	}{
		{"gcra", 2_000_000, func(i int) bucket.Op { return hourly(fmt.Sprintf("3:%d", i), 1) }},
		{"sliding-window", 300_000, func(i int) bucket.Op { return slidingHourly(fmt.Sprintf("3:%d", i), 1) }},
		{"mixed", 300_000, func(i int) bucket.Op { return kinds[i%3].op(fmt.Sprintf("3:%d", i), 1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := memory.New(maxBuckets)
			for i := range c.flood {
				spendOne(t, src, now, c.op(i))
			}
			if n := src.Len(); n > maxBuckets || n < maxBuckets*9/10 {
				t.Fatalf("after %d ids the source holds %d entries, want at most %d (and close to it)", c.flood, n, maxBuckets)
			}
			if got, want := src.Evictions(), uint64(c.flood-src.Len()); got != want {
				t.Fatalf("evictions = %d, want %d (every id past the bound evicts one)", got, want)
			}
		})
	}
}

// The bound is exact even when it is smaller than the number of shards,
// for buckets and counters together.
func TestSmallBoundIsExact(t *testing.T) {
	for _, maxBuckets := range []int{1, 3, 100, 1000} {
		src := memory.New(maxBuckets)
		for i := range 10 * maxBuckets {
			spendOne(t, src, now, kinds[i%3].op(fmt.Sprint(i), 1))
		}
		if n := src.Len(); n != maxBuckets {
			t.Errorf("bound %d: holds %d entries after a flood, want exactly %d", maxBuckets, n, maxBuckets)
		}
	}
}

// A single-key spend, check or refund allocates nothing, whatever its
// algorithm.
func TestSingleKeyCallsAllocateNothing(t *testing.T) {
	src := memory.New(0)
	for _, k := range kinds {
		ops := []bucket.Op{k.op("3:1", 1)}
		out := make([]bucket.Outcome, 1)
		_ = src.Spend(context.Background(), now, ops, out)
		for _, mode := range []bucket.Mode{bucket.CheckAndSpend, bucket.CheckOnly} {
			ops[0].Mode = mode
			allocs := testing.AllocsPerRun(100, func() {
				_ = src.Spend(context.Background(), now, ops, out)
				_ = src.Refund(context.Background(), now, ops, out)
			})
			if allocs != 0 {
				t.Errorf("%s, %s: %.1f allocations per spend and refund, want 0", k.name, mode, allocs)
			}
		}
	}
}

// Buckets that have refilled are forgotten: reading one drops it, and
// inserts sweep refilled buckets away.
func TestForgetsFullBuckets(t *testing.T) {
	src := memory.New(0)
	for i := range 10 {
		spendOne(t, src, now, hourly(fmt.Sprint(i), 1))
	}
	if n := src.Len(); n != 10 {
		t.Fatalf("holds %d buckets, want 10", n)
	}
	later := now + int64(time.Hour)
	for i := range 10 {
		spendOne(t, src, later, hourly(fmt.Sprint(i), 0))
	}
	if n := src.Len(); n != 0 {
		t.Fatalf("after every bucket refilled and was read, holds %d, want 0", n)
	}
	// A refund to full removes the bucket instead of storing a full one.
	spendOne(t, src, now, hourly("r", 2))
	out := make([]bucket.Outcome, 1)
	if err := src.Refund(context.Background(), now, []bucket.Op{hourly("r", 2)}, out); err != nil {
		t.Fatal(err)
	}
	if n := src.Len(); n != 0 {
		t.Fatalf("after a refund to full, holds %d buckets, want 0", n)
	}
}

// Window counters are forgotten once their windows no longer count:
// reading one drops it, and so does a refund that empties it.
func TestForgetsExpiredCounters(t *testing.T) {
	src := memory.New(0)
	for i := range 10 {
		spendOne(t, src, now, slidingHourly(fmt.Sprint("s", i), 1))
		spendOne(t, src, now, fixedTenMinutes(fmt.Sprint("f", i), 1))
	}
	if n := src.Len(); n != 20 {
		t.Fatalf("holds %d counters, want 20", n)
	}
	// now lies in some hour; two hours on, no hit of it counts.
	later := now + int64(2*time.Hour)
	for i := range 10 {
		spendOne(t, src, later, slidingHourly(fmt.Sprint("s", i), 0))
		spendOne(t, src, later, fixedTenMinutes(fmt.Sprint("f", i), 0))
	}
	if n := src.Len(); n != 0 {
		t.Fatalf("after every window passed and was read, holds %d, want 0", n)
	}
	// A refund that empties the current window of a counter with nothing
	// before removes it instead of storing an empty one.
	spendOne(t, src, now, slidingHourly("r", 2))
	out := make([]bucket.Outcome, 1)
	if err := src.Refund(context.Background(), now, []bucket.Op{slidingHourly("r", 2)}, out); err != nil {
		t.Fatal(err)
	}
	if n := src.Len(); !out[0].Allowed || n != 0 {
		t.Fatalf("after a refund to empty (%+v), holds %d counters, want 0", out[0], n)
	}
}

// A batch wider than the stack buffers is still decided as one.
func TestLargeBatch(t *testing.T) {
	src := memory.New(0)
	ops := make([]bucket.Op, 40)
	for i := range ops {
		ops[i] = hourly(fmt.Sprint(i), 100)
	}
	out := make([]bucket.Outcome, len(ops))
	if err := src.Spend(context.Background(), now, ops, out); err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if !o.Allowed || !o.Write {
			t.Fatalf("op %d of a fresh large batch: %+v, want allowed and written", i, o)
		}
	}
	if err := src.Spend(context.Background(), now, ops, out); err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Allowed || o.Write {
			t.Fatalf("op %d of a repeated large batch: %+v, want denied", i, o)
		}
	}
}

func BenchmarkSpendSerial(b *testing.B) {
	for _, buckets := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("buckets=%d", buckets), func(b *testing.B) {
			src, keys := filled(b, buckets)
			out := make([]bucket.Outcome, 1)
			ops := make([]bucket.Op, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				ops[0] = hourly(keys[i%len(keys)], 1)
				_ = src.Spend(context.Background(), now, ops, out)
			}
		})
	}
}

// BenchmarkSpendWindowSerial is BenchmarkSpendSerial on sliding window
// counters.
func BenchmarkSpendWindowSerial(b *testing.B) {
	for _, counters := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("counters=%d", counters), func(b *testing.B) {
			src, keys := filledWith(b, counters, slidingHourly)
			out := make([]bucket.Outcome, 1)
			ops := make([]bucket.Op, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				ops[0] = slidingHourly(keys[i%len(keys)], 0)
				_ = src.Spend(context.Background(), now, ops, out)
			}
		})
	}
}

// BenchmarkSpendCalendarSerial is BenchmarkSpendSerial on calendar
// counters (a month of Paris).
func BenchmarkSpendCalendarSerial(b *testing.B) {
	cal, err := calendar.New(calendar.Month, "Europe/Paris")
	if err != nil {
		b.Fatal(err)
	}
	monthly := func(key string, cost int64) bucket.Op {
		return bucket.Op{Key: key, Algorithm: bucket.Calendar, Calendar: calendar.Limit{Count: 1_000_000, Tag: cal.Tag()}, Periods: cal, Cost: cost}
	}
	src, keys := filledWith(b, 10_000, monthly)
	out := make([]bucket.Outcome, 1)
	ops := make([]bucket.Op, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ops[0] = monthly(keys[i%len(keys)], 1)
		_ = src.Spend(context.Background(), now, ops, out)
	}
}

func BenchmarkSpendParallel(b *testing.B) {
	for _, buckets := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("buckets=%d", buckets), func(b *testing.B) {
			src, keys := filled(b, buckets)
			b.ReportAllocs()
			b.ResetTimer()
			var goroutines atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				out := make([]bucket.Outcome, 1)
				ops := make([]bucket.Op, 1)
				// Each goroutine walks the keys in order, as the serial
				// benchmark does, from its own place: from the same place
				// they would all queue on the same shard. (Walking them with
				// a stride would measure cache misses on this benchmark's own
				// key list and key bytes, which a request's freshly decoded
				// key does not have: up to 200 ns/op more at 1,000,000.)
				i := int(goroutines.Add(1)) * len(keys) / 7
				for pb.Next() {
					ops[0] = hourly(keys[i%len(keys)], 1)
					_ = src.Spend(context.Background(), now, ops, out)
					i++
				}
			})
		})
	}
}

// BenchmarkSpendParallelDisjoint is the control for BenchmarkSpendParallel:
// each goroutine spends on a source of its own (5,000 buckets each), so no
// memory is written by both cores. Against it, the shared source shows
// what the cores pay for handing each other the cache lines a spend writes
// (its shard's lock and its entry).
func BenchmarkSpendParallelDisjoint(b *testing.B) {
	const goroutines = 2
	b.SetParallelism(1)
	if procs := runtime.GOMAXPROCS(0); procs != goroutines {
		b.Skipf("written for GOMAXPROCS=%d, have %d", goroutines, procs)
	}
	srcs := make([]*memory.Source, goroutines)
	keys := make([][]string, goroutines)
	for g := range goroutines {
		srcs[g] = memory.New(10_000)
		for i := range 5_000 {
			keys[g] = append(keys[g], fmt.Sprintf("3:%d:%d", g, i))
			spendOne(b, srcs[g], now, hourly(keys[g][i], 1))
		}
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		g := int(next.Add(1) - 1)
		src, keys := srcs[g], keys[g]
		out := make([]bucket.Outcome, 1)
		ops := make([]bucket.Op, 1)
		for i := 0; pb.Next(); i += 7919 {
			ops[0] = hourly(keys[i%len(keys)], 1)
			_ = src.Spend(context.Background(), now, ops, out)
		}
	})
}

// BenchmarkSpendNewKeyFullSource spends on keys the source has never
// seen, with the source full: each spend misses (the longest probe), then
// evicts a bucket and inserts its own. It is the cost of a flood of new
// subscribers against the bound.
func BenchmarkSpendNewKeyFullSource(b *testing.B) {
	const buckets = 1_000_000
	src := memory.New(buckets)
	out := make([]bucket.Outcome, 1)
	ops := make([]bucket.Op, 1)
	for i := range buckets + buckets/5 {
		ops[0] = hourly(fmt.Sprintf("3:%d", i), 1)
		_ = src.Spend(context.Background(), now, ops, out)
	}
	keys := make([]string, 1<<20)
	for i := range keys {
		keys[i] = fmt.Sprintf("3:%d", 10_000_000+i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ops[0] = hourly(keys[i%len(keys)], 1)
		_ = src.Spend(context.Background(), now, ops, out)
	}
}

func BenchmarkSpendBatchOf3(b *testing.B) {
	src, keys := filled(b, 10_000)
	out := make([]bucket.Outcome, 3)
	ops := make([]bucket.Op, 3)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for j := range ops {
			ops[j] = hourly(keys[(3*i+j)%len(keys)], 1)
		}
		_ = src.Spend(context.Background(), now, ops, out)
	}
}

// BenchmarkMemoryPerBucket reports the heap taken per stored GCRA bucket
// at one million buckets, keys included: in a source with room to spare
// (half full) and in a full one (more keys arrived than it holds, so it
// evicted), with keys like "3:123456789" that the slots hold and keys of
// 28 bytes that go to the arena.
func BenchmarkMemoryPerBucket(b *testing.B) {
	benchmarkMemoryPerEntry(b, hourly, "bytes/bucket")
}

// BenchmarkMemoryPerWindowCounter is BenchmarkMemoryPerBucket for sliding
// window counters, each with hits in its current window.
func BenchmarkMemoryPerWindowCounter(b *testing.B) {
	benchmarkMemoryPerEntry(b, slidingHourly, "bytes/counter")
}

func benchmarkMemoryPerEntry(b *testing.B, op func(key string, cost int64) bucket.Op, unit string) {
	const entries = 1_000_000
	for _, c := range []struct {
		name          string
		bound, offers int
		format        string
	}{
		{"half-full", 2 * entries, entries, "3:%d"},
		{"full", entries, entries + entries/5, "3:%d"},
		{"full,28-byte-keys", entries, entries + entries/5, "8:%d.example.com.."},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				// Measured from before the keys exist, so their bytes count;
				// the slice holding them is dropped before the second reading.
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				keys := make([]string, c.offers)
				for i := range keys {
					keys[i] = fmt.Sprintf(c.format, 100_000_000+i)
				}
				src := memory.New(c.bound)
				out := make([]bucket.Outcome, 1)
				ops := make([]bucket.Op, 1)
				for _, k := range keys {
					ops[0] = op(k, 1)
					_ = src.Spend(context.Background(), now, ops, out)
				}
				keys = nil
				runtime.GC()
				runtime.ReadMemStats(&after)
				if held := src.Len(); held != min(c.bound, c.offers) {
					b.Fatalf("holds %d entries, want %d", held, min(c.bound, c.offers))
				}
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(src.Len()), unit)
				runtime.KeepAlive(src)
			}
		})
	}
}

// BenchmarkCollectionAtAMillionBuckets times one full garbage collection
// (runtime.GC) of a process whose memory source holds a million buckets:
// what every collection costs the service at that size, beyond the
// collection of an idle process.
func BenchmarkCollectionAtAMillionBuckets(b *testing.B) {
	src, _ := filled(b, 1_000_000) // the keys' slice is garbage from here
	runtime.GC()
	for b.Loop() {
		runtime.GC()
	}
	runtime.KeepAlive(src)
}

func filled(b *testing.B, buckets int) (*memory.Source, []string) {
	return filledWith(b, buckets, hourly)
}

// filledWith returns a source holding n entries made by op, half its
// bound, and their keys.
func filledWith(b *testing.B, n int, op func(key string, cost int64) bucket.Op) (*memory.Source, []string) {
	src := memory.New(2 * n)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("3:%d", i)
		spendOne(b, src, now, op(keys[i], 1))
	}
	return src, keys
}

// BenchmarkMemoryPerIdempotencyRecord measures the heap an idempotency
// record of a one-transaction request takes, with a 61-byte key (a UUID
// behind a token scope), a fingerprint of its own, and all records on one
// bucket (or window counter), so that its share is negligible. A record
// keeps the state its call read: a GCRA bucket's TAT, or a window
// counter's four numbers and the word that says which ops were windows.
func BenchmarkMemoryPerIdempotencyRecord(b *testing.B) {
	for _, k := range kinds[:2] {
		b.Run(k.name, func(b *testing.B) {
			const records = 200_000
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				src := memory.New(8 * records) // room for every record in each of the stripes they are spread over
				out := make([]bucket.Outcome, 1)
				ops := []bucket.Op{k.op("3:1", 0)}
				for i := range records {
					rec := once.Record{
						Key:         fmt.Sprintf("0123456789abcdef01234567:%08x-1111-2222-3333-444455556666", i),
						Fingerprint: fmt.Sprintf("%032x", i),
						Expires:     now + int64(time.Hour),
					}
					if _, err := src.SpendOnce(context.Background(), now, rec, ops, out); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				if n := src.IdempotencyEvictions(); n != 0 {
					b.Fatalf("%d records evicted, want none", n)
				}
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/records, "bytes/record")
				runtime.KeepAlive(src)
			}
		})
	}
}
