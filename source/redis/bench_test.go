package redis_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
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

// setParallelism makes b.RunParallel run about benchCallers goroutines.
func setParallelism(b *testing.B) {
	b.SetParallelism(max(1, benchCallers/runtime.GOMAXPROCS(0)))
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
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
	cfg, err := ratelimits.ParseConfig("defaults.yaml", []byte(benchDefaults), "overrides.yaml", nil)
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, benchIDs)
	for i := range ids {
		ids[i] = fmt.Sprintf("user%d", i)
	}
	for _, be := range backends {
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
			for i := 0; b.Loop(); i++ {
				spendOne(b, i)
			}
			reportRate(b)
		})
		b.Run(be.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
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
	for _, be := range backends {
		opts := be.opts(b)
		opts.Namespace = "bench:"
		src := benchSource(b, opts)
		for _, width := range []int{1, 3} {
			b.Run(fmt.Sprintf("%s/batch=%d", be.name, width), func(b *testing.B) {
				b.ReportAllocs()
				setParallelism(b)
				b.RunParallel(func(pb *testing.PB) {
					ops := make([]gcra.Op, width)
					out := make([]gcra.Outcome, width)
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
