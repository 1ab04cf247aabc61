package redisrate

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// startRedis runs a private redis-server (no persistence) on a free
// loopback port until the benchmark ends.
func startRedis(b *testing.B) *redis.Client {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		b.Fatalf("redis-server: %v (install it: apt-get install -y redis-server)", err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
	b.Cleanup(func() { c.Close() })
	for deadline := time.Now().Add(5 * time.Second); c.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			b.Fatal("redis-server did not answer within 5 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c
}

// redisCPU is the CPU time, user and system, that Redis has used so far.
func redisCPU(b *testing.B, c *redis.Client) float64 {
	info, err := c.Info(context.Background(), "cpu").Result()
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
	c := startRedis(b)
	limiter := redis_rate.NewLimiter(c)
	limit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Hour}
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("user%d", i)
	}
	b.SetParallelism(max(1, 50/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	before := redisCPU(b, c)
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
	b.ReportMetric((redisCPU(b, c)-before)*1e6/float64(b.N), "redis-µs/decision")
}
