package redis_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/concurrency"
)

// An acquire and the release of its lease, on a bucket that already holds
// held live leases of a limit of 10,000: every decision reads and writes
// the whole lease set (about 50 bytes a lease), so its cost grows with the
// leases held, up to the count. Its redis-µs/decision is per pair.
func BenchmarkSourceLeaseAcquireRelease(b *testing.B) {
	for _, held := range []int{0, 100, 9_999} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			opts := standalone(b)
			src := newSource(b, opts)
			c := rawClient(b, opts)
			const count, ttl = 10_000, 3_600_000
			if held > 0 {
				parts := make([]string, held)
				exp := now/1_000_000 + ttl
				for i := range parts {
					parts[i] = fmt.Sprintf("%032x:1:%d", i+1, exp)
				}
				storeRaw(b, c, src, "c:b", "L"+strings.Join(parts, ","))
			}
			measureRedis(b, opts.Addrs) // per pair: two decisions
			ctx := context.Background()
			out := make([]bucket.Outcome, 1)
			acq := bucket.Op{Key: "c:b", Algorithm: bucket.Concurrency, Lease: concurrency.Limit{Count: count, TTL: ttl}, Cost: 1}
			for b.Loop() {
				acq.LeaseID = concurrency.NewID()
				if err := src.Spend(ctx, now, []bucket.Op{acq}, out); err != nil || !out[0].Allowed {
					b.Fatalf("acquire: %+v, %v", out[0].Decision, err)
				}
				rel := acq
				rel.LeaseAction = bucket.Release
				if err := src.Refund(ctx, now, []bucket.Op{rel}, out); err != nil || !out[0].Allowed {
					b.Fatalf("release: %+v, %v", out[0].Decision, err)
				}
			}
		})
	}
}
