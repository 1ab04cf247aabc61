package redis_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/source/redis"
	"github.com/limiter-dev/limiter/source/sourcetest"
)

// exactLimit is a limit as emission interval and burst.
type exactLimit struct{ ei, burst int64 }

const year = int64(365 * 24 * time.Hour)

// Limits whose arithmetic needs all 63 bits: decades and centuries of
// burst offset, nanosecond intervals with bursts near 2^63, and one whose
// spends saturate at the largest int64.
var exactLimits = []exactLimit{
	{ei: year, burst: 12},                  // a 12-year limit
	{ei: 3 * year, burst: 97},              // 291 years
	{ei: 1, burst: math.MaxInt64 / 2},      // 1 ns interval, burst near 2^62
	{ei: 7, burst: math.MaxInt64 / 7},      // burst offset just below 2^63
	{ei: int64(time.Second) / 3, burst: 3}, // an interval with a remainder
	{ei: 999_999_937, burst: 1_000_003},    // limbs that carry
	{ei: math.MaxInt64 / 5, burst: 5},      // every spend near the top
	{ei: int64(100 * time.Millisecond), burst: 10},
}

func (l exactLimit) op(key string, cost int64, mode bucket.Mode) bucket.Op {
	return bucket.Op{Key: key, EmissionInterval: l.ei, BurstOffset: l.ei * l.burst, Cost: cost, Mode: mode}
}

// Random batches at times near 2^62 (and, for one regime, before 1970)
// with limits of decades to centuries decide exactly as the model, to the
// nanosecond, and the stored values are the model's TATs in decimal.
func TestExactAt63Bits(t *testing.T) {
	regimes := []struct {
		name   string
		start  int64
		limits []exactLimit
	}{
		{"near 2^62", 1<<62 + 123_456_789, exactLimits},
		{"2026", now, exactLimits},
		// Before 1970 gcra's int64 arithmetic stays exact only while
		// now - burstOffset fits, so the limits here are shorter.
		{"before 1970", -3_000_000_000_123_456_789, []exactLimit{{year, 12}, {int64(time.Second) / 3, 3}, {999_999_937, 1_000_003}}},
	}
	for _, b := range backends {
		for _, rg := range regimes {
			t.Run(b.name+"/"+rg.name, func(t *testing.T) {
				opts := b.opts(t)
				src := newSource(t, opts)
				rng := rand.New(rand.NewPCG(uint64(rg.start), 3))
				keys := make([]string, 8)
				for i := range keys {
					keys[i] = fmt.Sprintf("x:%d", i)
				}
				m := sourcetest.Model{}
				at := rg.start
				for step := range 400 {
					switch rng.IntN(10) {
					case 0:
						if at < rg.start+100*year { // never near overflow
							at += rng.Int64N(50 * year)
						}
					case 1:
						at += rng.Int64N(int64(time.Hour))
					default:
						at += rng.Int64N(int64(2 * time.Second))
					}
					n := 1 + rng.IntN(3)
					perm := rng.Perm(len(keys))[:n]
					ops := make([]bucket.Op, n)
					for i, k := range perm {
						l := rg.limits[k%len(rg.limits)]
						var cost int64
						switch rng.IntN(4) {
						case 0:
							cost = l.burst
						case 1:
							cost = min(1, l.burst)
						default:
							cost = rng.Int64N(l.burst + 1)
						}
						ops[i] = l.op(keys[k], cost, bucket.Mode(rng.IntN(3)))
					}
					applyAsModel(t, src, m, step, at, ops, rng.IntN(4) == 0)
				}
				checkStored(t, opts, src, m, at)
			})
		}
	}
}

// applyAsModel spends ops (or refunds them) at at, and fails the test
// unless every outcome is the model's; the model then holds what the
// source should.
func applyAsModel(t *testing.T, src *redis.Source, m sourcetest.Model, step int, at int64, ops []bucket.Op, isRefund bool) {
	t.Helper()
	got := make([]bucket.Outcome, len(ops))
	var err error
	if isRefund {
		err = src.Refund(context.Background(), at, ops, got)
	} else {
		err = src.Spend(context.Background(), at, ops, got)
	}
	if err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	want := m.Apply(at, ops, isRefund)
	for i := range ops {
		if got[i] != want[i] {
			t.Fatalf("step %d (refund=%v) op %d %+v at %d:\n got %+v\nwant %+v", step, isRefund, i, ops[i], at, got[i], want[i])
		}
	}
}

// checkStored compares what Redis holds with the model: every bucket
// that is not full at now is stored as its TAT in decimal, and no full
// bucket is stored.
func checkStored(t *testing.T, opts redis.Options, src *redis.Source, m sourcetest.Model, at int64) {
	t.Helper()
	c := rawClient(t, opts)
	for bucket, st := range m {
		tat := st.TAT
		v, ok := stored(t, c, src, bucket)
		switch {
		case tat <= at:
			// Full by now: a stale key may linger until its expiry or
			// next read, and must read as full; nothing else to check.
		case !ok:
			t.Errorf("bucket %s (TAT %d after now %d) is not stored", bucket, tat, at)
		case v != strconv.FormatInt(tat, 10):
			t.Errorf("bucket %s stored %q, want %d", bucket, v, tat)
		}
	}
}

// rawClient is a plain go-redis client on the same Redis, for looking at
// what the source stored.
func rawClient(t testing.TB, opts redis.Options) goredis.UniversalClient {
	t.Helper()
	var c goredis.UniversalClient
	if opts.Cluster {
		c = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: opts.Addrs})
	} else {
		c = goredis.NewClient(&goredis.Options{Addr: opts.Addrs[0]})
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The script reads a stored TAT by one of two routes: values of 16 digits
// and more through one inexact tonumber corrected by the exact low limb,
// shorter or negative ones by splitting the text. Each stored value here
// (at the edges of both routes, of the limbs and of int64) is spent on
// once, and the TAT the script writes back must be the stored one plus the
// increment, digit for digit.
func TestStoredTATsReadExactly(t *testing.T) {
	tats := []int64{
		999_999_999_999_999,       // 15 digits: split
		1_000_000_000_000_000,     // 16 digits: the tonumber route
		1_000_000_000_999_999_999, // low limb at its top
		1_000_000_001_000_000_000, // low limb zero
		now + 1,
		4_503_599_627_370_497,   // 2^52 + 1
		9_007_199_254_740_993,   // 2^53 + 1: the first integer a double misses
		999_999_999_999_999_999, // 18 nines
		1 << 62,                 // and its neighbours
		1<<62 - 1,
		math.MaxInt64 - 1_000_000,  // room for the increment below
		-1_000_000_000_000_000_001, // negative: split
	}
	const increment = 999_999 // carries into the high limb from 1e9 - 1
	for _, b := range standalones {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			c := rawClient(t, opts)
			for i, tat := range tats {
				key := fmt.Sprintf("p:%d", i)
				storeRaw(t, c, src, key, strconv.FormatInt(tat, 10))
				at := tat - 1 // the bucket is not full
				op := bucket.Op{Key: key, EmissionInterval: increment, BurstOffset: 10 * increment, Cost: 1}
				out := spend(t, src, at, op)
				if !out[0].Allowed || out[0].New.TAT != tat+increment {
					t.Fatalf("stored %d: outcome %+v, want allowed with new TAT %d", tat, out[0], tat+increment)
				}
				got, _ := stored(t, c, src, key)
				if want := strconv.FormatInt(tat+increment, 10); got != want {
					t.Errorf("stored %d: the script wrote %s, want %s", tat, got, want)
				}
			}
		})
	}
}
