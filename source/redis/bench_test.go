package redis_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/source/syncpush"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/source/redis"
)

// benchCallers is how many goroutines the parallel benchmarks run: about
// fifty, like a service under load with many requests in flight.
const benchCallers = 50

// benchIDs is how many subscribers the benchmarks spread spends over.
const benchIDs = 10_000

const benchDefaults = `
BenchLimit:
  enum: 400
  id: string
  burst: 1000000
  count: 1000000
  period: 1h
`

// benchBackends are the backends the speed benchmarks run on: key format
// v2 with 1,024 groups puts about ten of the benchmarks' buckets in each
// hash, as 65,536 groups would at 600,000 buckets (the tests' 4 groups
// would make hashes of thousands).
var benchBackends = []backend{
	backends[0], backends[1],
	{"StandaloneV2", grouped(standalone, 1024)},
	{"ClusterV2", grouped(cluster, 1024)},
}

// setParallelism makes b.RunParallel run about benchCallers goroutines.
func setParallelism(b *testing.B) {
	b.SetParallelism(max(1, benchCallers/runtime.GOMAXPROCS(0)))
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// redisStats is what the Redis servers of a benchmark have used so far:
// CPU seconds (user + system, all threads) and script calls (EVALSHA and
// EVAL), summed over the servers.
type redisStats struct {
	cpu   float64
	calls int64
}

func readRedisStats(b *testing.B, addrs []string) redisStats {
	b.Helper()
	var st redisStats
	for _, addr := range addrs {
		info := redisInfo(b, addr, "all")
		for _, name := range []string{"used_cpu_sys", "used_cpu_user"} {
			f, _ := strconv.ParseFloat(info[name], 64)
			st.cpu += f
		}
		for _, name := range []string{"cmdstat_evalsha", "cmdstat_eval"} {
			calls, _, _ := strings.Cut(strings.TrimPrefix(info[name], "calls="), ",")
			n, _ := strconv.ParseInt(calls, 10, 64)
			st.calls += n
		}
	}
	return st
}

// redisInfo reads a section of INFO from the server at addr into a map of
// its "name:value" lines.
func redisInfo(b *testing.B, addr, section string) map[string]string {
	b.Helper()
	text, err := redistest.Do(addr, "INFO", section)
	if err != nil {
		b.Fatalf("INFO on %s: %v", addr, err)
	}
	info := map[string]string{}
	for line := range strings.SplitSeq(text, "\n") {
		if name, value, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			info[name] = value
		}
	}
	return info
}

// measureRedis reports, when the benchmark ends, Redis's own CPU time per
// decision and how many script calls a decision took (below 1 when
// concurrent decisions shared calls): the limiter process's numbers
// alone would hide the half of the work that Redis does.
func measureRedis(b *testing.B, addrs []string) {
	before := readRedisStats(b, addrs)
	b.Cleanup(func() {
		after := readRedisStats(b, addrs)
		b.ReportMetric((after.cpu-before.cpu)*1e6/float64(b.N), "redis-µs/decision")
		b.ReportMetric(float64(after.calls-before.calls)/float64(b.N), "calls/decision")
	})
}

func benchSource(b *testing.B, opts redis.Options) *redis.Source {
	src, err := redis.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { src.Close() })
	return src
}

// BenchmarkLimiterSpendRedis measures Limiter.Spend of one transaction on
// the real clock against a real Redis and a real cluster, serially and
// with about fifty concurrent callers, with the source's default options.
func BenchmarkLimiterSpendRedis(b *testing.B) {
	cfg, err := configfile.Parse("defaults.yaml", []byte(benchDefaults), "overrides.yaml", nil)
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, benchIDs)
	for i := range ids {
		ids[i] = fmt.Sprintf("user%d", i)
	}
	for _, be := range benchBackends {
		opts := be.opts(b)
		opts.Namespace = "bench:"
		l, err := ratelimits.NewLimiter(cfg, benchSource(b, opts), clock.New())
		if err != nil {
			b.Fatal(err)
		}
		spendOne := func(b *testing.B, i int) {
			txns := []ratelimits.Transaction{{Limit: "BenchLimit", ID: ids[i%len(ids)], Cost: 1}}
			if _, err := l.Spend(context.Background(), txns); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(be.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			measureRedis(b, opts.Addrs)
			for i := 0; b.Loop(); i++ {
				spendOne(b, i)
			}
			reportRate(b)
		})
		b.Run(be.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			measureRedis(b, opts.Addrs)
			setParallelism(b)
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i += 7919 {
					spendOne(b, i)
				}
			})
			reportRate(b)
		})
	}
}

