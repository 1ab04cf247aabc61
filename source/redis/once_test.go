package redis_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/source/redis"
)

// On a cluster, a batch across hash slots cannot be recorded in the step
// that applies it. While its claim is pending (its first call still
// running, or failed with an unknown outcome), a retry is refused with
// once.ErrUnsettled and spends nothing; the claim's record, once written,
// answers retries.
func TestOnceAcrossSlotsWhileUnsettled(t *testing.T) {
	opts := cluster(t)
	src := newSource(t, opts)
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: opts.Addrs})
	defer c.Close()
	ops := []bucket.Op{hourly("u:a", 1), hourly("u:b", 1), hourly("u:c", 1)}
	if redis.Slot(src.Key("u:a")) == redis.Slot(src.Key("u:b")) {
		t.Fatal("the test's buckets share a slot; pick others")
	}
	rec := once.Record{Key: "unsettled", Fingerprint: "fp-1", Expires: now + int64(10*time.Minute)}
	pending := rec.Fingerprint + " " + strconv.FormatInt(rec.Expires, 10) + " P"
	if err := c.Set(context.Background(), src.ClaimKey(rec.Key), pending, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	out := make([]bucket.Outcome, len(ops))
	if _, err := src.SpendOnce(context.Background(), now, rec, ops, out); !errors.Is(err, once.ErrUnsettled) {
		t.Fatalf("a retry while the claim is pending: %v, want once.ErrUnsettled", err)
	}
	for _, op := range ops {
		if r := spend(t, src, now, hourly(op.Key, 0))[0].Remaining; r != 100 {
			t.Fatalf("%s after a refused retry: %d remaining, want 100", op.Key, r)
		}
	}
	// With the claim gone (expired), the call runs, and its record answers.
	if err := c.Del(context.Background(), src.ClaimKey(rec.Key)).Err(); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, true} {
		replayed, err := src.SpendOnce(context.Background(), now+int64(i), rec, ops, out)
		if err != nil || replayed != want || !out[0].Allowed || out[0].Remaining != 99 {
			t.Fatalf("call %d: %+v replayed=%v err=%v, want 99 remaining, replayed=%v", i, out, replayed, err, want)
		}
	}
}
