// Package redisrate holds the measurements of go-redis/redis_rate, the
// peer the speed target names (GCRA in a Lua script, one script call per
// decision): BenchmarkRedisRateAllow, under the load of source/redis's
// BenchmarkLimiterSpendRedis (50 concurrent callers over 10,000
// subscribers, against a private redis-server on loopback), and
// cmd/redisrate-http, redis_rate behind net/http for the harness
// (go -C bench run ./harness -sources memory,redis,redisrate).
//
// It is a module of its own so that the limiter's own module never
// depends on the peer it is measured against. Run the benchmark from this
// directory:
//
//	go test -run '^$' -bench . -benchtime 3s
package redisrate