// BenchmarkSourceSpendRedis measures the source alone (no Limiter, no
// config lookup) with about fifty concurrent callers, one op per batch,
// and with a batch of three ops (on a cluster, three hash slots).
func BenchmarkSourceSpendRedis(b *testing.B) {
	for _, be := range benchBackends {
		opts := be.opts(b)
		opts.Namespace = "bench:"
		src := benchSource(b, opts)
		for _, width := range []int{1, 3} {
			b.Run(fmt.Sprintf("%s/batch=%d", be.name, width), func(b *testing.B) {
				b.ReportAllocs()
				measureRedis(b, opts.Addrs)
				setParallelism(b)
				b.RunParallel(func(pb *testing.PB) {
					ops := make([]bucket.Op, width)
					out := make([]bucket.Outcome, width)
					for i := 0; pb.Next(); i += 7919 {
						for j := range ops {
							ops[j] = hourly(fmt.Sprintf("400:user%d", (i+j*1013)%benchIDs), 1)
							ops[j].BurstOffset *= 10_000 // never denied
						}
						if err := src.Spend(context.Background(), now, ops, out); err != nil {
							b.Fatal(err)
						}
					}
				})
				reportRate(b)
			})
		}
	}
}

// BenchmarkSourceSpendRedisWindows is BenchmarkSourceSpendRedis for window
// limits: one sliding window per batch, and batches of three mixing a GCRA
// bucket, a sliding and a fixed window (on a cluster, three hash slots).
func BenchmarkSourceSpendRedisWindows(b *testing.B) {
	for _, be := range benchBackends {
		opts := be.opts(b)
		opts.Namespace = "benchw:"
		src := benchSource(b, opts)
		for _, width := range []int{1, 3} {
			b.Run(fmt.Sprintf("%s/batch=%d", be.name, width), func(b *testing.B) {
				b.ReportAllocs()
				measureRedis(b, opts.Addrs)
				setParallelism(b)
				b.RunParallel(func(pb *testing.PB) {
					ops := make([]bucket.Op, width)
					out := make([]bucket.Outcome, width)
					for i := 0; pb.Next(); i += 7919 {
						for j := range ops {
							key := fmt.Sprintf("400:user%d", (i+j*1013)%benchIDs)
							switch j {
							case 0:
								ops[j] = windowOp(key, false, 1_000_000_000, 3_600_000, 1) // never denied
							case 1:
								ops[j] = hourly(key, 1)
								ops[j].BurstOffset *= 10_000
							default:
								ops[j] = windowOp(key, true, 1_000_000_000, 3_600_000, 1)
							}
						}
						if err := src.Spend(context.Background(), now, ops, out); err != nil {
							b.Fatal(err)
						}
					}
				})
				reportRate(b)
			})
		}
	}
}

// BenchmarkSyncWindows measures SyncWindows of 1,000 counters a call, as
// the local layer of sync_rate > 0 sends them, and reports counters per
// second.
func BenchmarkSyncWindows(b *testing.B) {
	for _, be := range benchBackends {
		opts := be.opts(b)
		opts.Namespace = "benchs:"
		src := benchSource(b, opts)
		b.Run(be.name, func(b *testing.B) {
			pushes := make([]syncpush.Window, 1000)
			start := now / 1e6 / 60_000 * 60_000
			for i := range pushes {
				pushes[i] = syncpush.Window{Key: fmt.Sprintf("400:user%d", i), Period: 60_000, Start: start, Hits: 3, PrevHits: 1}
			}
			measureRedis(b, opts.Addrs)
			for b.Loop() {
				if err := src.SyncWindows(context.Background(), now, pushes); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(pushes))/b.Elapsed().Seconds(), "counters/s")
		})
	}
}

