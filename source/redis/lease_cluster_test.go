package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
)

// A batch denied in a later slot gives back the lease an acquire in an
// earlier slot took: the lease set is as before (here, gone), and the
// acquire's decision carries no lease.
func TestClusterDeniedBatchReleasesItsLease(t *testing.T) {
	opts := cluster(t)
	src := newSource(t, opts)
	c := rawClient(t, opts)
	b := bucketsInSlots(2)
	leased, full := b[0], b[1]
	spend(t, src, now, hourly(full, 100))
	out := spend(t, src, now, acquire(leased, 2, 60_000), hourly(full, 1))
	if !out[0].Allowed || out[0].Lease != "" || out[1].Allowed {
		t.Fatalf("outcomes %+v: want the acquire allowed without a lease, the GCRA op denied", out)
	}
	if v, ok := stored(t, c, src, leased); ok {
		t.Fatalf("the lease set holds %q after the denied batch, want none", v)
	}
}

// An idempotent batch across slots, recorded beside its claim, is
// replayed with the lease its acquire was given, and acquires nothing
// more.
func TestClusterOnceAcrossSlotsReplaysTheLease(t *testing.T) {
	opts := cluster(t)
	src := newSource(t, opts)
	c := rawClient(t, opts)
	b := bucketsInSlots(2)
	rec := once.Record{Key: "k", Fingerprint: "f", Expires: now + int64(time.Hour)}
	run := func(at int64) ([]bucket.Outcome, bool) {
		t.Helper()
		out := make([]bucket.Outcome, 2)
		replayed, err := src.SpendOnce(context.Background(), at, rec, []bucket.Op{acquire(b[0], 2, 60_000), hourly(b[1], 1)}, out)
		if err != nil {
			t.Fatal(err)
		}
		return out, replayed
	}
	first, replayed := run(now)
	if replayed || !first[0].Allowed || first[0].Lease == "" {
		t.Fatalf("first call %+v (replayed %v): want a lease", first, replayed)
	}
	again, replayed := run(now + int64(time.Millisecond))
	if !replayed || again[0].Decision != first[0].Decision {
		t.Fatalf("replay %+v (replayed %v), want %+v", again[0].Decision, replayed, first[0].Decision)
	}
	v, _ := stored(t, c, src, b[0])
	if n, _ := storedLeases(t, v); n != 1 {
		t.Fatalf("%d leases stored after a replay, want 1: %q", n, v)
	}
}
