package redis_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/ratelimits/window"
	"github.com/limiter-dev/limiter/source/redis"
)

// minuteStart is the unix ms of a minute's start in 2026 (aligned to the
// epoch, as every window is).
const minuteStart = 1_790_000_040_000

// A sliding window weighs the previous window's hits by how much of it
// still overlaps the last period, to the millisecond: 10 hits a minute,
// all spent at the end of one minute, let one more hit through exactly
// 6 s into the next (10 × 54/60 + 1 = 10), not a nanosecond before. A
// fixed window lets the 10 through at the minute. Also before 1970, where
// now_ms is the floor of a negative number.
func TestWindowBoundaries(t *testing.T) {
	for _, b := range backends {
		for _, start := range []int64{minuteStart, -minuteStart} {
			t.Run(fmt.Sprintf("%s/%d", b.name, start), func(t *testing.T) {
				src := newSource(t, b.opts(t))
				const w = 60_000
				sliding := windowOp("s", false, 10, w, 1)
				fixed := windowOp("f", true, 10, w, 1)
				full := func(op bucket.Op) bucket.Op { op.Cost = 10; return op }
				last := msToNs(start+w) - 1 // the minute's last nanosecond
				if out := spend(t, src, last, full(sliding), full(fixed)); !out[0].Allowed || !out[1].Allowed {
					t.Fatalf("a first spend of 10: %+v", out)
				}
				// The next minute: the fixed window is empty again.
				next := msToNs(start + w)
				if out := spend(t, src, next, fixed)[0]; !out.Allowed || out.Remaining != 9 {
					t.Fatalf("fixed window, next minute: %+v, want allowed with 9 remaining", out)
				}
				// The sliding one still counts 10 × (60 − e)/60.
				for _, c := range []struct {
					at      int64
					allowed bool
				}{
					{next, false},
					{next + msToNs(6000) - 1, false}, // 5999.999999 ms: still 5999 ms
					{next + msToNs(6000), true},
				} {
					out := spend(t, src, c.at, sliding)[0]
					if out.Allowed != c.allowed {
						t.Fatalf("sliding window at next minute + %d ns: %+v, want allowed=%v", c.at-next, out, c.allowed)
					}
					// Denied, it may retry at 6 s, counted in whole ms from
					// now_ms.
					if want := msToNs(6000 - (c.at-next)/int64(time.Millisecond)); !out.Allowed && out.RetryIn != want {
						t.Fatalf("retry in %d ns, want %d", out.RetryIn, want)
					}
				}
			})
		}
	}
}

