package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/calendar"
	"github.com/limiter-dev/limiter/source/redis"
)

// calendarOp is an op of a limit of count hits per month in Paris.
func calendarOp(t testing.TB, key string, count, cost int64) bucket.Op {
	t.Helper()
	c, err := calendar.New(calendar.Month, "Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	return bucket.Op{Key: key, Algorithm: bucket.Calendar, Calendar: calendar.Limit{Count: count, Tag: c.Tag()}, Periods: c, Cost: cost}
}

// A calendar counter is stored under its bucket's name followed by its
// period (in the bucket's slot, or the id's for a limit with a box), as a
// fixed counter "1:<end−2>:<hits>:0", and its key expires the margin after
// the period's end, counted from the now passed in.
func TestCalendarKeyLayoutAndExpiry(t *testing.T) {
	opts := standalone(t)
	opts.ExpiryMargin = 7 * time.Second
	src := newSource(t, opts)
	c := rawClient(t, opts)
	ctx := context.Background()
	at := time.Date(2026, 12, 31, 22, 0, 0, 0, time.UTC).UnixNano()
	start := time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC).UnixMilli()
	end := time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC).UnixMilli()

	op := calendarOp(t, "130:alice", 10, 4)
	if out := spend(t, src, at, op)[0]; !out.Allowed || out.Remaining != 6 || out.Period.End != end {
		t.Fatalf("spend: %+v", out)
	}
	key := src.Key("130:alice") + fmt.Sprintf("@month@Europe/Paris@%d", start)
	if v, err := c.Get(ctx, key).Result(); err != nil || v != fmt.Sprintf("1:%d:4:0", end-2) {
		t.Fatalf("GET %s = %q, %v", key, v, err)
	}
	if redis.Slot(key) != redis.Slot(src.Key("130:alice")) {
		t.Errorf("%s is not in its bucket's slot", key)
	}
	want := time.Hour + 7*time.Second
	if ttl, err := c.PTTL(ctx, key).Result(); err != nil || ttl > want || ttl < want-2*time.Second {
		t.Fatalf("PTTL %v (%v), want %v (end − now + margin)", ttl, err, want)
	}

	// With a box, the counter is named by the id, beside its box entry.
	boxed := calendarOp(t, "130:bob", 1, 1)
	boxed.Box, boxed.BoxUntil = boxed.Key, at+int64(time.Hour)
	spend(t, src, at, boxed)
	if out := spend(t, src, at, boxed)[0]; out.Allowed || !out.Penalized {
		t.Fatalf("a second hit: %+v, want denied and boxed", out)
	}
	keys, err := c.Keys(ctx, "*{bob}130@month@Europe/Paris@*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys of bob's counter: %v, %v", keys, err)
	}
	boxes, err := c.Keys(ctx, "*{bob}130!").Result()
	if err != nil || len(boxes) != 1 || redis.Slot(boxes[0]) != redis.Slot(keys[0]) {
		t.Fatalf("bob's box entry %v is not in the slot of %v (%v)", boxes, keys, err)
	}

	// In January the counter is another key; December's is not read.
	next := time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC).UnixNano()
	if out := spend(t, src, next, calendarOp(t, "130:alice", 10, 10))[0]; !out.Allowed {
		t.Fatalf("January: %+v", out)
	}
}
