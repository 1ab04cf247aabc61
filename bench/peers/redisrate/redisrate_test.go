package redisrate

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/internal/redistest"
)

// redisCPU is the CPU time, user and system, that the Redis at addr has
// used so far.
func redisCPU(b *testing.B, addr string) float64 {
	info, err := redistest.Do(addr, "INFO", "cpu")
	if err != nil {
		b.Fatal(err)
	}
	var cpu float64
	for line := range strings.SplitSeq(info, "\n") {
		name, value, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_user" || name == "used_cpu_sys" {
			f, _ := strconv.ParseFloat(value, 64)
			cpu += f
		}
	}
	return cpu
}

// BenchmarkRedisRateAllow measures redis_rate's Allow with 50 concurrent
// callers, each decision one EVALSHA, with go-redis's default pool (as the
// limiter's Redis source uses), walking the ids as BenchmarkLimiterSpendRedis
// does. The limit never denies, so every decision writes, as there.
func BenchmarkRedisRateAllow(b *testing.B) {
	srv := redistest.NewStandalone(b) // a private redis-server, as the limiter's benchmarks use
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	limiter := redis_rate.NewLimiter(c)
	limit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Hour}
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("user%d", i)
	}
	b.SetParallelism(max(1, 50/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	before := redisCPU(b, srv.Addr())
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i += 7919 {
			if _, err := limiter.Allow(context.Background(), ids[i%len(ids)], limit); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric((redisCPU(b, srv.Addr())-before)*1e6/float64(b.N), "redis-µs/decision")
}