// A counter's layout: the period, the window's index, and both counts.
// Its key (its hash in format v2) expires the expiry margin after the
// counter stops counting: two periods after its window's start while the
// window has hits, one period after it while only the previous window
// does. A refund that leaves nothing counted deletes it.
func TestWindowCounterLayoutAndExpiry(t *testing.T) {
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
			near := func(got, want time.Duration) bool { return got <= want && got > want-2*time.Second }
			index := minuteStart / 60_000
			at := msToNs(minuteStart + 20_000) // 20 s into the minute
			spend(t, src, at, perMinute("a", 3))
			if v, _ := stored(t, c, src, "a"); v != fmt.Sprintf("60000:%d:3:0", index) {
				t.Fatalf("stored %q", v)
			}
			if ttl := pttl(); !near(ttl, 100*time.Second+7*time.Second) {
				t.Fatalf("PTTL %v, want 2 minutes from the window's start, less 20 s, plus the margin", ttl)
			}
			// The next minute rolls the counter.
			at += msToNs(60_000)
			spend(t, src, at, perMinute("a", 2))
			if v, _ := stored(t, c, src, "a"); v != fmt.Sprintf("60000:%d:2:3", index+1) {
				t.Fatalf("stored %q after the next minute's spend", v)
			}
			// A refund of the current window's hits leaves only the
			// previous window's, which count until the minute ends.
			refund(t, src, at, perMinute("a", 2))
			if v, _ := stored(t, c, src, "a"); v != fmt.Sprintf("60000:%d:0:3", index+1) {
				t.Fatalf("stored %q after a refund", v)
			}
			if opts.Groups == 0 {
				if ttl := pttl(); !near(ttl, 40*time.Second+7*time.Second) {
					t.Fatalf("PTTL %v after the refund, want the minute's end plus the margin", ttl)
				}
			}
			// A fixed window does not count the previous one: a refund to
			// zero deletes it.
			spend(t, src, at, fixedMinute("f", 4))
			refund(t, src, at, fixedMinute("f", 4))
			if v, ok := stored(t, c, src, "f"); ok {
				t.Fatalf("a fixed window refunded to zero is still stored: %q", v)
			}
			// Nothing is written for a check, a cost-0 spend, a denied
			// spend or a refund of an empty window.
			spend(t, src, at, checkOnly(perMinute("c", 5)), perMinute("z", 0))
			refund(t, src, at, perMinute("r", 1))
			spend(t, src, at, windowOp("d", false, 1, 60_000, 1), hourly("h", 101))
			for _, k := range []string{"c", "z", "r", "d", "h"} {
				if v, ok := stored(t, c, src, k); ok {
					t.Fatalf("%s is stored (%q)", k, v)
				}
			}
		})
	}
}

// A window is identified by its period too: after a reload that changes
// it, the hits counted under the old period are not read. A key that
// changes algorithm (a GCRA bucket becoming a window, or back) starts
// afresh as well.
func TestWindowPeriodAndAlgorithmChange(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			src := newSource(t, b.opts(t))
			at := msToNs(minuteStart + 10)
			spend(t, src, at, windowOp("p", false, 10, 60_000, 10))
			if out := spend(t, src, at, windowOp("p", false, 10, 30_000, 4))[0]; !out.Allowed || out.Remaining != 6 {
				t.Fatalf("a new period: %+v, want the old hits unread", out)
			}
			if out := spend(t, src, at, windowOp("p", false, 10, 60_000, 0))[0]; out.Remaining != 10 {
				t.Fatalf("the old period again: %+v, want 10 remaining (its counter was replaced)", out)
			}
			spend(t, src, at, hourly("g", 50))
			if out := spend(t, src, at, perMinute("g", 1))[0]; !out.Allowed || out.Remaining != 99 {
				t.Fatalf("a window over a GCRA bucket: %+v", out)
			}
			if out := spend(t, src, at, hourly("g", 1))[0]; !out.Allowed || out.Remaining != 99 {
				t.Fatalf("a GCRA bucket over a window: %+v", out)
			}
		})
	}
}

