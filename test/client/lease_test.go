package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/client"
)

// held reads how many of Exports' 2 slots id holds.
func held(t *testing.T, c *client.Client, id string) int64 {
	t.Helper()
	d, err := c.Subscriber(context.Background(), "Exports", id)
	if err != nil {
		t.Fatal(err)
	}
	return 2 - d.Remaining
}

func TestAcquireReleaseRenew(t *testing.T) {
	s := newServer(t, serverOptions{})
	c := newClient(t, s, client.Options{})
	ctx := context.Background()
	exports := client.Transaction{Limit: "Exports", ID: "ann"}
	l, d, err := c.Acquire(ctx, exports)
	if err != nil || l.Lease == "" || l.TTL != time.Second || d.Decisions[0].Algorithm != client.Concurrency {
		t.Fatalf("Acquire = %+v, %+v, %v", l, d, err)
	}
	if _, _, err := c.Acquire(ctx, exports); err != nil {
		t.Fatal(err)
	}
	if none, d, err := c.Acquire(ctx, exports); err != nil || none.Lease != "" || d.Allowed || d.RetryIn != time.Second {
		t.Fatalf("a third Acquire = %+v, %+v, %v; want denied, retry in 1s", none, d, err)
	}
	s.clock.Add(500 * time.Millisecond)
	if d, err := c.Renew(ctx, l); err != nil || !d.Allowed || d.ResetIn != time.Second {
		t.Fatalf("Renew = %+v, %v", d, err)
	}
	if d, err := c.Release(ctx, l); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("Release = %+v, %v", d, err)
	}
	if d, err := c.Release(ctx, l); err != nil || d.Allowed {
		t.Fatalf("a second Release = %+v, %v; want not allowed, no error", d, err)
	}
}

// WithLease keeps its lease while the function runs many times the lease's
// time to live, and releases it when the function returns. The service's
// clock is fake: the function moves it on, and waits for renewals made
// after each move.
func TestWithLeaseRenewsAndReleases(t *testing.T) {
	s := newServer(t, serverOptions{})
	c := newClient(t, s, client.Options{})
	renewals := make(chan bool)
	quit := make(chan struct{})
	onRenew := client.OnRenew(func(d *client.Decision, err error) {
		select {
		case renewals <- err == nil && d.Allowed:
		case <-quit:
		}
	})
	_, err := c.WithLease(context.Background(), client.Transaction{Limit: "Exports", ID: "bob"}, func(ctx context.Context) error {
		defer close(quit)
		for range 6 {
			// 600ms of a 1s lease: without a renewal since, the next move
			// would end it. The second renewal seen was sent after the
			// move (the first may have been sent before).
			s.clock.Add(600 * time.Millisecond)
			for range 2 {
				if ok := <-renewals; !ok {
					t.Error("a renewal failed")
				}
			}
		}
		if n := held(t, c, "bob"); n != 1 {
			t.Errorf("after 3.6s, 3.6 times the lease's TTL, bob holds %d slots, want 1", n)
		}
		return ctx.Err()
	}, client.RenewEvery(time.Millisecond), onRenew)
	if err != nil {
		t.Fatal(err)
	}
	if n := held(t, c, "bob"); n != 0 {
		t.Errorf("after WithLease returned, bob holds %d slots, want 0", n)
	}
}

func TestWithLeaseReleasesOnPanic(t *testing.T) {
	s := newServer(t, serverOptions{})
	c := newClient(t, s, client.Options{})
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Errorf("recovered %v, want the function's panic", v)
			}
		}()
		_, _ = c.WithLease(context.Background(), client.Transaction{Limit: "Exports", ID: "cy"}, func(context.Context) error {
			panic("boom")
		})
	}()
	if n := held(t, c, "cy"); n != 0 {
		t.Errorf("after a panic, cy holds %d slots, want 0", n)
	}
}

