// Command redisrate-http is go-redis/redis_rate behind net/http, the peer
// the Redis source is compared with: POST /v1/spend decoded and answered as
// bench/bare does (bench/spendjson), each request one redis_rate Allow
// (GCRA in a Lua script, one EVALSHA) of 100 per second per id, the limit
// the harness spends on. The harness runs it with -sources …,redisrate.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/bench/spendjson"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	redisAddr := flag.String("redis", "127.0.0.1:6379", "the Redis to keep the buckets in, host:port")
	flag.Parse()
	rdb := goredis.NewClient(&goredis.Options{Addr: *redisAddr})
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		log.Fatal(err)
	}
	limiter := redis_rate.NewLimiter(rdb)
	limit := redis_rate.PerSecond(100)
	spendjson.Serve(*listen, spendjson.Handler(func(ctx context.Context, name, id string) (bool, int64, error) {
		res, err := limiter.Allow(ctx, name+":"+id, limit)
		if err != nil {
			return false, 0, err
		}
		return res.Allowed > 0, int64(res.Remaining), nil
	}))
}
