package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/source/redis"
)

// rateOp is an op of a rate-counter limit of rate hits per second over
// window seconds, whose box keeps an id it boxes until until.
func rateOp(key string, window, rate, cost int64, until int64) bucket.Op {
	return bucket.Op{Key: key, Algorithm: bucket.RateCounter, Rate: ratecounter.Limit{Window: window, Rate: rate},
		Cost: cost, Box: key, BoxUntil: until}
}

// withBox returns op with a penalty box that keeps an id it boxes until
// until, as the Limiter makes the ops of a limit with a penalty.
func withBox(op bucket.Op, until int64) bucket.Op {
	op.Box, op.BoxUntil = op.Key, until
	return op
}

// withMode returns op in mode m.
func withMode(op bucket.Op, m bucket.Mode) bucket.Op {
	op.Mode = m
	return op
}

// secs is n seconds in ns.
func secs(n int64) int64 { return n * int64(time.Second) }

// call applies c at at and returns its result.
func call(t testing.TB, src *redis.Source, at int64, c bucket.Call) bucket.CallResult {
	t.Helper()
	var res bucket.CallResult
	if err := src.Call(context.Background(), at, &c, &res); err != nil {
		t.Fatalf("Call %+v: %v", c, err)
	}
	return res
}

// lookup reads the counter under key and the box entry under box without
// changing them.
func lookup(t testing.TB, src *redis.Source, at int64, key, box string) bucket.CallResult {
	t.Helper()
	return call(t, src, at, bucket.Call{Counters: []bucket.CounterCheck{{Key: key}}, Box: box, Action: bucket.BoxRead})
}

// windowHits returns the hits of a counter over the last w seconds at at.
func windowHits(c ratecounter.Counter, at, w int64) int64 {
	return c.Window(ratecounter.Second(at), w)
}

// sameCounts reports whether two counters count the same at second s:
// every rate and bucket Fastly reads (a counter's Last may differ where
// one source forgot a counter that counts nothing and the other kept it).
func sameCounts(a, b ratecounter.Counter, s int64) bool {
	for t := s - ratecounter.Seconds + 1; t <= s; t++ {
		if a.At(t) != b.At(t) {
			return false
		}
	}
	return true
}

// normal returns an outcome with a box expiry not after now read as 0: a
// box entry whose time is up is the same as none, and Redis forgets it a
// margin later (a v2 sweep, sooner) while a model keeps it.
func normal(o bucket.Outcome, now int64) bucket.Outcome {
	if o.New.BoxExpires <= now {
		o.New.BoxExpires = 0
	}
	return o
}

// rateLimit is a rate counter's limit of rate hits per second over window
// seconds.
func rateLimit(window, rate int64) ratecounter.Limit {
	return ratecounter.Limit{Window: window, Rate: rate}
}
