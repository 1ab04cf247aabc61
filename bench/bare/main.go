// Command bare is the benchmark's ceiling: a plain net/http server that
// decodes the same spend request and encodes a response of the same shape
// as limiter's, with encoding/json, and decides nothing. Whatever limiter
// costs beyond it is the price of rate limiting.
//
// With -redis it also makes one Redis round trip per request, an INCR of a
// key named after the request's id with go-redis's default client: the
// least any service that keeps its counters in Redis must do, one command
// per request (a counter that never resets: a cost, not a working
// limiter). It is the ceiling for the limiter's Redis source, which adds
// exact GCRA in a script and atomic batches on top.
//
// With -forward-auth HEADER it serves forward-auth calls instead
// (GET and HEAD /v1/forward-auth/{rule}), answered as the limiter answers
// an allowed one when the request carries HEADER: the reference the
// harness puts behind the same nginx as the limiter.
package main

import (
	"context"
	"flag"
	"log"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/bench/spendjson"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	redisAddr := flag.String("redis", "", "also INCR a Redis key per request, on this host:port")
	forwardAuth := flag.String("forward-auth", "", "serve forward-auth calls instead of spends, the id read from this request header; -listen may then be unix:PATH")
	flag.Parse()
	if *forwardAuth != "" {
		serveForwardAuth(*listen, *forwardAuth)
		return
	}
	decide := func(context.Context, string, string) (bool, int64, error) { return true, 99, nil }
	if *redisAddr != "" {
		rdb := goredis.NewClient(&goredis.Options{Addr: *redisAddr})
		if err := rdb.Ping(context.Background()).Err(); err != nil {
			log.Fatal(err)
		}
		decide = func(ctx context.Context, limit, id string) (bool, int64, error) {
			n, err := rdb.Incr(ctx, "bare:"+limit+":"+id).Result()
			return true, max(100-n, 0), err
		}
	}
	spendjson.Serve(*listen, spendjson.Handler(decide))
}
