package redis_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/source/redis"
)

// packed is a rate counter as the source stores it (docs/redis.md): its
// last second in 5 bytes, the width of its counts (here 1), then the hits
// of that second and of each one before it, big-endian.
func packed(last int64, hits ...uint8) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(last))[3:]
	return string(append(append(b, 1), hits...))
}

// rawGet returns what Redis holds under key (and field, in format v2).
func rawGet(t testing.TB, c goredis.UniversalClient, key, field string) (string, bool) {
	t.Helper()
	var v string
	var err error
	if field != "" {
		v, err = c.HGet(context.Background(), key, field).Result()
	} else {
		v, err = c.Get(context.Background(), key).Result()
	}
	if errors.Is(err, goredis.Nil) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

// A denied batch still writes what it observed: the hits of its rate ops
// and the box entries its ops' denials made, while its GCRA and window
// buckets are left as they were. A check-only op of the same batch counts
// in the decision and writes nothing.
func TestDeniedBatchWritesHitsAndBoxes(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			c := rawClient(t, opts)
			until := now + secs(300)
			gcraBoxed := withBox(hourly("140:bob", 100), until)
			spend(t, src, now, gcraBoxed) // empty now: the next spend is denied
			rate := rateOp("130:alice", 1, 2, 5, until)
			free := hourly("150:carol", 1)
			checked := withMode(rateOp("131:dave", 1, 2, 1, until), bucket.CheckOnly)
			out := spend(t, src, now, rate, withBox(hourly("140:bob", 1), until), free, checked)
			if out[0].Allowed || out[1].Allowed || !out[2].Allowed || !out[3].Allowed {
				t.Fatalf("outcomes %+v: want the rate op boxed by its hits, the GCRA op by its bucket, the others allowed", out)
			}
			if !out[0].Write || !out[0].WriteBox || !out[1].WriteBox || out[1].Write || out[2].Write || out[3].Write || out[3].WriteBox {
				t.Fatalf("outcomes %+v: want the hits and both box entries written, nothing else", out)
			}
			got := lookup(t, src, now, "130:alice", "130:alice")
			if h := windowHits(got.Counters[0], now, 1); h != 5 || got.Expires != until {
				t.Fatalf("rate counter after a denied batch: %d hits, boxed until %d; want 5 and %d", h, got.Expires, until)
			}
			if got := call(t, src, now, bucket.Call{Box: "140:bob", Action: bucket.BoxRead}); got.Expires != until {
				t.Fatalf("GCRA op's box entry %d, want %d", got.Expires, until)
			}
			if _, ok := stored(t, c, src, "150:carol"); ok {
				t.Fatal("the allowed GCRA op of a denied batch was written")
			}
			if k, f := src.EntryKey("131:dave"); func() bool { _, ok := rawGet(t, c, k, f); return ok }() {
				t.Fatal("a check-only rate op was written")
			}
			if k, f := src.BoxKey("131:dave"); func() bool { _, ok := rawGet(t, c, k, f); return ok }() {
				t.Fatal("a check-only rate op boxed its id")
			}
			// While boxed, the GCRA op is denied without touching its
			// bucket, even a minute later when the bucket has room again.
			k, f := src.EntryKey("140:bob")
			before, _ := rawGet(t, c, k, f)
			at := now + secs(60)
			o := spend(t, src, at, withBox(hourly("140:bob", 1), until))[0]
			if o.Allowed || !o.Penalized || o.RetryIn != until-at {
				t.Fatalf("spend while boxed: %+v", o)
			}
			if after, _ := rawGet(t, c, k, f); after != before {
				t.Fatalf("bucket %q while boxed, want %q untouched", after, before)
			}
		})
	}
}

