module github.com/limiter-dev/limiter/bench/peers/redisrate

go 1.26.8

require (
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/limiter-dev/limiter v0.0.0
	github.com/limiter-dev/limiter/bench v0.0.0
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace (
	github.com/limiter-dev/limiter => ../../..
	github.com/limiter-dev/limiter/bench => ../..
)
