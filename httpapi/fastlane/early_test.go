package fastlane_test

import (
	"context"
	"testing"
	"time"
)

// TestRefusedLineAnsweredAtOnce: net/http answers 400 as soon as it reads
// a line it refuses, without waiting for the rest of the head; so must
// the lane, which hands such a connection over when that line arrives.
// The client keeps its side open, as a real one would, so nothing but
// the line itself can make either server answer (both have 5 s for the
// head, and the test waits at most waitBound for the answer).
func TestRefusedLineAnsweredAtOnce(t *testing.T) {
	p := startPair(t, false)
	for _, c := range []struct {
		name, input string
	}{
		{"a request line with a fourth part", "GET /lane/echo HTTP/1.1 x\r\n"},
		{"a header line without a colon", "GET /lane/echo HTTP/1.1\r\nfoo\r\n"},
		{"a header line that is a lone CR", "GET /lane/echo HTTP/1.1\r\nHost: a\r\n\r\r\n"},
		{"after an answer, a request line with a fourth part", req("GET", "/lane/echo") + "GET /lane/echo HTTP/1.1 x\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, addr := range []string{p.plainAddr, p.laneAddr} {
				cl := dial(t, "tcp", addr)
				if err := cl.send(c.input); err != nil {
					t.Fatal(err)
				}
				var statuses []int
				for {
					resp, _, err := cl.answer("GET")
					if err != nil {
						break
					}
					statuses = append(statuses, resp.StatusCode)
					if resp.StatusCode == 400 {
						break
					}
				}
				if len(statuses) == 0 || statuses[len(statuses)-1] != 400 {
					server := "net/http"
					if addr == p.laneAddr {
						server = "the lane"
					}
					t.Errorf("%s answered %v, want a 400 at once", server, statuses)
				}
			}
		})
	}
}

// TestShutdownClosesPartialHead: as net/http's, a connection reading the
// head of its next request is idle: Shutdown closes it rather than wait
// for the head, and the rest of the head, arriving after, is not served.
func TestShutdownClosesPartialHead(t *testing.T) {
	l := startLane(t, "tcp", nil, nil, nil)
	c := dial(t, "tcp", l.addr)
	if err := c.roundTrip("/lane/echo/1"); err != nil {
		t.Fatal(err)
	}
	if err := c.send("GET /lane/echo/2 HTTP/1.1\r\nHost: a\r\n"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	start := time.Now()
	if err := l.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a partial head: %v after %v", err, time.Since(start))
	}
	_ = c.send("\r\n")
	if err := c.closed(waitBound); err != nil {
		t.Errorf("after Shutdown: %v", err)
	}
}