// A check (every op check-only) decides as a spend would and writes
// nothing: no hits, no box entries, no buckets.
func TestCheckOfBoxesWritesNothing(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			c := rawClient(t, opts)
			until := now + secs(300)
			spend(t, src, now, withBox(hourly("140:bob", 100), until))
			k, f := src.EntryKey("140:bob")
			before, _ := rawGet(t, c, k, f)
			out := spend(t, src, now, checkOnly(rateOp("130:alice", 10, 3, 31, until)), checkOnly(withBox(hourly("140:bob", 1), until)))
			if out[0].Allowed || !out[0].Penalized || out[1].Allowed || !out[1].Penalized || out[0].RetryIn != until-now {
				t.Fatalf("check: %+v, want both answered as boxed", out)
			}
			for _, key := range []string{"130:alice", "140:bob"} {
				if k, f := src.BoxKey(key); func() bool { _, ok := rawGet(t, c, k, f); return ok }() {
					t.Fatalf("a check boxed %s", key)
				}
			}
			if k, f := src.EntryKey("130:alice"); func() bool { _, ok := rawGet(t, c, k, f); return ok }() {
				t.Fatal("a check counted hits")
			}
			if after, _ := rawGet(t, c, k, f); after != before {
				t.Fatalf("a check wrote the bucket: %q, was %q", after, before)
			}
		})
	}
}

// Every box action of an ERL call, and counters checked and incremented
// in the same call, as bucket.ApplyCall defines them.
func TestCallActions(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			src := newSource(t, b.opts(t))
			s := ratecounter.Second(now)
			box := "135:alice"
			until := now + secs(600)
			// increment: hits added, nobody boxed.
			res := call(t, src, now, bucket.Call{Counters: []bucket.CounterCheck{{Key: "130:alice", Delta: 7}}})
			if res.Counters[0].At(s) != 7 || res.Above[0] || res.Expires != 0 {
				t.Fatalf("increment: %+v", res)
			}
			// check_rate below the limit: counted, not boxed.
			below := bucket.Call{Counters: []bucket.CounterCheck{{Key: "130:alice", Delta: 3, Limit: ratecounter.Limit{Window: 10, Rate: 1}}},
				Box: box, Action: bucket.BoxWhenAbove, Until: until}
			if res := call(t, src, now, below); res.Above[0] || res.Expires != 0 || res.Counters[0].Window(s, 10) != 10 {
				t.Fatalf("check_rate at 10 hits of 10: %+v", res)
			}
			// One more hit goes above: boxed until until.
			if res := call(t, src, now, below); !res.Above[0] || res.Expires != until {
				t.Fatalf("check_rate above: %+v, want boxed until %d", res, until)
			}
			// A shorter box from check_rate never shortens it.
			shorter := below
			shorter.Until = now + secs(60)
			if res := call(t, src, now, shorter); res.Expires != until {
				t.Fatalf("check_rate with a shorter ttl: expires %d, want %d kept", res.Expires, until)
			}
			// check_rates: the second counter goes above, the entry is boxed once.
			later := until + secs(1)
			rates := bucket.Call{Counters: []bucket.CounterCheck{
				{Key: "131:alice", Delta: 1, Limit: ratecounter.Limit{Window: 60, Rate: 10}},
				{Key: "132:alice", Delta: 11, Limit: ratecounter.Limit{Window: 1, Rate: 10}},
			}, Box: box, Action: bucket.BoxWhenAbove, Until: later}
			if res := call(t, src, now, rates); res.Above[0] || !res.Above[1] || res.Expires != later {
				t.Fatalf("check_rates: %+v", res)
			}
			// has (read).
			if res := call(t, src, now, bucket.Call{Box: box, Action: bucket.BoxRead}); res.Expires != later {
				t.Fatalf("has: %+v", res)
			}
			// add (replace) shortens.
			short := now + secs(120)
			if res := call(t, src, now, bucket.Call{Box: box, Action: bucket.BoxReplace, Until: short}); res.Expires != short {
				t.Fatalf("add: %+v", res)
			}
			// extend never shortens, and boxes whatever the counters.
			if res := call(t, src, now, bucket.Call{Box: box, Action: bucket.BoxExtend, Until: now + secs(60)}); res.Expires != short {
				t.Fatalf("extend with an earlier expiry: %+v", res)
			}
			if res := call(t, src, now, bucket.Call{Box: "136:zed", Action: bucket.BoxExtend, Until: short}); res.Expires != short {
				t.Fatalf("extend of an entry not in the box: %+v", res)
			}
			// remove: removed once, then not in the box.
			if res := call(t, src, now, bucket.Call{Box: box, Action: bucket.BoxRemove}); !res.Removed || res.Expires != 0 {
				t.Fatalf("remove: %+v", res)
			}
			if res := call(t, src, now, bucket.Call{Box: box, Action: bucket.BoxRemove}); res.Removed {
				t.Fatalf("remove again: %+v", res)
			}
			if res := call(t, src, now, bucket.Call{Box: box, Action: bucket.BoxRead}); res.Expires != 0 {
				t.Fatalf("has after remove: %+v", res)
			}
			// A box entry whose time is up is out of the box.
			if res := call(t, src, short, bucket.Call{Box: "136:zed", Action: bucket.BoxRead}); res.Expires != 0 {
				t.Fatalf("has at its expiry: %+v", res)
			}
			// A lookup changes nothing; the counters kept their hits.
			got := lookup(t, src, now+secs(5), "130:alice", box)
			if got.Counters[0].Window(s+5, 10) != 16 || got.Expires != 0 {
				t.Fatalf("lookup: %+v", got)
			}
		})
	}
}

