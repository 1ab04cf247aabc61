// Package redisrate holds only a benchmark: go-redis/redis_rate's Allow
// (GCRA in a Lua script, one script call per decision), the peer the
// Redis source's Go benchmarks are compared with, under the same load as
// source/redis's BenchmarkLimiterSpendRedis: 50 concurrent callers over
// 10,000 subscribers, against a private redis-server on loopback.
//
// It is a module of its own so that the limiter's own module never
// depends on the peer it is measured against. Run it from this directory:
//
//	go test -run '^$' -bench . -benchtime 3s
package redisrate
