package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/limiter-dev/limiter/client"
)

// The client keeps its connections: answers of every kind, refusals
// included, are read whole so that the connection serves the next call.
func TestConnectionsAreReused(t *testing.T) {
	s := newServer(t, serverOptions{apiTokens: []string{"api-1"}})
	c := newClient(t, s, client.Options{APIToken: "api-1"})
	ctx := context.Background()
	alice := client.Transaction{Limit: "Logins", ID: "alice"}
	for i := range 10 {
		if _, err := c.Spend(ctx, alice); err != nil { // allowed, then denied
			t.Fatal(err)
		}
		if _, err := c.Spend(ctx, alice.WithCost(9)); !client.IsCode(err, client.CodeInvalidCost) {
			t.Fatalf("%d: %v", i, err)
		}
		if _, err := c.Subscriber(ctx, "Nope", "x"); !client.IsCode(err, client.CodeUnknownLimit) {
			t.Fatalf("%d: %v", i, err)
		}
		if _, err := c.Limits(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("40 calls one after another opened %d connections, want 1", n)
	}
}

// Concurrent callers share a pool as large as their number: no
// connection is opened and dropped for want of room to keep it idle. (Go's
// transport may dial a connection for a caller while another comes back
// to the pool, so a few more than the callers may open; with Go's default
// of 2 idle connections per host, this load opens some twenty or more.)
func TestConcurrentCallersKeepTheirConnections(t *testing.T) {
	s := newServer(t, serverOptions{})
	c := newClient(t, s, client.Options{})
	const callers, each = 8, 100
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Go(func() {
			for i := range each {
				if _, err := c.Spend(context.Background(), client.Transaction{Limit: "Logins", ID: fmt.Sprintf("u%d-%d", g, i)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := s.conns.Load(); n > 2*callers {
		t.Fatalf("%d concurrent callers making %d calls opened %d connections, want at most %d", callers, callers*each, n, 2*callers)
	}
}
