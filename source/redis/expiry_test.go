package redis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
	"github.com/limiter-dev/limiter/source/redis"
)

// A stored bucket holds the TAT in decimal, and its key expires at the
// TAT's deadline, counted in the clock of the now passed in (not Redis's):
// the margin after the TAT in whole ms, rounded up to a multiple of half
// the margin. In key format v2 the key is the bucket's hash, whose expiry
// only grows: it must outlive every bucket in it.
func TestKeyExpiresWhenFullPlusMargin(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			opts.ExpiryMargin = 7 * time.Second
			src := newSource(t, opts)
			c := rawClient(t, opts)
			ctx := context.Background()
			pttl := func() time.Duration {
				t.Helper()
				ttl, err := c.PTTL(ctx, src.Key("a")).Result()
				if err != nil {
					t.Fatal(err)
				}
				return ttl
			}
			// 3 of 100 hourly tokens: full again in 3*36s = 108s, plus 1 ns
			// of offset so the rounding up to whole milliseconds shows.
			at := now + 1
			out := spend(t, src, at, hourly("a", 3))[0]
			if v, ok := stored(t, c, src, "a"); !ok || v != storedTAT(opts, out.New.TAT) {
				t.Fatalf("stored %q (%v), want %d", v, ok, out.New.TAT)
			}
			// 108 s + 1 ms + 7 s = 115.001 s, rounded up to 3.5 s steps
			// (of unix ms, here whole seconds from 0.123 s into one).
			want := deadlineTTL(out.New.TAT, at, 7*time.Second)
			if lo, hi := 115*time.Second, 115*time.Second+3500*time.Millisecond; want < lo || want > hi {
				t.Fatalf("deadlineTTL = %v, want in [%v, %v]", want, lo, hi)
			}
			// PTTL counts down in real time; allow for a slow machine.
			if ttl := pttl(); ttl > want || ttl < want-2*time.Second {
				t.Fatalf("PTTL %v, want %v (the TAT's deadline - now)", ttl, want)
			}
			// A refund moves the TAT back, and a v1 key's expiry with it.
			back := refund(t, src, at, hourly("a", 2))[0]
			if opts.Groups == 0 {
				want = deadlineTTL(back.New.TAT, at, 7*time.Second)
			}
			if ttl := pttl(); ttl > want || ttl < want-2*time.Second {
				t.Fatalf("PTTL after refund %v, want %v", ttl, want)
			}
			if opts.Groups == 0 {
				return
			}
			// A later bucket of the same hash lengthens its expiry.
			other := sameGroup(t, src, "a")
			spend(t, src, at, hourly(other, 10))
			if want := 360*time.Second + 7*time.Second; pttl() < want-2*time.Second {
				t.Fatalf("PTTL after a longer bucket joined the hash: %v, want %v", pttl(), want)
			}
		})
	}
}

// sameGroup returns a bucket key other than bucket that src keeps in the
// same Redis key (in key format v2).
func sameGroup(t *testing.T, src *redis.Source, bucket string) string {
	t.Helper()
	for i := range 100_000 {
		if k := fmt.Sprintf("g:%d", i); k != bucket && src.Key(k) == src.Key(bucket) {
			return k
		}
	}
	t.Fatalf("no bucket shares %s's key", bucket)
	return ""
}

// Redis holds only buckets that are not full: nothing is written for a
// check, a cost-0 spend or a refund of a missing bucket; a refund to full
// deletes the bucket; a bucket found full on read is deleted; Reset
// deletes.
func TestNoKeyForFullBucket(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			c := rawClient(t, opts)
			ctx := context.Background()
			exists := func(bucket string) bool {
				t.Helper()
				_, ok := stored(t, c, src, bucket)
				return ok
			}
			check := hourly("c", 5)
			check.Mode = bucket.CheckOnly
			spend(t, src, now, check, hourly("z", 0))
			refund(t, src, now, hourly("r", 1))
			if exists("c") || exists("z") || exists("r") {
				t.Fatal("a check, a cost-0 spend or a refund of a missing bucket stored a key")
			}
			spend(t, src, now, hourly("a", 2))
			refund(t, src, now, hourly("a", 2))
			if exists("a") {
				t.Fatal("a bucket refunded to full is still stored")
			}
			spend(t, src, now, hourly("a", 1))
			// An hour later the bucket is full; reading it removes the key.
			if got := spend(t, src, now+int64(time.Hour), hourly("a", 0))[0]; got.Remaining != 100 {
				t.Fatalf("refilled bucket reads %d remaining, want 100", got.Remaining)
			}
			if exists("a") {
				t.Fatal("a bucket read as full is still stored")
			}
			spend(t, src, now, hourly("a", 1))
			if n, err := src.Reset(ctx, now, redis.ResetOps("a", "never")); err != nil || n != 1 {
				t.Fatalf("Reset = %d, %v; want 1", n, err)
			}
			if exists("a") {
				t.Fatal("Reset left the key")
			}
		})
	}
}

// A key that expired early (a fake clock behind Redis's, a short margin)
// or late (a fake clock far ahead) never changes an answer: an expired key
// is a full bucket, and a key with a TAT not after now reads as full.
func TestEarlyOrLateExpiryChangesNoAnswer(t *testing.T) {
	for _, b := range standalones {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			c := rawClient(t, opts)
			// A stale value written by hand, as a late expiry would leave it.
			storeRaw(t, c, src, "late", strconv.FormatInt(now-1, 10))
			got := spend(t, src, now, hourly("late", 1))[0]
			w := gcra.Spend(now, gcra.Missing, hourly("", 0).EmissionInterval, hourly("", 0).BurstOffset, 1)
			if want := (bucket.Decision{Allowed: w.Allowed, Remaining: w.Remaining, RetryIn: w.RetryIn, ResetIn: w.ResetIn}); got.Decision != want {
				t.Fatalf("stale key: %+v, want a missing bucket's %+v", got.Decision, want)
			}
			// A TAT exactly at now is full too (refund: nothing given back).
			storeRaw(t, c, src, "edge", strconv.FormatInt(now, 10))
			if got := refund(t, src, now, hourly("edge", 1))[0]; got.Allowed || got.Remaining != 100 {
				t.Fatalf("refund of a TAT at now: %+v, want nothing given back", got)
			}
		})
	}
}

// A value that is not a TAT (someone else wrote under the prefix) is an
// error, never a silent decision; so is a key of another Redis type,
// which the spend leaves as it was.
func TestForeignValueIsAnError(t *testing.T) {
	for _, b := range standalones {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			c := rawClient(t, opts)
			storeRaw(t, c, src, "x", "not a number")
			out := make([]bucket.Outcome, 1)
			if err := src.Spend(context.Background(), now, []bucket.Op{hourly("x", 1)}, out); err == nil {
				t.Fatal("Spend over a foreign value succeeded")
			}
			if src.Field("y") != "" {
				return // a grouped bucket is a field: it has no type of its own
			}
			if err := c.RPush(context.Background(), src.Key("y"), "a list").Err(); err != nil {
				t.Fatal(err)
			}
			if err := src.Spend(context.Background(), now, []bucket.Op{hourly("y", 1)}, out); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Fatalf("Spend over a list: %v, want Redis's WRONGTYPE error", err)
			}
			if got, err := c.LRange(context.Background(), src.Key("y"), 0, -1).Result(); err != nil || len(got) != 1 || got[0] != "a list" {
				t.Fatalf("the list after the spend: %q, %v; want it as it was", got, err)
			}
		})
	}
}
