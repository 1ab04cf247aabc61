package redis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
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

// An idempotency record keeps the values it read as words of text, so a
// TAT stored in binary goes into it as decimal: here one whose binary
// form holds a space, a newline and a tab, which would split it into
// several words. The repeat answers exactly the first outcome, from
// either setting.
func TestOnceRecordsABinaryTATAsText(t *testing.T) {
	const tat = 1_790_000_000*1_000_000_000 + 0x200a0920 // low limb 537528608
	for _, b := range standalones {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			opts.Namespace = fmt.Sprintf("r%x:", rand.Uint64())
			src := openSource(t, opts)
			c := rawClient(t, opts)
			storeRaw(t, c, src, "b", storedTAT(redis.Options{BinaryTATs: true}, tat))
			rec := once.Record{Key: "rec", Fingerprint: "fp", Expires: tat + int64(time.Hour)}
			ops := []bucket.Op{hourly("b", 1)}
			at := tat - int64(time.Hour) // 100 hourly tokens: the bucket holds none of the hour to tat
			first := make([]bucket.Outcome, 1)
			if replayed, err := src.SpendOnce(context.Background(), at, rec, ops, first); err != nil || replayed {
				t.Fatalf("first SpendOnce: replayed %v, %v", replayed, err)
			}
			if first[0].Allowed || first[0].New.TAT != tat {
				t.Fatalf("first SpendOnce: %+v, want denied reading TAT %d", first[0], tat)
			}
			again := make([]bucket.Outcome, 1)
			if replayed, err := src.SpendOnce(context.Background(), at+1, rec, ops, again); err != nil || !replayed || again[0] != first[0] {
				t.Fatalf("repeat: %+v (replayed %v, %v), want %+v replayed", again[0], replayed, err, first[0])
			}
			recs, err := c.Keys(context.Background(), redis.RecordKeyPrefix+opts.Namespace+"*").Result()
			if err != nil || len(recs) != 1 {
				t.Fatalf("records %q (%v), want one", recs, err)
			}
			if v, err := c.Get(context.Background(), recs[0]).Result(); err != nil || !strings.HasSuffix(v, " "+strconv.FormatInt(tat, 10)) {
				t.Fatalf("record %q (%v), want it to end in the TAT in decimal", v, err)
			}
		})
	}
}
