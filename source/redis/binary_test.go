package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/source/redis"
)

// A limit whose algorithm changed reads the TAT its bucket holds as
// empty, in either form: a window, a rate counter with its box and a
// concurrency limit each start afresh over a binary TAT (a calendar
// quota's counters have names of their own, per period), in
// a call of their own (the script's fast path where it takes them) and in
// a batch (its general path); a reset counts it only under a GCRA op.
func TestOtherAlgorithmsReadABinaryTATAsEmpty(t *testing.T) {
	// An hour on, with a high limb whose last byte is 1: the form's sixth
	// byte, where a rate counter keeps its width, so that only the 'T'
	// tells the two apart.
	tat := storedTAT(redis.Options{BinaryTATs: true}, 0x6ab1_4a01*int64(time.Second)+5)
	fresh := func(t *testing.T, op bucket.Op, out bucket.Outcome, want int64) {
		t.Helper()
		if !out.Allowed || out.Remaining != want {
			t.Errorf("%s over a binary TAT: %+v, want allowed with %d left", op.Key, out.Decision, want)
		}
	}
	for _, b := range standalones {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			c := rawClient(t, opts)
			ops := []bucket.Op{perMinute("w", 1), fixedMinute("f", 1), rateOp("r", 10, 10, 1, now+secs(60)), acquire("l", 2, 1_000)}
			want := []int64{99, 99, 99, 1}
			for i, op := range ops {
				storeRaw(t, c, src, op.Key, tat)
				fresh(t, op, spend(t, src, now, op)[0], want[i])
				storeRaw(t, c, src, op.Key, tat)
			}
			for i, out := range spend(t, src, now, ops...) {
				fresh(t, ops[i], out, want[i])
			}
			storeRaw(t, c, src, "g", tat)
			storeRaw(t, c, src, "w", tat)
			if n, err := src.Reset(context.Background(), now, []bucket.Op{hourly("g", 0), perMinute("w", 0)}); err != nil || n != 1 {
				t.Errorf("Reset of a GCRA op and a window op over binary TATs = %d, %v; want 1", n, err)
			}
		})
	}
}
