package client_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/client"
)

// The tests of the calls against the service itself are in the main
// module (test/client), which runs its HTTP handler in process; these
// need no service.

// New refuses what it cannot send or reach.
func TestNewRefusesBadOptions(t *testing.T) {
	for _, o := range []client.Options{
		{BaseURL: ""},
		{BaseURL: "limiter:8080"},
		{BaseURL: "ftp://limiter"},
		{BaseURL: "http://"},
		{BaseURL: "http://limiter/?x=1"},
		{BaseURL: "http://limiter/#top"},
		{BaseURL: "http://limiter", APIToken: "two words"},
		{BaseURL: "http://limiter", AdminToken: "line\nbreak"},
	} {
		if c, err := client.New(o); err == nil || c != nil {
			t.Errorf("New(%+v) = %v, %v; want an error", o, c, err)
		}
	}
}

// A connection that cannot be made sent nothing: every call is retried,
// a spend without a key too, until the retries run out.
func TestRefusedConnectionIsRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	fast := client.RetryPolicy{MaxRetries: 3, BaseDelay: time.Microsecond, MaxDelay: time.Millisecond}
	c, err := client.New(client.Options{BaseURL: "http://" + addr, Retry: fast})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Spend(context.Background(), client.Transaction{Limit: "Logins", ID: "alice"}, client.WithoutIdempotencyKey())
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" || !strings.Contains(err.Error(), "(attempt 4)") {
		t.Fatalf("%v, want the dial's error after 4 attempts", err)
	}
}
