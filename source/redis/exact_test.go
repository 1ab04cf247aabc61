package redis_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/window"
	"github.com/limiter-dev/limiter/source/redis"
	"github.com/limiter-dev/limiter/source/sourcetest"
)

// exactLimit is a limit as emission interval and burst.
type exactLimit struct{ ei, burst int64 }

const year = int64(365 * 24 * time.Hour)

// Limits whose arithmetic needs all 63 bits: decades and centuries of
// burst offset, nanosecond intervals with bursts near 2^63, and one whose
// spends would pass the largest int64.
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
// source should. It returns the outcomes.
func applyAsModel(t *testing.T, src *redis.Source, m sourcetest.Model, step int, at int64, ops []bucket.Op, isRefund bool) []bucket.Outcome {
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
		if ops[i].Window.Fixed && ops[i].Algorithm.Windowed() {
			// What a fixed window holds of the window before its own
			// counts in no decision of this process (only one whose clock
			// is behind reads it). On a cluster the model may know it
			// where Redis does not: the give-back of a denied batch across
			// slots deletes a counter of another period that the batch's
			// spend had replaced.
			got[i].New.Window.Prev, want[i].New.Window.Prev = 0, 0
		}
		if got[i] != want[i] {
			t.Fatalf("step %d (refund=%v) op %d %+v at %d:\n got %+v\nwant %+v", step, isRefund, i, ops[i], at, got[i], want[i])
		}
	}
	return got
}

// checkStored compares what Redis holds with the model: every bucket
// that is not full at now is stored as its TAT (storedTAT), and no full
// bucket is stored; every window counter that still counts at now is
// stored as the model's counter ("<period>:<index>:<cur>:<prev>").
func checkStored(t *testing.T, opts redis.Options, src *redis.Source, m sourcetest.Model, at int64) {
	t.Helper()
	c := rawClient(t, opts)
	for bucket, st := range m {
		tat := st.TAT
		v, ok := stored(t, c, src, bucket)
		if w := st.Window; w.Period != 0 {
			switch {
			case w.Expires() <= at/int64(time.Millisecond):
				// Counts nothing any more: it may linger until its expiry.
			case !ok:
				t.Errorf("counter %s (%+v, counting at %d) is not stored", bucket, w, at)
			case v != counterText(w):
				t.Errorf("counter %s stored %q, want %q", bucket, v, counterText(w))
			}
			continue
		}
		switch {
		case tat <= at:
			// Full by now: a stale key may linger until its expiry or
			// next read, and must read as full; nothing else to check.
		case !ok:
			t.Errorf("bucket %s (TAT %d after now %d) is not stored", bucket, tat, at)
		case v != storedTAT(opts, tat):
			t.Errorf("bucket %s stored %q, want %q (%d)", bucket, v, storedTAT(opts, tat), tat)
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

// The script reads a stored text TAT by one of two routes: values of 16
// digits and more through one inexact conversion corrected by the exact
// low limb, shorter or negative ones by splitting the text; a binary one
// by unpacking it. Each stored value here (at the edges of both routes,
// of the limbs and of int64), in both forms, is spent on once, and the TAT
// the script writes back must be the stored one plus the increment, digit
// for digit (byte for byte).
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
			// Each TAT stored in both forms, whichever the source writes:
			// a source reads what one with the other setting wrote.
			for i, tat := range tats {
				for _, binary := range []bool{false, true} {
					key := fmt.Sprintf("p:%d:%t", i, binary)
					storeRaw(t, c, src, key, storedTAT(redis.Options{BinaryTATs: binary}, tat))
					at := tat - 1 // the bucket is not full
					op := bucket.Op{Key: key, EmissionInterval: increment, BurstOffset: 10 * increment, Cost: 1}
					out := spend(t, src, at, op)
					if !out[0].Allowed || out[0].New.TAT != tat+increment {
						t.Fatalf("stored %d (binary %t): outcome %+v, want allowed with new TAT %d", tat, binary, out[0], tat+increment)
					}
					got, _ := stored(t, c, src, key)
					if want := storedTAT(opts, tat+increment); got != want {
						t.Errorf("stored %d (binary %t): the script wrote %q, want %q", tat, binary, got, want)
					}
				}
			}
		})
	}
}

