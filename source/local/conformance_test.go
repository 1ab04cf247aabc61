package local

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/ratelimits/window"
	"github.com/limiter-dev/limiter/source/sourcetest"
)

// asSource runs one process's layer as if it were a source, every limit of
// sync_rate rate, so that the shared conformance suite can compare it with
// the model: with one process, what it decides must be exact. A GCRA limit
// or concurrency limit is never counted here: a test that uses one is
// skipped.
type asSource struct {
	t    *testing.T
	l    *Layer
	rate time.Duration
}

func (s *asSource) local(ops []bucket.Op) []bucket.Op {
	out := make([]bucket.Op, len(ops))
	for i, op := range ops {
		if op.Algorithm == bucket.GCRA {
			s.t.Skip("a GCRA limit is never counted in the local layer")
		}
		if op.Algorithm == bucket.Concurrency {
			s.t.Skip("a concurrency limit is never counted in the local layer: it has no sync_rate")
		}
		out[i] = op
		out[i].SyncRate = s.rate
	}
	return out
}

func (s *asSource) Spend(_ context.Context, now int64, ops []bucket.Op, out []bucket.Outcome) error {
	s.l.spend(now, s.local(ops), out)
	return nil
}

func (s *asSource) Refund(_ context.Context, now int64, ops []bucket.Op, out []bucket.Outcome) error {
	return s.l.refund(context.Background(), now, s.local(ops), out, nil)
}

func (s *asSource) Reset(ctx context.Context, now int64, ops []bucket.Op) (int, error) {
	return s.l.reset(ctx, now, s.local(ops), func(context.Context) (int, error) { return 0, nil })
}

func (s *asSource) Call(ctx context.Context, now int64, call *bucket.Call, res *bucket.CallResult) error {
	c := *call
	c.Counters = slices.Clone(call.Counters)
	return s.l.call(ctx, now, atRate(&c, s.rate), res)
}

var errNoOnce = errors.New("the local layer keeps no idempotency records")

func (s *asSource) SpendOnce(context.Context, int64, once.Record, []bucket.Op, []bucket.Outcome) (bool, error) {
	return false, errNoOnce
}

func (s *asSource) RefundOnce(context.Context, int64, once.Record, []bucket.Op, []bucket.Outcome) (bool, error) {
	return false, errNoOnce
}

func (s *asSource) Ping(context.Context) error { return nil }
func (s *asSource) Close() error               { return nil }

// The rate-counter and box part of the conformance suite, on one process,
// below 0 and above 0 (where, never synced, it decides on its own hits).
func TestConformance(t *testing.T) {
	for _, rate := range []time.Duration{-1, time.Second} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			sourcetest.RunERL(t, func(t *testing.T) ratelimits.Source {
				return &asSource{t: t, l: newProcess(t, newStore(), fakeClock(), Options{}).Layer, rate: rate}
			})
		})
	}
}

// reset is what the store's side of a reset does: it deletes the ops'
// counters and box entries and counts those that still counted.
func (s *store) reset(now int64, ops []bucket.Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i := range ops {
		op := &ops[i]
		var st bucket.State
		if c, ok := s.rates[op.Key]; ok && op.Algorithm == bucket.RateCounter {
			st.Rate = &c
		}
		if c, ok := s.counters[op.Key]; ok && op.Algorithm.Windowed() {
			st.Window = at(c, bucket.Millis(now), op.Window.Period)
		}
		if op.Box != "" {
			st.BoxExpires = s.boxes[op.Box]
			delete(s.boxes, op.Box)
		}
		if bucket.Busy(now, op, st) {
			n++
		}
		delete(s.rates, op.Key)
		delete(s.counters, op.Key)
	}
	return n
}