// The counter of a rate op and its box entry are stored as documented,
// named by the id, and expire from Redis at the deadline of the moment
// they stop counting (the margin after it, rounded up as a TAT's is): a
// counter 60 s after its newest hit, a box entry at its expiry. In format v2 the expiry
// belongs to the hash, at least that.
func TestRateCounterAndBoxStorage(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			opts.ExpiryMargin = 7 * time.Second
			opts.Namespace = fmt.Sprintf("t%x:", rand.Uint64())
			src := openSource(t, opts)
			c := rawClient(t, opts)
			ctx := context.Background()
			s := ratecounter.Second(now)
			until := now + secs(200) + 1 // a nanosecond over, so the rounding up to whole ms shows
			spend(t, src, now-secs(3), rateOp("130:alice", 10, 100, 5, until))
			spend(t, src, now, rateOp("130:alice", 10, 100, 2, until))
			spend(t, src, now, rateOp("130:alice", 1, 1, 0, until)) // 2 hits this second, above 1: boxed

			key, field := src.EntryKey("130:alice")
			bkey, bfield := src.BoxKey("130:alice")
			if opts.Groups == 0 {
				if key != redis.KeyPrefix+opts.Namespace+"{alice}130" || bkey != key+"!" {
					t.Fatalf("keys %q and %q", key, bkey)
				}
			} else if bkey != key || field != "130:alice" || bfield != "!130:alice" || key != src.Key("alice") {
				t.Fatalf("v2: field %q of %q, box field %q of %q; want the hash of the id's group", field, key, bfield, bkey)
			}
			if v, ok := rawGet(t, c, key, field); !ok || v != packed(s, 2, 0, 0, 5) {
				t.Fatalf("stored counter %q (%v), want %q", v, ok, packed(s, 2, 0, 0, 5))
			}
			if v, ok := rawGet(t, c, bkey, bfield); !ok || v != strconv.FormatInt(until, 10) {
				t.Fatalf("stored box entry %q (%v), want %d", v, ok, until)
			}
			pttl := func(k string) time.Duration {
				t.Helper()
				d, err := c.PTTL(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			// The counter: the deadline of 60 s after its newest second
			// began, as a TAT's (the margin after, rounded up to a step).
			counterTTL := deadlineTTL((s+60)*int64(time.Second), now, 7*time.Second)
			// The box entry: its deadline, as a TAT's (200.001 s + 7 s,
			// rounded up to 3.5 s steps of unix ms).
			boxTTL := deadlineTTL(until, now, 7*time.Second)
			if opts.Groups == 0 {
				if d := pttl(key); d > counterTTL || d < counterTTL-2*time.Second {
					t.Fatalf("counter PTTL %v, want %v", d, counterTTL)
				}
				if d := pttl(bkey); d > boxTTL || d < boxTTL-2*time.Second {
					t.Fatalf("box entry PTTL %v, want %v", d, boxTTL)
				}
			} else if d := pttl(key); d > boxTTL || d < boxTTL-2*time.Second {
				t.Fatalf("hash PTTL %v, want %v (its longest field's)", d, boxTTL)
			}
			// A refund takes hits from now's second only, never below 0,
			// and leaves the box alone.
			o := refund(t, src, now, rateOp("130:alice", 10, 100, 9, until))[0]
			if !o.Allowed || !o.Penalized || o.RetryIn != until-now {
				t.Fatalf("refund of a boxed id: %+v", o)
			}
			if v, _ := rawGet(t, c, key, field); v != packed(s, 0, 0, 0, 5) {
				t.Fatalf("counter after a refund %q", v)
			}
			// A hit 70 s later moves the counter on, its old seconds gone; a
			// counter whose hits were refunded keeps its last second (as
			// ratecounter.Counter does) until it expires.
			later := now + secs(70)
			spend(t, src, later, rateOp("130:alice", 10, 100, 1, until))
			if v, _ := rawGet(t, c, key, field); v != packed(s+70, 1) {
				t.Fatalf("counter moved on: %q", v)
			}
			if o := refund(t, src, later, rateOp("130:alice", 10, 100, 1, until))[0]; !o.Allowed {
				t.Fatalf("refund of the only hit: %+v", o)
			}
			if v, _ := rawGet(t, c, key, field); v != packed(s+70, 0) {
				t.Fatalf("a counter with no hit left: %q", v)
			}
			if n, err := src.Reset(ctx, later, []bucket.Op{rateOp("130:alice", 10, 100, 0, until)}); err != nil || n != 1 {
				t.Fatalf("Reset of an id in its box: %d, %v; want 1", n, err)
			}
			if n, err := src.Reset(ctx, later, []bucket.Op{rateOp("130:alice", 10, 100, 0, until)}); err != nil || n != 0 {
				t.Fatalf("Reset of nothing: %d, %v; want 0", n, err)
			}
			// Reset deletes the counter and the box entry.
			spend(t, src, later, rateOp("130:alice", 10, 100, 1, until))
			if n, err := src.Reset(ctx, later, []bucket.Op{rateOp("130:alice", 10, 100, 0, until)}); err != nil || n != 1 {
				t.Fatalf("Reset: %d, %v; want 1", n, err)
			}
			if _, ok := rawGet(t, c, key, field); ok {
				t.Fatal("counter kept by a reset")
			}
			if _, ok := rawGet(t, c, bkey, bfield); ok {
				t.Fatal("box entry kept by a reset")
			}
		})
	}
}