// windowKinds are the window limits of TestMixedBatchesMatchModel, by
// key: short and long sliding and fixed windows, one of a millisecond,
// one whose count × period is exactly 2^53 − 1, one whose count an
// override keeps changing (so stored counts exceed it), and one whose
// period changes (so its hits are not read).
var windowKinds = []func(rng *rand.Rand) (fixed bool, count, period int64){
	func(*rand.Rand) (bool, int64, int64) { return false, 10, 1000 },
	func(*rand.Rand) (bool, int64, int64) { return false, 100, 60_000 },
	func(*rand.Rand) (bool, int64, int64) { return true, 5, 2000 },
	func(*rand.Rand) (bool, int64, int64) { return true, 1, 1 },
	func(*rand.Rand) (bool, int64, int64) { return false, window.MaxProduct / 6361, 6361 },
	func(rng *rand.Rand) (bool, int64, int64) { return false, []int64{2, 40}[rng.IntN(2)], 30_000 },
	func(rng *rand.Rand) (bool, int64, int64) {
		return rng.IntN(2) == 0, 20, []int64{10_000, 20_000}[rng.IntN(2)]
	},
}

// Random batches mixing GCRA buckets and sliding and fixed windows, at
// times near 2^62, in 2026 and before 1970, to the nanosecond (so that
// windows meet times between two milliseconds), decide exactly as the
// model (bucket.SpendBatch and RefundBatch on a Go map), and what Redis
// stores is the model's state.
func TestMixedBatchesMatchModel(t *testing.T) {
	regimes := []struct {
		name  string
		start int64
	}{
		{"near 2^62", 1<<62 + 123_456_789},
		{"2026", now},
		{"before 1970", -3_000_000_000_123_456_789},
	}
	gcraLimits := []exactLimit{{year, 12}, {int64(time.Second) / 3, 3}, {int64(100 * time.Millisecond), 10}}
	for _, b := range backends {
		for _, rg := range regimes {
			t.Run(b.name+"/"+rg.name, func(t *testing.T) {
				opts := b.opts(t)
				src := newSource(t, opts)
				rng := rand.New(rand.NewPCG(uint64(rg.start), 17))
				nkeys := len(windowKinds) + len(gcraLimits)
				keys := make([]string, nkeys)
				for i := range keys {
					keys[i] = fmt.Sprintf("w:%d", i)
				}
				m := sourcetest.Model{}
				at := rg.start
				// What the window ops did, so that the test is known to
				// have met every case: allowed and written, denied, given
				// back.
				var written, denied, givenBack int
				for step := range 500 {
					switch rng.IntN(12) {
					case 0:
						at += rng.Int64N(int64(3 * time.Minute))
					case 1:
						at += rng.Int64N(int64(time.Millisecond)) // within a millisecond
					default:
						at += rng.Int64N(int64(3 * time.Second))
					}
					n := 1 + rng.IntN(4)
					ops := make([]bucket.Op, n)
					for i, k := range rng.Perm(nkeys)[:n] {
						mode := bucket.Mode(rng.IntN(3))
						if k >= len(windowKinds) {
							l := gcraLimits[k-len(windowKinds)]
							ops[i] = l.op(keys[k], rng.Int64N(l.burst+1), mode)
							continue
						}
						fixed, count, period := windowKinds[k](rng)
						var cost int64
						switch rng.IntN(4) {
						case 0:
							cost = count
						case 1:
							cost = 1
						default:
							cost = rng.Int64N(min(count, 50) + 1)
						}
						ops[i] = windowOp(keys[k], fixed, count, period, cost)
						ops[i].Mode = mode
					}
					isRefund := rng.IntN(4) == 0
					for i, o := range applyAsModel(t, src, m, step, at, ops, isRefund) {
						switch {
						case !ops[i].Algorithm.Windowed():
						case isRefund && o.Write:
							givenBack++
						case !isRefund && o.Write:
							written++
						case !isRefund && !o.Allowed:
							denied++
						}
					}
				}
				checkStored(t, opts, src, m, at)
				if written < 50 || denied < 50 || givenBack < 10 {
					t.Fatalf("window ops: %d written, %d denied, %d given back: too few of some case", written, denied, givenBack)
				}
				t.Logf("window ops: %d written, %d denied, %d given back", written, denied, givenBack)
			})
		}
	}
}