func TestWithLeaseNotAcquiredAndLost(t *testing.T) {
	s := newServer(t, serverOptions{})
	c := newClient(t, s, client.Options{})
	ctx := context.Background()
	full := client.Transaction{Limit: "Exports", ID: "dee"}.WithCost(2)
	if _, _, err := c.Acquire(ctx, full); err != nil {
		t.Fatal(err)
	}
	ran := false
	d, err := c.WithLease(ctx, client.Transaction{Limit: "Exports", ID: "dee"}, func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, client.ErrNotAcquired) || ran || d == nil || d.Allowed {
		t.Fatalf("WithLease on a full limit = %+v, %v, ran %v; want ErrNotAcquired, not run", d, err, ran)
	}
	// A spend-only transaction's batch is allowed whatever it decides: its
	// own decision says there is no slot.
	spendOnly := client.Transaction{Limit: "Exports", ID: "dee", Mode: client.ModeSpendOnly}
	d, err = c.WithLease(ctx, spendOnly, func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, client.ErrNotAcquired) || ran || d == nil || d.Decisions[0].Allowed {
		t.Fatalf("a spend-only WithLease on a full limit = %+v, %v, ran %v; want ErrNotAcquired, not run", d, err, ran)
	}
	// A lease reset away is lost: the next renewal cancels the function's
	// context with ErrLeaseLost.
	_, err = c.WithLease(ctx, client.Transaction{Limit: "Exports", ID: "eve"}, func(ctx context.Context) error {
		if _, err := c.Reset(ctx, client.Transaction{Limit: "Exports", ID: "eve"}); err != nil {
			return err
		}
		<-ctx.Done()
		return context.Cause(ctx)
	}, client.RenewEvery(time.Millisecond))
	if !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("WithLease whose lease was reset = %v, want ErrLeaseLost", err)
	}
}

// WithLease runs nothing for a transaction that takes no lease: a
// check-only one or one of cost 0 is refused before any call, and one of
// a limit that is not a concurrency limit, limiting the id or not, after
// its spend.
func TestWithLeaseOfNoLease(t *testing.T) {
	s := newServer(t, serverOptions{})
	c := newClient(t, s, client.Options{})
	ctx := context.Background()
	for _, tx := range []client.Transaction{
		{Limit: "Exports", ID: "fay", Mode: client.ModeCheckOnly},
		client.Transaction{Limit: "Exports", ID: "fay"}.WithCost(0),
		{Limit: "Logins", ID: "fay"},
		{Limit: "NewOrdersPerAccount", ID: "42"}, // no default: unlimited
	} {
		ran := false
		if _, err := c.WithLease(ctx, tx, func(context.Context) error { ran = true; return nil }); !errors.Is(err, client.ErrNoLease) || ran {
			t.Errorf("WithLease(%+v) = %v, ran %v; want ErrNoLease, not run", tx, err, ran)
		}
	}
	if n := held(t, c, "fay"); n != 0 {
		t.Errorf("fay holds %d slots, want 0", n)
	}
}

// WithLease releases as its function returns, without waiting for a
// renewal in flight: here one the service holds until the release is in.
func TestWithLeaseReleasesPastARenewalInFlight(t *testing.T) {
	renewing, released := make(chan struct{}, 1), make(chan struct{})
	s := newServer(t, serverOptions{wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/renew" {
				select {
				case renewing <- struct{}{}:
				default:
				}
				select {
				case <-released:
				case <-r.Context().Done():
					return
				}
			}
			next.ServeHTTP(w, r)
			if r.URL.Path == "/v1/release" {
				close(released)
			}
		})
	}})
	c := newClient(t, s, client.Options{AttemptTimeout: -1})
	returned := make(chan error, 1)
	go func() {
		_, err := c.WithLease(context.Background(), client.Transaction{Limit: "Exports", ID: "gus"}, func(context.Context) error {
			<-renewing
			return nil
		}, client.RenewEvery(time.Millisecond))
		returned <- err
	}()
	select {
	case err := <-returned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // a guard against a hang, not a measure
		t.Fatal("WithLease waited for the renewal in flight before releasing")
	}
	if n := held(t, c, "gus"); n != 0 {
		t.Errorf("after WithLease returned, gus holds %d slots, want 0", n)
	}
}

// A spend the service allows without a lease, failing open while its
// source is down, runs the function without one.
func TestWithLeaseFailingOpen(t *testing.T) {
	s := newServer(t, serverOptions{failOpen: true})
	c := newClient(t, s, client.Options{Retry: client.RetryPolicy{MaxRetries: client.NoRetries}})
	s.source.failNext(failUnapplied)
	ran := false
	d, err := c.WithLease(context.Background(), client.Transaction{Limit: "Exports", ID: "hal"}, func(context.Context) error { ran = true; return nil })
	if err != nil || !ran || !d.Degraded {
		t.Fatalf("WithLease failing open = %+v, %v, ran %v; want the function run, the decision degraded", d, err, ran)
	}
}