// BenchmarkMemoryPerBucket stores 1,000,000 buckets (3:123000000 to
// 3:123999999, each spent once on an hourly limit, so none is full) through
// the source into a fresh Redis, in key format v1 and in v2 with about 4,
// 10, 15 and 61 buckets per hash, each with TATs as text and in binary,
// and reports Redis's used_memory grown per bucket. Run it once: -bench
// MemoryPerBucket -benchtime 1x.
func BenchmarkMemoryPerBucket(b *testing.B) {
	for _, groups := range []int{0, 262144, 100000, 65536, 16384} {
		for _, binary := range []bool{false, true} {
			b.Run(fmt.Sprintf("groups=%d/binary=%t", groups, binary), func(b *testing.B) {
				benchMemory(b, redis.Options{Groups: groups, BinaryTATs: binary}, "B/bucket",
					func(key string) bucket.Op { return hourly(key, 1) })
			})
		}
	}
}

// BenchmarkMemoryPerWindowCounter is BenchmarkMemoryPerBucket for window
// counters: 1,000,000 sliding windows of 100 hits an hour (3:123000000 to
// 3:123999999, one hit each), stored through the source into a fresh Redis,
// in key format v1 and in v2 with about 10, 15 and 61 counters per hash.
// Run it once: -bench MemoryPerWindowCounter -benchtime 1x.
func BenchmarkMemoryPerWindowCounter(b *testing.B) {
	for _, groups := range []int{0, 100000, 65536, 16384} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			benchMemory(b, redis.Options{Groups: groups}, "B/counter",
				func(key string) bucket.Op { return windowOp(key, false, 100, 3_600_000, 1) })
		})
	}
}

// benchMemory spends op(key) once on each of 1,000,000 keys (3:123000000
// to 3:123999999), eight a call from 16 writers, through a source with
// opts into a fresh Redis, and reports used_memory grown per key as unit;
// in format v2 it checks that a hash is still a listpack.
func benchMemory(b *testing.B, opts redis.Options, unit string, op func(key string) bucket.Op) {
	const keys, width, writers = 1_000_000, 8, 16
	srv := redistest.NewStandalone(b)
	opts.Addrs = []string{srv.Addr()}
	// Generous timeouts: this measures memory, on a machine that may be
	// busy.
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = time.Second, 2*time.Second, time.Second
	src := benchSource(b, opts)
	for b.Loop() {
		srv.Flush(b)
		before := usedMemory(b, srv.Addr())
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				ops := make([]bucket.Op, width)
				out := make([]bucket.Outcome, width)
				for first := w * width; first < keys; first += writers * width {
					for j := range ops {
						ops[j] = op("3:" + strconv.Itoa(123_000_000+first+j))
					}
					if err := src.Spend(context.Background(), now, ops, out); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(usedMemory(b, srv.Addr())-before)/keys, unit)
		if opts.Groups > 0 {
			enc, err := redistest.Do(srv.Addr(), "OBJECT", "ENCODING", src.Key("3:123000000"))
			if err != nil || enc != "listpack" {
				b.Fatalf("a hash is encoded as %q (%v), want listpack", enc, err)
			}
		}
	}
}

// usedMemory reads used_memory from INFO memory.
func usedMemory(b *testing.B, addr string) int64 {
	b.Helper()
	n, err := strconv.ParseInt(redisInfo(b, addr, "memory")["used_memory"], 10, 64)
	if err != nil {
		b.Fatalf("used_memory: %v", err)
	}
	return n
}