// Concurrent calls on one entry count exactly: 600 check_rate calls of one
// hit at one instant, from 30 goroutines on 3 sources (as 3 processes),
// leave 600 hits, and exactly the 100 calls past the limit of 500 see
// the rate above it.
func TestConcurrentCallsCountExactly(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			opts.Namespace = fmt.Sprintf("t%x:", rand.Uint64())
			first := openSource(t, opts)
			srcs := []*redis.Source{first, openSource(t, opts), openSource(t, opts)}
			until := now + secs(600)
			c := bucket.Call{Counters: []bucket.CounterCheck{{Key: "130:crowd", Delta: 1, Limit: ratecounter.Limit{Window: 10, Rate: 50}}},
				Box: "130:crowd", Action: bucket.BoxWhenAbove, Until: until}
			var above, boxed atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 30)
			for w := range 30 {
				wg.Go(func() {
					src := srcs[w%len(srcs)]
					for range 20 {
						cc := c
						cc.Counters = []bucket.CounterCheck{c.Counters[0]}
						var res bucket.CallResult
						if err := src.Call(context.Background(), now, &cc, &res); err != nil {
							errs <- err
							return
						}
						if res.Above[0] {
							above.Add(1)
						}
						if res.Expires == until {
							boxed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			got := lookup(t, first, now, "130:crowd", "130:crowd")
			if h := windowHits(got.Counters[0], now, 60); h != 600 || above.Load() != 100 || boxed.Load() != 100 || got.Expires != until {
				t.Fatalf("%d hits, %d calls above, %d boxed, expires %d; want 600, 100, 100, %d", h, above.Load(), boxed.Load(), got.Expires, until)
			}
		})
	}
}

// Counts are stored in the fewest bytes that hold the largest (1, 2 or 4),
// read back exactly, and stop at ratecounter.MaxHitsPerSecond.
func TestRateCounterWidths(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			c := rawClient(t, opts)
			s := ratecounter.Second(now)
			key, field := src.EntryKey("130:wide")
			op := func(at, cost int64) bucket.Op { return rateOp("130:wide", 60, 1<<40, cost, at+secs(60)) }
			var want ratecounter.Counter
			steps := []struct {
				at, cost int64
				width    byte
			}{
				{now - secs(2), 300, 2},
				{now, 7, 2},
				{now, 70_000, 4},
				{now, ratecounter.MaxHitsPerSecond, 4},
				{now + secs(59), 1, 4},
				{now + secs(61), 1, 1}, // s and s-2 have left: narrow again
			}
			for i, st := range steps {
				spend(t, src, st.at, op(st.at, st.cost))
				want.Add(ratecounter.Second(st.at), st.cost)
				v, _ := rawGet(t, c, key, field)
				if len(v) < 6 || v[5] != st.width {
					t.Fatalf("step %d: stored %q, want counts %d bytes wide", i, v, st.width)
				}
				got := lookup(t, src, st.at, "130:wide", "130:wide")
				if got.Counters[0] != want {
					t.Fatalf("step %d: counter %+v, want %+v", i, got.Counters[0], want)
				}
				if i == 3 && got.Counters[0].At(s) != ratecounter.MaxHitsPerSecond {
					t.Fatalf("a second of %d hits, want it to stop at %d", got.Counters[0].At(s), ratecounter.MaxHitsPerSecond)
				}
			}
		})
	}
}

