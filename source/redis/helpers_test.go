package redis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/window"
	"github.com/limiter-dev/limiter/source/redis"
)

var _ ratelimits.Source = (*redis.Source)(nil)

// A realistic now: unix nanoseconds in 2026, past 2^60.
const now int64 = 1_790_000_000_123_456_789

// backend is one kind of Redis a test runs against.
type backend struct {
	name string
	opts func(t testing.TB) redis.Options
}

func standalone(t testing.TB) redis.Options {
	return redis.Options{Addrs: []string{redistest.Standalone(t).Addr()}}
}

func cluster(t testing.TB) redis.Options {
	return redis.Options{Addrs: redistest.SharedCluster(t).Addrs(), Cluster: true}
}

// grouped returns opts in key format v2 with the given number of groups.
func grouped(opts func(testing.TB) redis.Options, groups int) func(testing.TB) redis.Options {
	return func(t testing.TB) redis.Options {
		o := opts(t)
		o.Groups = groups
		return o
	}
}

// binaryTATs returns opts with TATs written in binary.
func binaryTATs(opts func(testing.TB) redis.Options) func(testing.TB) redis.Options {
	return func(t testing.TB) redis.Options {
		o := opts(t)
		o.BinaryTATs = true
		return o
	}
}

// backends run every shared test in both key formats, and with binary
// TATs in each (v1 on one Redis, where packed calls take the script's
// fast path; v2 on a cluster, where every call takes its general path).
// Standalone v2 has only 4 groups, so a test's buckets share hashes; the
// cluster's 1,024 spread a batch's buckets over several slots, as v1's do.
var backends = []backend{
	{"Standalone", standalone},
	{"Cluster", cluster},
	{"StandaloneV2", grouped(standalone, 4)},
	{"ClusterV2", grouped(cluster, 1024)},
	{"StandaloneBinary", binaryTATs(standalone)},
	{"ClusterV2Binary", binaryTATs(grouped(cluster, 1024))},
}

// standalones are the standalone backends, for tests that write to Redis
// by hand.
var standalones = []backend{backends[0], backends[2], backends[4]}

// storedTAT is tat as a source with opts stores it: decimal text, or
// binary ('T', then tat's floored quotient and remainder by 1e9 as a
// 5-byte signed and a 4-byte unsigned big-endian integer).
func storedTAT(opts redis.Options, tat int64) string {
	if !opts.BinaryTATs {
		return strconv.FormatInt(tat, 10)
	}
	hi, lo := tat/1e9, tat%1e9
	if lo < 0 {
		hi, lo = hi-1, lo+1e9
	}
	return string([]byte{'T', byte(hi >> 32), byte(hi >> 24), byte(hi >> 16), byte(hi >> 8), byte(hi),
		byte(lo >> 24), byte(lo >> 16), byte(lo >> 8), byte(lo)})
}

// newSource opens a source with a namespace of its own, so tests sharing
// a server never see each other's buckets (even when repeated with
// -count), and closes it when the test ends.
func newSource(t testing.TB, opts redis.Options) *redis.Source {
	t.Helper()
	opts.Namespace = fmt.Sprintf("t%x:", rand.Uint64())
	return openSource(t, opts)
}

// openSource opens a source as opts say (sources opened with the same
// namespace share their buckets, as processes of one deployment do), and
// closes it when the test ends.
func openSource(t testing.TB, opts redis.Options) *redis.Source {
	t.Helper()
	if opts.ReadTimeout == 0 {
		// The race detector and a loaded CI machine slow everything down;
		// these tests check correctness, the fault tests check timeouts.
		opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = time.Second, time.Second, time.Second
	}
	src, err := redis.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := src.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return src
}

// hourly is a limit of burst 100 refilling over an hour.
func hourly(key string, cost int64) bucket.Op {
	ei := int64(36 * time.Second)
	return bucket.Op{Key: key, EmissionInterval: ei, BurstOffset: ei * 100, Cost: cost}
}

func spend(t testing.TB, src ratelimits.Source, at int64, ops ...bucket.Op) []bucket.Outcome {
	t.Helper()
	out := make([]bucket.Outcome, len(ops))
	if err := src.Spend(context.Background(), at, ops, out); err != nil {
		t.Fatalf("Spend: %v", err)
	}
	return out
}

func refund(t testing.TB, src ratelimits.Source, at int64, ops ...bucket.Op) []bucket.Outcome {
	t.Helper()
	out := make([]bucket.Outcome, len(ops))
	if err := src.Refund(context.Background(), at, ops, out); err != nil {
		t.Fatalf("Refund: %v", err)
	}
	return out
}

// stored returns what Redis holds for bucket: its key's value in key
// format v1, its field in v2.
func stored(t testing.TB, c goredis.UniversalClient, src *redis.Source, bucket string) (string, bool) {
	t.Helper()
	var v string
	var err error
	if f := src.Field(bucket); f != "" {
		v, err = c.HGet(context.Background(), src.Key(bucket), f).Result()
	} else {
		v, err = c.Get(context.Background(), src.Key(bucket)).Result()
	}
	if errors.Is(err, goredis.Nil) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

// storeRaw writes value for bucket by hand, where the source would keep
// it, without an expiry.
func storeRaw(t testing.TB, c goredis.UniversalClient, src *redis.Source, bucket, value string) {
	t.Helper()
	var err error
	if f := src.Field(bucket); f != "" {
		err = c.HSet(context.Background(), src.Key(bucket), f, value).Err()
	} else {
		err = c.Set(context.Background(), src.Key(bucket), value, 0).Err()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// windowOp is a window op: a sliding window of count hits per period ms,
// or a fixed one when fixed is set.
func windowOp(key string, fixed bool, count, period, cost int64) bucket.Op {
	alg := bucket.SlidingWindow
	if fixed {
		alg = bucket.FixedWindow
	}
	return bucket.Op{Key: key, Algorithm: alg, Window: window.Limit{Count: count, Period: period, Fixed: fixed}, Cost: cost}
}

// perMinute is a sliding window of 100 hits a minute.
func perMinute(key string, cost int64) bucket.Op {
	return windowOp(key, false, 100, 60_000, cost)
}

// fixedMinute is a fixed window of 100 hits a minute.
func fixedMinute(key string, cost int64) bucket.Op {
	return windowOp(key, true, 100, 60_000, cost)
}

// checkOnly returns op in mode check-only.
func checkOnly(op bucket.Op) bucket.Op {
	op.Mode = bucket.CheckOnly
	return op
}

// counterText is a window counter as the source stores it.
func counterText(c window.Counter) string {
	return fmt.Sprintf("%d:%d:%d:%d", c.Period, c.Start/c.Period, c.Cur, c.Prev)
}

// msToNs is unix ms in ns.
func msToNs(ms int64) int64 { return ms * int64(time.Millisecond) }

// deadlineTTL is the TTL a key gets when a TAT or a box entry's expiry
// (unix ns) is written at now with this margin: its deadline, the margin
// after it in whole ms rounded up to a multiple of half the margin, less
// now in whole ms (docs/redis.md, "Expiry").
func deadlineTTL(at, now int64, margin time.Duration) time.Duration {
	m := margin.Milliseconds()
	step := max(1, m/2)
	d := (ceilDiv(at, 1e6) + m + step - 1) / step * step
	return time.Duration(d-now/1e6) * time.Millisecond
}

// ceilDiv is ceil(a / b) for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
