package sourcetest

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
)

// ttl is how long the suite's idempotency records answer.
const ttl = int64(10 * time.Minute)

// runOnce registers the idempotency tests of the suite.
func runOnce(t *testing.T, newSource Factory) {
	t.Run("OnceReplaysTheFirstAnswer", func(t *testing.T) { testOnceReplays(t, newSource, 1) })
	t.Run("OnceReplaysABatch", func(t *testing.T) { testOnceReplays(t, newSource, 3) })
	t.Run("OnceReplaysADenial", func(t *testing.T) { testOnceReplaysDenial(t, newSource) })
	t.Run("OnceRefund", func(t *testing.T) { testOnceRefund(t, newSource) })
	t.Run("OnceMismatch", func(t *testing.T) { testOnceMismatch(t, newSource) })
	t.Run("OnceExpires", func(t *testing.T) { testOnceExpires(t, newSource) })
	t.Run("OnceConcurrent", func(t *testing.T) { testOnceConcurrent(t, newSource) })
	t.Run("OnceOfNoBucket", func(t *testing.T) { testOnceOfNoBucket(t, newSource) })
}

// testOnceOfNoBucket: a batch whose transactions are all unlimited has no
// op, and is recorded all the same: its repeat is a replay, and its key
// refuses another request, of no op or of some, changing nothing.
func testOnceOfNoBucket(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	rec := record(t, "none", "fp-none", base)
	if _, replayed := spendOnce(t, src, base, rec); replayed {
		t.Fatal("first call of no op: replayed")
	}
	if _, replayed := spendOnce(t, src, base+1, rec); !replayed {
		t.Fatal("repeat of no op: not replayed")
	}
	k := key(t, "a")
	for _, ops := range [][]bucket.Op{nil, {tenPerSecond.op(k, 1, bucket.CheckAndSpend)}} {
		out := make([]bucket.Outcome, len(ops))
		if _, err := src.SpendOnce(context.Background(), base, record(t, "none", "fp-other", base), ops, out); !errors.Is(err, once.ErrMismatch) {
			t.Fatalf("the key of a batch of no op, another fingerprint, %d ops: %v, want once.ErrMismatch", len(ops), err)
		}
	}
	if r := remaining(t, src, base, tenPerSecond, k); r != 10 {
		t.Fatalf("after the refused reuse: %d remaining, want 10", r)
	}
	// And the other way round: a key first used with some ops refuses a
	// batch of none.
	spendOnce(t, src, base, record(t, "some", "fp-some", base), tenPerSecond.op(k, 1, bucket.CheckAndSpend))
	if _, err := src.SpendOnce(context.Background(), base, record(t, "some", "fp-none", base), nil, nil); !errors.Is(err, once.ErrMismatch) {
		t.Fatalf("a batch of no op under a used key: %v, want once.ErrMismatch", err)
	}
}

func record(t *testing.T, name, fingerprint string, now int64) once.Record {
	return once.Record{Key: key(t, "rec-"+name), Fingerprint: fingerprint, Expires: now + ttl}
}

func spendOnce(t *testing.T, src ratelimits.Source, now int64, rec once.Record, ops ...bucket.Op) ([]bucket.Outcome, bool) {
	t.Helper()
	out := make([]bucket.Outcome, len(ops))
	replayed, err := src.SpendOnce(context.Background(), now, rec, ops, out)
	if err != nil {
		t.Fatalf("SpendOnce: %v", err)
	}
	return out, replayed
}

// testOnceReplays spends under a record, then repeats the call later: the
// repeat spends nothing and answers exactly the first outcomes.
func testOnceReplays(t *testing.T, newSource Factory, width int) {
	src := open(t, newSource)
	ops := make([]bucket.Op, width)
	for i := range ops {
		ops[i] = threePerSec.op(key(t, string(rune('a'+i))), 2, bucket.CheckAndSpend)
	}
	rec := record(t, "r", "fp-1", base)
	first, replayed := spendOnce(t, src, base, rec, ops...)
	if replayed || !first[0].Allowed || first[0].Remaining != 1 {
		t.Fatalf("first call: %+v replayed=%v, want allowed with 1 remaining, not replayed", first, replayed)
	}
	later := base + threePerSec.ei/2
	again, replayed := spendOnce(t, src, later, rec, ops...)
	if !replayed || !reflect.DeepEqual(again, first) {
		t.Fatalf("repeat: %+v replayed=%v, want the first outcomes %+v, replayed", again, replayed, first)
	}
	for _, op := range ops {
		// Half an interval on, the bucket still has exactly 1 token: the
		// repeat took none.
		if r := remaining(t, src, later, threePerSec, op.Key); r != 1 {
			t.Fatalf("%s after the repeat: %d remaining, want 1", op.Key, r)
		}
	}
}