// Processes on several hosts share a counter while their clocks differ by
// milliseconds. One whose clock is behind reads a counter that one ahead
// has already moved to the next window: the counter's previous-window
// count is this process's current window, which counts, and which its
// spends and refunds change in place, the next window's hits untouched.
// One further ahead (a clock set back by more than a period) is replaced.
// The same on the script's fast path (a batch of one key) and its general
// path (two keys), and the source's check of every verdict against the
// window functions agrees (a disagreement is an error).
func TestWindowAClockBehind(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			src := newSource(t, b.opts(t))
			c := rawClient(t, b.opts(t))
			storedIs := func(key, want string) {
				t.Helper()
				if v, _ := stored(t, c, src, key); v != want {
					t.Fatalf("%s stored %q, want %q", key, v, want)
				}
			}
			const w = 10_000
			x := int64((minuteStart + w) / w) // the window the process ahead is in
			behind := msToNs(x*w) - msToNs(2)
			for _, tc := range []struct {
				key   string
				fixed bool
				other bool // batched with a second key: the general path
			}{
				{"fixed", true, false}, {"sliding", false, false}, {"fixed2", true, true}, {"sliding2", false, true},
			} {
				ops := func(cost int64) []bucket.Op {
					o := []bucket.Op{windowOp(tc.key, tc.fixed, 3, w, cost)}
					if tc.other {
						o = append(o, hourly("g"+tc.key, 1))
					}
					return o
				}
				storeRaw(t, c, src, tc.key, fmt.Sprintf("%d:%d:1:3", w, x))
				if out := spend(t, src, behind, ops(1)...)[0]; out.Allowed || out.Remaining != 0 {
					t.Fatalf("%s: a spend behind a full window read ahead: %+v, want denied", tc.key, out)
				}
				refund(t, src, behind, ops(2)...)
				storedIs(tc.key, fmt.Sprintf("%d:%d:1:1", w, x))
				if out := spend(t, src, behind, ops(2)...)[0]; !out.Allowed || out.Remaining != 0 {
					t.Fatalf("%s: a spend that fits behind: %+v", tc.key, out)
				}
				storedIs(tc.key, fmt.Sprintf("%d:%d:1:3", w, x))
				// Two windows ahead (a clock set back), the counter counts
				// nothing here and a spend replaces it, so that this
				// window counts.
				storeRaw(t, c, src, tc.key, fmt.Sprintf("%d:%d:1:3", w, x+1))
				if out := spend(t, src, behind, ops(3)...)[0]; !out.Allowed {
					t.Fatalf("%s: two windows behind: %+v", tc.key, out)
				}
				storedIs(tc.key, fmt.Sprintf("%d:%d:3:0", w, x-1))
				if out := spend(t, src, behind, ops(1)...)[0]; out.Allowed {
					t.Fatalf("%s: a fourth hit two windows behind: %+v", tc.key, out)
				}
			}
		})
	}
}

// Reset deletes window counters and counts those that still counted
// (bucket.Busy): hits in the current window, or, for a sliding window,
// only in the previous one; not a fixed window's previous window, nor a
// counter of another period.
func TestWindowReset(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			src := newSource(t, b.opts(t))
			ctx := context.Background()
			at := msToNs(minuteStart)
			spend(t, src, at, perMinute("cur", 1), perMinute("prev", 1), fixedMinute("fprev", 1),
				perMinute("other", 1), hourly("g", 5))
			later := at + msToNs(60_000)
			spend(t, src, later, perMinute("cur", 1))
			ops := []bucket.Op{perMinute("cur", 0), perMinute("prev", 0), fixedMinute("fprev", 0),
				windowOp("other", false, 100, 30_000, 0), perMinute("never", 0), hourly("g", 0)}
			n, err := src.Reset(ctx, later, ops)
			if err != nil || n != 3 {
				t.Fatalf("Reset = %d, %v; want 3 (cur, prev and the GCRA bucket)", n, err)
			}
			for _, op := range ops {
				if out := spend(t, src, later, checkOnly(op))[0]; out.Remaining != 100 {
					t.Fatalf("%s after the reset: %+v", op.Key, out)
				}
			}
			if n, err := src.Reset(ctx, later, ops); err != nil || n != 0 {
				t.Fatalf("a second Reset = %d, %v; want 0", n, err)
			}
		})
	}
}