// One process compared with the model on random batches of rate-counter
// ops and window ops with boxes, ERL calls, refunds and resets: below 0,
// above 0 never synced, and above 0 synced after every step (with the
// store's side of each reset and refund).
func TestMatchesModel(t *testing.T) {
	for _, v := range []struct {
		name   string
		rate   time.Duration
		synced bool
	}{{"below0", -1, false}, {"above0", time.Second, false}, {"above0-synced", time.Second, true}} {
		t.Run(v.name, func(t *testing.T) {
			s, clk := newStore(), fakeClock()
			p := newProcess(t, s, clk, Options{})
			model := sourcetest.Model{}
			rng := rand.New(rand.NewPCG(3, uint64(len(v.name))))
			now := clk.Now().UnixNano()
			keys := []string{"7:a", "7:b", "7:c"}
			randOp := func(k string) bucket.Op {
				mode := bucket.Mode(rng.IntN(3))
				if rng.IntN(2) == 0 {
					return bucket.Op{Key: k, Algorithm: bucket.RateCounter, Rate: ratecounter.Limit{Window: []int64{1, 10, 60}[rng.IntN(3)], Rate: 10},
						Cost: rng.Int64N(25), Mode: mode, Box: k, BoxUntil: now + int64(rng.IntN(4)+1)*int64(time.Minute), Capacity: 1000}
				}
				return bucket.Op{Key: k + ":w", Algorithm: bucket.SlidingWindow, Window: window.Limit{Count: 10, Period: 60_000},
					Cost: rng.Int64N(4), Mode: mode, Box: k + ":w", BoxUntil: now + int64(rng.IntN(20)+1)*int64(time.Second), Capacity: 1000}
			}
			lops := func(ops ...bucket.Op) []bucket.Op {
				out := make([]bucket.Op, len(ops))
				for i := range ops {
					out[i] = ops[i]
					out[i].SyncRate = v.rate
				}
				return out
			}
			for step := range 1500 {
				now += rng.Int64N(3 * int64(time.Second))
				clk.Set(time.Unix(0, now))
				k := keys[rng.IntN(len(keys))]
				what := rng.IntN(10)
				switch what {
				case 0:
					op := randOp(k)
					got, err := p.reset(context.Background(), now, lops(op), func(context.Context) (int, error) {
						return s.reset(now, []bucket.Op{op}), nil
					})
					if want := model.Reset(now, []bucket.Op{op}); err != nil || got != want {
						t.Fatalf("step %d: reset of %+v: %d, %v; the model says %d", step, op, got, err, want)
					}
				case 1, 2:
					op := randOp(k)
					out := make([]bucket.Outcome, 1)
					if err := p.refund(context.Background(), now, lops(op), out, s.refunder(now)); err != nil {
						t.Fatal(err)
					}
					if want := model.Apply(now, []bucket.Op{op}, true); out[0].Decision != want[0].Decision {
						t.Fatalf("step %d: refund of %+v:\n got %+v\nwant %+v", step, op, out[0].Decision, want[0].Decision)
					}
				case 3, 4, 5:
					c := bucket.Call{
						Counters: []bucket.CounterCheck{{Key: k + ":rc", Delta: rng.Int64N(30), Limit: ratecounter.Limit{Window: []int64{1, 10, 60}[rng.IntN(3)], Rate: 10}, Capacity: 1000}},
						Box:      k + ":box", Action: bucket.BoxAction(rng.IntN(6)), Until: now + int64(rng.IntN(180))*int64(time.Second), BoxCapacity: 1000,
					}
					if c.Action == bucket.BoxNone {
						c.Box = ""
					}
					if rng.IntN(2) == 0 { // a box call alone
						c.Counters = nil
						if c.Action == bucket.BoxNone || c.Action == bucket.BoxWhenAbove {
							c.Action = bucket.BoxRead
						}
						c.Box = k + ":box"
					}
					var got, want bucket.CallResult
					if err := p.Layer.call(context.Background(), now, atRate(&c, v.rate), &got); err != nil {
						t.Fatal(err)
					}
					model.Call(now, &c, &want)
					if sec := ratecounter.Second(now); readCall(got, sec) != readCall(want, sec) {
						t.Fatalf("step %d: call %+v:\n got %+v\nwant %+v", step, c, got, want)
					}
				default:
					ops := []bucket.Op{randOp(k), randOp(keys[(step+1)%len(keys)] + ":x")}
					out := make([]bucket.Outcome, 2)
					p.Layer.spend(now, lops(ops...), out)
					want := model.Apply(now, ops, false)
					for i := range out {
						if out[i].Decision != want[i].Decision || out[i].Write != want[i].Write || out[i].WriteBox != want[i].WriteBox {
							t.Fatalf("step %d: spend of %+v, op %d:\n got %+v\nwant %+v", step, ops, i, out[i], want[i])
						}
					}
				}
				if v.synced {
					p.sync(t)
				}
			}
			if syncs, _ := s.rateCalls(); v.synced && syncs < 1000 {
				t.Fatalf("%d rate syncs in 1500 steps synced after each", syncs)
			}
		})
	}
}

// callReading is what a call's result says at second s: the counters'
// windows and buckets (a counter whose hits have all left them may be
// forgotten, or kept, with the same reading), the box and the removal.
type callReading struct {
	counters [2][9]int64
	above    [2]bool
	expires  int64
	removed  bool
}

func readCall(r bucket.CallResult, s int64) callReading {
	out := callReading{above: r.Above, expires: r.Expires, removed: r.Removed}
	for i := range r.Counters {
		for j, w := range []int64{1, 10, 60} {
			out.counters[i][j] = r.Counters[i].Window(s, w)
		}
		for j := range 6 {
			out.counters[i][3+j] = r.Counters[i].Bucket(s, int64(10*(j+1)))
		}
	}
	return out
}

func (s *asSource) ListBox(_ context.Context, now int64, enum, cursor string, max int) (ratelimits.BoxPage, error) {
	return s.l.ListBox(now, enum, s.rate, cursor, max)
}
