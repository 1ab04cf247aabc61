package redis_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
)

// A stored key holds the TAT in decimal and expires margin after the
// bucket is full again, counted from the now passed in (not Redis's
// clock): its TTL is ceil((TAT - now) / 1ms) + margin.
func TestKeyExpiresWhenFullPlusMargin(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			opts.ExpiryMargin = 7 * time.Second
			src := newSource(t, opts)
			c := rawClient(t, opts)
			ctx := context.Background()
			// 3 of 100 hourly tokens: full again in 3*36s = 108s, plus 1 ns
			// of offset so the rounding up to whole milliseconds shows.
			at := now + 1
			out := spend(t, src, at, hourly("a", 3))[0]
			v, err := c.Get(ctx, src.Key("a")).Result()
			if err != nil || v != strconv.FormatInt(out.NewTAT, 10) {
				t.Fatalf("stored %q (%v), want %d", v, err, out.NewTAT)
			}
			ttl, err := c.PTTL(ctx, src.Key("a")).Result()
			if err != nil {
				t.Fatal(err)
			}
			want := 108*time.Second + 7*time.Second
			// PTTL counts down in real time; allow for a slow machine.
			if ttl > want || ttl < want-2*time.Second {
				t.Fatalf("PTTL %v, want %v (TAT - now + margin)", ttl, want)
			}
			// A refund moves the TAT back, and the expiry with it.
			refund(t, src, at, hourly("a", 2))
			ttl, _ = c.PTTL(ctx, src.Key("a")).Result()
			if want := 36*time.Second + 7*time.Second; ttl > want || ttl < want-2*time.Second {
				t.Fatalf("PTTL after refund %v, want %v", ttl, want)
			}
		})
	}
}

// Redis holds only buckets that are not full: nothing is written for a
// check, a cost-0 spend or a refund of a missing bucket; a refund to full
// deletes the key; a key found full on read is deleted; Reset deletes.
func TestNoKeyForFullBucket(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			c := rawClient(t, opts)
			ctx := context.Background()
			exists := func(bucket string) bool {
				t.Helper()
				n, err := c.Exists(ctx, src.Key(bucket)).Result()
				if err != nil {
					t.Fatal(err)
				}
				return n == 1
			}
			check := hourly("c", 5)
			check.Mode = gcra.CheckOnly
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
			if n, err := src.Reset(ctx, now, []string{"a", "never"}); err != nil || n != 1 {
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
	opts := standalone(t)
	src := newSource(t, opts)
	c := rawClient(t, opts)
	ctx := context.Background()
	// A stale value written by hand, as a late expiry would leave it.
	if err := c.Set(ctx, src.Key("late"), strconv.FormatInt(now-1, 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	got := spend(t, src, now, hourly("late", 1))[0]
	if want := gcra.Spend(now, gcra.Missing, hourly("", 0).EmissionInterval, hourly("", 0).BurstOffset, 1); got.Decision != want {
		t.Fatalf("stale key: %+v, want a missing bucket's %+v", got.Decision, want)
	}
	// A TAT exactly at now is full too (refund: nothing given back).
	if err := c.Set(ctx, src.Key("edge"), strconv.FormatInt(now, 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := refund(t, src, now, hourly("edge", 1))[0]; got.Allowed || got.Remaining != 100 {
		t.Fatalf("refund of a TAT at now: %+v, want nothing given back", got)
	}
}

// A value that is not a TAT (someone else wrote under the prefix) is an
// error, never a silent decision.
func TestForeignValueIsAnError(t *testing.T) {
	opts := standalone(t)
	src := newSource(t, opts)
	c := rawClient(t, opts)
	if err := c.Set(context.Background(), src.Key("x"), "not a number", 0).Err(); err != nil {
		t.Fatal(err)
	}
	out := make([]gcra.Outcome, 1)
	if err := src.Spend(context.Background(), now, []gcra.Op{hourly("x", 1)}, out); err == nil {
		t.Fatal("Spend over a foreign value succeeded")
	}
}