// Counts above the limit's count (a lowered override, or processes that
// counted locally and overshot) keep the script's arithmetic exact: a
// window of 1,416,003,655,831 hits per 6,361 ms (count × period = 2^53 −
// 1) decides exactly as the window functions from counts at and around
// 2^53, where prev × (period − elapsed) is no longer exact in a double.
func TestWindowArithmeticAtTheBound(t *testing.T) {
	const period = 6361
	const count = window.MaxProduct / period
	if count*period != window.MaxProduct {
		t.Fatal("the test's period does not divide 2^53 - 1")
	}
	index := int64(minuteStart / period)
	for _, b := range standalones {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			c := rawClient(t, opts)
			cases := []struct {
				cur, prev, elapsed, cost int64
			}{
				{0, count, 0, 0},             // prev·W = 2^53 − 1: allowed
				{0, count + 1, 0, 0},         // 2^53 − 1 + W: denied
				{0, count + 1, 1, 0},         // (count+1)(W−1) < 2^53: allowed
				{0, window.MaxProduct, 5, 0}, // far above 2^53
				{0, window.MaxProduct, period - 1, 1},
				{count, 0, 0, 0},
				{count, 0, 0, 1},
				{window.MaxProduct, window.MaxProduct, 3, 0},
				{1, count - 1, 0, 0},
				{1, count - 1, 0, 1},
				{7, 1 << 40, 100, 5},
			}
			for i, tc := range cases {
				key := fmt.Sprintf("b:%d", i)
				stored := window.Counter{Period: period, Start: index * period, Cur: tc.cur, Prev: tc.prev}
				storeRaw(t, c, src, key, counterText(stored))
				at := msToNs(index*period + tc.elapsed)
				op := windowOp(key, false, count, period, tc.cost)
				got := spend(t, src, at, op)[0]
				want := make([]bucket.Outcome, 1)
				bucket.SpendBatch(at, []bucket.Op{op}, []bucket.State{{Window: stored}}, want)
				if got != want[0] {
					t.Errorf("case %d %+v:\n got %+v\nwant %+v", i, tc, got, want[0])
				}
			}
		})
	}
}

// A value that is neither a counter nor a TAT, under a window op's key,
// is an error, never a silent decision.
func TestWindowForeignValueIsAnError(t *testing.T) {
	for _, b := range standalones {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			for i, v := range []string{"not a number", "1:2:3", "0:1:2:3", "60000:1:2:-3", "60000:1:99999999999999999:0"} {
				key := fmt.Sprintf("x:%d", i)
				storeRaw(t, rawClient(t, opts), src, key, v)
				out := make([]bucket.Outcome, 1)
				if err := src.Spend(context.Background(), now, []bucket.Op{perMinute(key, 1)}, out); err == nil {
					t.Errorf("a spend over %q succeeded: %+v", v, out[0])
				}
			}
		})
	}
}

// In key format v2 a hash's expiry only grows, so window counters that
// no longer count are swept out like full GCRA buckets: one hash sees
// 3,000 one-time ids on a one-second window, ten a second, beside 20
// counters on an hourly window that keep counting. It never holds much
// more than twice the counters that may still count (a counter is kept
// until two periods after its window's start, fixed or sliding: the
// counter itself does not say which), and the 20 keep their counts.
func TestSweepDropsExpiredWindowCounters(t *testing.T) {
	src, c, hash := oneHash(t)
	ctx := context.Background()
	at := msToNs(minuteStart)
	hourlyWindow := func(key string) bucket.Op { return windowOp(key, false, 100, 3_600_000, 1) }
	for i := range 20 {
		spend(t, src, at, hourlyWindow(fmt.Sprintf("steady:%d", i)))
	}
	largest := 0
	for i := range 3000 {
		at += int64(100 * time.Millisecond)
		if out := spend(t, src, at, windowOp(fmt.Sprintf("once:%d", i), true, 1, 1000, 1))[0]; !out.Allowed {
			t.Fatalf("id %d: a new counter denied", i)
		}
		n, err := c.HLen(ctx, hash).Result()
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, int(n))
	}
	// Kept at any moment: the 20, the ids of this second and the one
	// before, and the sweep's record.
	const live = 20 + 20 + 1
	if largest > 2*live {
		t.Fatalf("the hash reached %d fields with at most %d counting; want at most %d", largest, live, 2*live)
	}
	index := minuteStart / 3_600_000
	for i := range 20 {
		k := fmt.Sprintf("steady:%d", i)
		if v, ok := stored(t, c, src, k); !ok || v != fmt.Sprintf("3600000:%d:1:0", index) {
			t.Fatalf("counter %s holds %q (%v) after the sweeps", k, v, ok)
		}
	}
	t.Logf("largest hash: %d fields", largest)
}