// Concurrent spends from three sources (packed into shared script calls
// under load) count exactly: 600 hits on a rate counter of 600 a minute
// are all allowed and the 601st boxes the id; 200 spends on a GCRA bucket
// of burst 100 with a box allow exactly 100, and the denials box the id.
func TestConcurrentBoxedSpendsCountExactly(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			opts.Namespace = fmt.Sprintf("t%x:", rand.Uint64())
			srcs := []*redis.Source{openSource(t, opts), openSource(t, opts), openSource(t, opts)}
			until := now + secs(600)
			rate := rateOp("130:crowd", 60, 10, 1, until)
			gcra := withBox(hourly("140:crowd", 1), until)
			var rateAllowed, gcraAllowed atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 40)
			for w := range 40 {
				wg.Go(func() {
					src := srcs[w%len(srcs)]
					out := make([]bucket.Outcome, 1)
					for i := range 20 {
						op, n := rate, &rateAllowed
						if (i+w)%4 == 3 {
							op, n = gcra, &gcraAllowed
						}
						if err := src.Spend(context.Background(), now, []bucket.Op{op}, out); err != nil {
							errs <- err
							return
						}
						if out[0].Allowed {
							n.Add(1)
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			// 40 workers × 20 spends: 600 on the rate counter, 200 on the bucket.
			if rateAllowed.Load() != 600 || gcraAllowed.Load() != 100 {
				t.Fatalf("allowed %d rate spends of 600 and %d GCRA spends of 200; want 600 and 100", rateAllowed.Load(), gcraAllowed.Load())
			}
			if o := spend(t, srcs[0], now, rate)[0]; o.Allowed || !o.Penalized || o.RetryIn != until-now {
				t.Fatalf("the 601st hit: %+v, want boxed", o)
			}
			if o := spend(t, srcs[1], until-secs(1), checkOnly(withBox(hourly("140:crowd", 1), until)))[0]; o.Allowed || !o.Penalized || o.RetryIn != secs(1) {
				t.Fatalf("the bucket a second before the box's expiry, with tokens again: %+v, want its id still boxed", o)
			}
		})
	}
}