// testOnceReplaysDenial: a denied call is recorded too, and its repeat is
// denied even once the bucket has refilled.
func testOnceReplaysDenial(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	k := key(t, "a")
	spend(t, src, base, threePerSec.op(k, 3, bucket.CheckAndSpend))
	rec := record(t, "r", "fp-1", base)
	first, _ := spendOnce(t, src, base, rec, threePerSec.op(k, 1, bucket.CheckAndSpend))
	if first[0].Allowed {
		t.Fatalf("spend on an empty bucket: %+v, want denied", first)
	}
	full := base + 3*threePerSec.ei
	again, replayed := spendOnce(t, src, full, rec, threePerSec.op(k, 1, bucket.CheckAndSpend))
	if !replayed || again[0].Allowed || again[0].RetryIn != first[0].RetryIn {
		t.Fatalf("repeat once full: %+v replayed=%v, want the first denial %+v", again, replayed, first)
	}
	if r := remaining(t, src, full, threePerSec, k); r != 3 {
		t.Fatalf("bucket after the repeat: %d remaining, want 3 (nothing spent)", r)
	}
}

func testOnceRefund(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	k := key(t, "a")
	spend(t, src, base, hundredPerH.op(k, 10, bucket.CheckAndSpend))
	rec := record(t, "r", "refund-fp", base)
	for i, wantReplayed := range []bool{false, true} {
		out := make([]bucket.Outcome, 1)
		replayed, err := src.RefundOnce(context.Background(), base, rec, []bucket.Op{hundredPerH.op(k, 4, bucket.CheckAndSpend)}, out)
		if err != nil || replayed != wantReplayed || !out[0].Allowed || out[0].Remaining != 94 {
			t.Fatalf("refund %d: %+v replayed=%v err=%v, want 94 remaining, replayed=%v", i, out, replayed, err, wantReplayed)
		}
	}
	if r := remaining(t, src, base, hundredPerH, k); r != 94 {
		t.Fatalf("after a refund and its repeat: %d remaining, want 94 (given back once)", r)
	}
}

// testOnceMismatch: a key used for one request refuses another, and
// changes nothing.
func testOnceMismatch(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	a, b := key(t, "a"), key(t, "b")
	spendOnce(t, src, base, record(t, "r", "fp-1", base), tenPerSecond.op(a, 1, bucket.CheckAndSpend))
	for _, ops := range [][]bucket.Op{
		{tenPerSecond.op(a, 1, bucket.CheckAndSpend)},
		{tenPerSecond.op(b, 5, bucket.CheckAndSpend)},
		{tenPerSecond.op(b, 5, bucket.CheckAndSpend), tenPerSecond.op(a, 5, bucket.CheckAndSpend)},
	} {
		out := make([]bucket.Outcome, len(ops))
		_, err := src.SpendOnce(context.Background(), base, record(t, "r", "fp-2", base), ops, out)
		if !errors.Is(err, once.ErrMismatch) {
			t.Fatalf("same key, another fingerprint, %d ops: %v, want once.ErrMismatch", len(ops), err)
		}
		out = make([]bucket.Outcome, 1)
		if _, err := src.RefundOnce(context.Background(), base, record(t, "r", "fp-3", base), ops[:1], out); !errors.Is(err, once.ErrMismatch) {
			t.Fatalf("a spend's key used for a refund: %v, want once.ErrMismatch", err)
		}
	}
	if ra, rb := remaining(t, src, base, tenPerSecond, a), remaining(t, src, base, tenPerSecond, b); ra != 9 || rb != 10 {
		t.Fatalf("after refused reuses: a %d, b %d remaining, want 9 and 10", ra, rb)
	}
}

// testOnceExpires: from its expiry on, a record answers nothing and the
// same key decides anew.
func testOnceExpires(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	k := key(t, "a")
	rec := record(t, "r", "fp-1", base)
	spendOnce(t, src, base, rec, hundredPerH.op(k, 1, bucket.CheckAndSpend))
	at := rec.Expires
	out, replayed := spendOnce(t, src, at, once.Record{Key: rec.Key, Fingerprint: rec.Fingerprint, Expires: at + ttl}, hundredPerH.op(k, 1, bucket.CheckAndSpend))
	if replayed || !out[0].Allowed {
		t.Fatalf("same key at the record's expiry: %+v replayed=%v, want decided anew", out, replayed)
	}
	// Ten minutes on, the first token (36 s) is long back: the second
	// spend leaves 99.
	if r := remaining(t, src, at, hundredPerH, k); r != 99 {
		t.Fatalf("after the second spend: %d remaining, want 99", r)
	}
}

// testOnceConcurrent: many callers send the same call at once; it is
// applied once, and every caller gets the same answer.
func testOnceConcurrent(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	k := key(t, "a")
	rec := record(t, "r", "fp-1", base)
	const callers = 32
	var fresh atomic.Int64
	var wg sync.WaitGroup
	outs := make([][]bucket.Outcome, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i] = make([]bucket.Outcome, 1)
			replayed, err := src.SpendOnce(context.Background(), base, rec, []bucket.Op{hundredPerH.op(k, 5, bucket.CheckAndSpend)}, outs[i])
			errs[i] = err
			if err == nil && !replayed {
				fresh.Add(1)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
		if !reflect.DeepEqual(outs[i], outs[0]) {
			t.Fatalf("caller %d got %+v, caller 0 %+v: want one answer", i, outs[i], outs[0])
		}
	}
	if fresh.Load() != 1 {
		t.Fatalf("%d callers were decided anew, want exactly 1", fresh.Load())
	}
	if r := remaining(t, src, base, hundredPerH, k); r != 95 {
		t.Fatalf("after %d identical calls: %d remaining, want 95 (spent once)", callers, r)
	}
}
