package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The wait between attempts ends with its context, however long it was
// to be.
func TestWaitEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- wait(ctx, time.Hour) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("wait: %v, want the cancellation", err)
	}
	if err := wait(context.Background(), time.Microsecond); err != nil {
		t.Fatalf("a wait that runs out: %v", err)
	}
}
