package redis_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/source/syncpush"

	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/source/redis"
)

// erlEntries is how many entries the memory benchmarks of rate counters
// and box entries store: a counter's default capacity in process memory.
const erlEntries = 200_000

// erlGroups are the key formats the memory benchmarks run in: v1, and v2
// with about 10, 15 and 61 entries per hash.
var erlGroups = []int{0, 20_000, 13_333, 3_279}

// BenchmarkMemoryPerRateCounter stores 200,000 rate counters
// (130:123000000 to 130:123199999, one hit each, so every counter is
// "1790000000,1") through the source into a fresh Redis, in key format v1
// and in v2, and reports Redis's used_memory grown per counter. Run it
// once: -bench MemoryPerRateCounter -benchtime 1x.
func BenchmarkMemoryPerRateCounter(b *testing.B) {
	benchEntryMemory(b, "B/counter", func(src *redis.Source, id string) error {
		ops := []bucket.Op{rateOp("130:"+id, 60, 1000, 1, now+secs(600))}
		return src.Spend(context.Background(), now, ops, make([]bucket.Outcome, 1))
	})
}

// BenchmarkMemoryPerBoxEntry stores 200,000 box entries (130:123000000 to
// 130:123199999, each added for ten minutes) through the source into a
// fresh Redis, in key format v1 and in v2, and reports Redis's
// used_memory grown per entry. Run it once: -bench MemoryPerBoxEntry
// -benchtime 1x.
func BenchmarkMemoryPerBoxEntry(b *testing.B) {
	benchEntryMemory(b, "B/entry", func(src *redis.Source, id string) error {
		c := bucket.Call{Box: "130:" + id, Action: bucket.BoxReplace, Until: now + secs(600)}
		var res bucket.CallResult
		return src.Call(context.Background(), now, &c, &res)
	})
}

// BenchmarkMemoryPerBusyRateCounter is BenchmarkMemoryPerRateCounter for
// counters with a hit in every one of the last 60 seconds, the longest a
// counter gets ("1790000059,1,1,...,1", 130 bytes): written by SyncRates,
// 1,000 pushes a call.
func BenchmarkMemoryPerBusyRateCounter(b *testing.B) {
	s := now/1e9 + 59
	var hits [60]int64
	for i := range hits {
		hits[i] = 1
	}
	full := hitsAt(s, hits[:]...)
	var mu sync.Mutex
	batch := map[*redis.Source][]syncpush.Rate{}
	benchEntryMemory(b, "B/counter", func(src *redis.Source, id string) error {
		mu.Lock()
		defer mu.Unlock()
		batch[src] = append(batch[src], syncpush.Rate{Key: "130:" + id, Hits: full})
		if len(batch[src]) < 1000 && id != strconv.Itoa(123_000_000+erlEntries-1) {
			return nil
		}
		p := batch[src]
		batch[src] = nil
		return src.SyncRates(context.Background(), (s+1)*1e9, p)
	}, 1)
}

// benchEntryMemory stores erlEntries entries with store, one id each,
// from 16 writers (or writers, when given), in each key format of
// erlGroups, and reports used_memory grown per entry as unit.
func benchEntryMemory(b *testing.B, unit string, store func(src *redis.Source, id string) error, writers ...int) {
	n := 16
	if len(writers) > 0 {
		n = writers[0]
	}
	for _, groups := range erlGroups {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			srv := redistest.NewStandalone(b)
			// Generous timeouts: this measures memory, on a machine that may
			// be busy.
			src := benchSource(b, redis.Options{Addrs: []string{srv.Addr()}, Groups: groups,
				DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second})
			for b.Loop() {
				srv.Flush(b)
				before := usedMemory(b, srv.Addr())
				var wg sync.WaitGroup
				for w := range n {
					wg.Go(func() {
						for i := w; i < erlEntries; i += n {
							if err := store(src, strconv.Itoa(123_000_000+i)); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(usedMemory(b, srv.Addr())-before)/erlEntries, unit)
				if groups > 0 {
					key, _ := src.EntryKey("130:123000000")
					enc, err := redistest.Do(srv.Addr(), "OBJECT", "ENCODING", key)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(map[bool]float64{true: 1}[enc == "listpack"], "listpack")
				}
			}
		})
	}
}

// BenchmarkSyncRates measures SyncRates of 1,000 rate counters a call, as
// the local layer of sync_rate > 0 sends them: counters with one second
// of hits, and counters with hits in each of the last 60 seconds (the
// most a push or a stored counter holds), each with a box entry read.
// It reports counters per second.
func BenchmarkSyncRates(b *testing.B) {
	s := now / 1e9
	var full [60]int64
	for i := range full {
		full[i] = 1
	}
	for _, be := range benchBackends {
		opts := be.opts(b)
		opts.Namespace = "benchr:"
		src := benchSource(b, opts)
		for _, kind := range []struct {
			name string
			hits ratecounter.Counter
		}{{"one-second", hitsAt(s, 3)}, {"sixty-seconds", hitsAt(s, full[:]...)}} {
			b.Run(be.name+"/"+kind.name, func(b *testing.B) {
				pushes := make([]syncpush.Rate, 1000)
				for i := range pushes {
					k := fmt.Sprintf("400:user%d", i)
					pushes[i] = syncpush.Rate{Key: k, Hits: kind.hits, Box: k}
				}
				measureRedis(b, opts.Addrs)
				for b.Loop() {
					if err := src.SyncRates(context.Background(), now, pushes); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*len(pushes))/b.Elapsed().Seconds(), "counters/s")
			})
		}
	}
}