// A batch mixing GCRA buckets and windows across hash slots, denied in
// its last slot, gives back what its earlier slots took: every bucket and
// counter is as before (a counter the batch created is gone again), and
// an allowed one is written in every slot.
func TestClusterMixedBatchGivesBack(t *testing.T) {
	for _, b := range []backend{backends[1], backends[3]} {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			c := rawClient(t, opts)
			keys := keysInSlots(src, 5)
			at := msToNs(minuteStart + 30_000)
			g, s, f, fresh, last := keys[0], keys[1], keys[2], keys[3], keys[4]
			spend(t, src, at, hourly(g, 7))
			spend(t, src, at-msToNs(60_000), perMinute(s, 40)) // the previous minute's
			spend(t, src, at, perMinute(s, 5))
			spend(t, src, at, fixedMinute(f, 9))
			spend(t, src, at, perMinute(last, 100))
			before := map[string]string{}
			for _, k := range keys {
				before[k], _ = stored(t, c, src, k)
			}
			out := spend(t, src, at, hourly(g, 3), perMinute(s, 2), fixedMinute(f, 4), perMinute(fresh, 1), perMinute(last, 1))
			if !out[0].Allowed || !out[1].Allowed || !out[2].Allowed || !out[3].Allowed || out[4].Allowed {
				t.Fatalf("outcomes %+v: want the first four allowed, the last denied", out)
			}
			for _, k := range keys {
				if v, _ := stored(t, c, src, k); v != before[k] {
					t.Errorf("%s holds %q after the denied batch, want %q as before", k, v, before[k])
				}
			}
			out = spend(t, src, at, hourly(g, 3), perMinute(s, 2), fixedMinute(f, 4), perMinute(fresh, 1))
			for i, want := range []int64{90, 100 - 40/2 - 7, 87, 99} {
				if !out[i].Allowed || !out[i].Write || out[i].Remaining != want {
					t.Fatalf("op %d of an allowed batch: %+v, want written with %d remaining", i, out[i], want)
				}
			}
		})
	}
}

// keysInSlots returns n bucket keys whose Redis keys are in n different
// hash slots, in ascending slot order: the i-th in the i-th n-th of the
// slots.
func keysInSlots(src *redis.Source, n int) []string {
	out := make([]string, 0, n)
	for i := 0; len(out) < n; i++ {
		b := fmt.Sprintf("b:%d", i)
		if redis.Slot(src.Key(b))*n/16384 == len(out) {
			out = append(out, b)
		}
	}
	return out
}

// 48 goroutines spend one hit on a batch of three sliding windows in three
// slots, each of 100 hits a minute: exactly 100 batches are allowed, and
// every window ends at 100 (no hit lost to a give-back, none counted
// twice).
func TestClusterWindowsNoOvershootAcrossSlots(t *testing.T) {
	src := newSource(t, cluster(t))
	b := keysInSlots(src, 3)
	at := msToNs(minuteStart)
	ops := []bucket.Op{perMinute(b[2], 1), perMinute(b[0], 1), fixedMinute(b[1], 1)}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 48)
	for range 48 {
		wg.Go(func() {
			out := make([]bucket.Outcome, len(ops))
			for range 5 {
				if err := src.Spend(context.Background(), at, ops, out); err != nil {
					errs <- err
					return
				}
				if out[0].Allowed && out[1].Allowed && out[2].Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := allowed.Load(); got != 100 {
		t.Fatalf("%d batches allowed, want exactly 100", got)
	}
	for _, op := range ops {
		if r := spend(t, src, at, checkOnly(op))[0].Remaining; r != 0 {
			t.Fatalf("window %s has %d remaining, want 0", op.Key, r)
		}
	}
}

// A spend or refund under an idempotency record, with window ops beside a
// GCRA one, is answered from the record on a retry, exactly as the first
// time, however the windows moved since; on a cluster the batch spans
// slots, so its record is written beside its claim.
func TestOnceReplaysWindows(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			src := newSource(t, b.opts(t))
			ctx := context.Background()
			keys := keysInSlots(src, 3)
			at := msToNs(minuteStart + 45_000)
			spend(t, src, at-msToNs(60_000), perMinute(keys[0], 30))
			ops := []bucket.Op{perMinute(keys[0], 5), fixedMinute(keys[1], 7), hourly(keys[2], 2)}
			rec := once.Record{Key: "k-" + b.name, Fingerprint: "fp", Expires: at + int64(10*time.Minute)}
			first := make([]bucket.Outcome, len(ops))
			if replayed, err := src.SpendOnce(ctx, at, rec, ops, first); err != nil || replayed {
				t.Fatalf("first call: replayed=%v, %v", replayed, err)
			}
			// 5 hits now and 30 of the previous minute weighing 15/60:
			// floor(100 - 5 - 7.5) remaining.
			if !first[0].Allowed || first[0].Remaining != 87 || first[1].Remaining != 93 {
				t.Fatalf("first call: %+v", first)
			}
			// The windows move on: more hits, a new minute.
			later := at + msToNs(30_000)
			spend(t, src, later, perMinute(keys[0], 50), fixedMinute(keys[1], 50))
			again := make([]bucket.Outcome, len(ops))
			if replayed, err := src.SpendOnce(ctx, later, rec, ops, again); err != nil || !replayed {
				t.Fatalf("retry: replayed=%v, %v", replayed, err)
			}
			for i := range ops {
				if again[i] != first[i] {
					t.Errorf("op %d: the retry answered %+v, the first call %+v", i, again[i], first[i])
				}
			}
			// A refund under its own record, replayed the same way.
			rrec := once.Record{Key: "r-" + b.name, Fingerprint: "fp-r", Expires: later + int64(10*time.Minute)}
			rops := []bucket.Op{perMinute(keys[0], 20), fixedMinute(keys[1], 20)}
			r1 := make([]bucket.Outcome, 2)
			r2 := make([]bucket.Outcome, 2)
			if _, err := src.RefundOnce(ctx, later, rrec, rops, r1); err != nil {
				t.Fatal(err)
			}
			if _, err := src.RefundOnce(ctx, later+1, rrec, rops, r2); err != nil || r1[0] != r2[0] || r1[1] != r2[1] {
				t.Fatalf("refund %+v, its retry %+v (%v)", r1, r2, err)
			}
			if !r1[0].Allowed || !r1[1].Allowed {
				t.Fatalf("refund of windows with hits: %+v", r1)
			}
		})
	}
}

// A window op with a cost above its count, a period out of range or an
// unknown algorithm is refused before anything is sent.
func TestInvalidWindowOps(t *testing.T) {
	src := newSource(t, standalone(t))
	bad := []bucket.Op{
		windowOp("a", false, 10, 60_000, 11),
		windowOp("a", false, 10, 0, 1),
		windowOp("a", false, 0, 60_000, 0),
		windowOp("a", false, window.MaxProduct/1000+1, 1000, 0),
		{Key: "a", Algorithm: bucket.Algorithm(9), Cost: 1},
	}
	for _, op := range bad {
		out := make([]bucket.Outcome, 1)
		if err := src.Spend(context.Background(), now, []bucket.Op{op}, out); !errors.Is(err, redis.ErrInvalidOp) {
			t.Errorf("Spend of %+v: %v, want ErrInvalidOp", op, err)
		}
	}
	if _, err := src.Reset(context.Background(), now, []bucket.Op{windowOp("a", false, 10, 0, 0)}); !errors.Is(err, redis.ErrInvalidOp) {
		t.Errorf("Reset with period 0: %v, want ErrInvalidOp", err)
	}
}
