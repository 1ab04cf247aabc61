package fastlane_test

// The lane's connections live as net/http's do: closed when idle too
// long or when a head takes too long, closed by Shutdown once idle, their
// requests in flight let finish. The tests here watch one connection at a
// time and wait on what it does (an answer, the server's close) with
// generous bounds, never on a guess of how long something takes.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/httpapi/fastlane"
)

// waitBound is how long a test waits for something that should happen
// within a fraction of it: long enough for a loaded machine under the
// race detector, short enough that a hang fails the test, not the suite.
const waitBound = 5 * time.Second

// laneServer is a fastlane.Server serving a testHandler on loopback.
type laneServer struct {
	srv    *fastlane.Server
	addr   string
	h      *testHandler
	served chan error // Serve's result
}

// startLane starts a lane server whose Fallback is configured as the
// differential tests' servers are, then changed by configure. Its
// handler's /block route waits on block, if given, after sending the path
// on entered.
func startLane(t *testing.T, network string, configure func(*http.Server), entered chan<- string, block <-chan struct{}) *laneServer {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "lane.sock")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	h := &testHandler{rec: &recorder{}, local: ln.Addr().String(), entered: entered, block: block}
	s := &fastlane.Server{Fallback: serverConfig(h), Match: lanePath}
	h.srv = s.Fallback
	if configure != nil {
		configure(s.Fallback)
	}
	l := &laneServer{srv: s, addr: ln.Addr().String(), h: h, served: make(chan error, 1)}
	go func() { l.served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		s.Shutdown(ctx)
	})
	return l
}

// client is one connection, read through a bufio.Reader so answers can
// be parsed one at a time.
type client struct {
	conn net.Conn
	br   *bufio.Reader
}

func dial(t *testing.T, network, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout(network, addr, waitBound)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{conn: c, br: bufio.NewReader(c)}
}

func (c *client) send(s string) error {
	c.conn.SetWriteDeadline(time.Now().Add(waitBound))
	_, err := io.WriteString(c.conn, s)
	return err
}

// answer reads the next answer, to a request made with method, whole.
func (c *client) answer(method string) (*http.Response, string, error) {
	c.conn.SetReadDeadline(time.Now().Add(waitBound))
	resp, err := http.ReadResponse(c.br, &http.Request{Method: method})
	if err != nil {
		return nil, "", fmt.Errorf("no answer: %w", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", fmt.Errorf("answer cut short: %w", err)
	}
	return resp, string(body), nil
}

// roundTrip sends a lane GET of path and checks its answer echoes it.
func (c *client) roundTrip(path string) error {
	if err := c.send(req("GET", path)); err != nil {
		return err
	}
	resp, body, err := c.answer("GET")
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || !strings.Contains(body, fmt.Sprintf("path=%q", path)) {
		return fmt.Errorf("answer %d %q to GET %s", resp.StatusCode, body, path)
	}
	return nil
}

// closed waits up to within for the server to close the connection, and
// reports how it ended: nil for a close with nothing more sent.
func (c *client) closed(within time.Duration) error {
	c.conn.SetReadDeadline(time.Now().Add(within))
	buf := make([]byte, 512)
	n, err := c.br.Read(buf)
	var ne net.Error
	switch {
	case n > 0:
		return fmt.Errorf("got %q, want the connection closed", buf[:n])
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return nil
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("still open after %v", within)
	default:
		return err
	}
}

// TestIdleTimeoutClosesLaneConnection: a lane connection idle for
// Fallback's IdleTimeout is closed.
func TestIdleTimeoutClosesLaneConnection(t *testing.T) {
	l := startLane(t, "tcp", func(s *http.Server) { s.IdleTimeout = 100 * time.Millisecond }, nil, nil)
	c := dial(t, "tcp", l.addr)
	if err := c.roundTrip("/lane/echo"); err != nil {
		t.Fatal(err)
	}
	if err := c.closed(3 * time.Second); err != nil {
		t.Fatalf("idle lane connection: %v", err)
	}
	if seen := l.h.rec.take(c.conn.LocalAddr().String()); len(seen) != 1 || seen[0].via != "lane" {
		t.Errorf("records %v: want one request, served by the lane", seen)
	}
}

// TestReadHeaderTimeoutClosesPartialHead: a head that has begun and does
// not end within ReadHeaderTimeout is dropped with the connection, on a
// new connection and on one that has been answered before.
func TestReadHeaderTimeoutClosesPartialHead(t *testing.T) {
	const timeout = 200 * time.Millisecond
	l := startLane(t, "tcp", func(s *http.Server) {
		s.ReadHeaderTimeout = timeout
		s.IdleTimeout = time.Minute // so only the header timeout can close
	}, nil, nil)
	for _, answeredBefore := range []bool{false, true} {
		t.Run(fmt.Sprintf("answered before: %v", answeredBefore), func(t *testing.T) {
			c := dial(t, "tcp", l.addr)
			if answeredBefore {
				if err := c.roundTrip("/lane/echo"); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			if err := c.send("GET /lane/echo HTTP/1.1\r\nHost: exa"); err != nil {
				t.Fatal(err)
			}
			if err := c.closed(3 * time.Second); err != nil {
				t.Fatalf("partial head: %v", err)
			}
			// A deadline does not fire early: this bound cannot flake.
			if d := time.Since(start); d < timeout {
				t.Errorf("closed after %v, before ReadHeaderTimeout (%v)", d, timeout)
			}
		})
	}
}

// bothServers runs flow against a plain http.Server and a lane server
// configured alike, at once, and fails the test where the lane's result
// differs; flow returns nil for the outcome net/http gives, and an
// outcome of net/http's other than nil means the flow itself is wrong.
func bothServers(t *testing.T, configure func(*http.Server), flow func(c *client) error) {
	t.Helper()
	p := startPair(t, false, configure)
	var plainErr, laneErr error
	var wg sync.WaitGroup
	wg.Go(func() { plainErr = flow(dial(t, "tcp", p.plainAddr)) })
	wg.Go(func() { laneErr = flow(dial(t, "tcp", p.laneAddr)) })
	wg.Wait()
	if plainErr != nil {
		t.Fatalf("net/http: %v (the test is wrong)", plainErr)
	}
	if laneErr != nil {
		t.Errorf("lane: %v; net/http answered", laneErr)
	}
}

// TestPipelinedAnswerNotHeldBack: an answer is written when it is made,
// not kept until the next request's head has arrived in full: a client
// that sent its next request only in part still gets the answer to the
// one before.
func TestPipelinedAnswerNotHeldBack(t *testing.T) {
	bothServers(t, func(s *http.Server) { s.ReadHeaderTimeout = 2 * time.Second }, func(c *client) error {
		if err := c.send(req("GET", "/lane/echo/1") + "GET /lane/echo/2 HTTP/1.1\r\nHost: exa"); err != nil {
			return err
		}
		if _, body, err := c.answer("GET"); err != nil || !strings.Contains(body, "/lane/echo/1") {
			return fmt.Errorf("answer to the first request: %q, %v", body, err)
		}
		return nil
	})
}

// TestTimeoutsCountFromTheRightMoment compares when each server closes
// a connection in two timelines. Time has to pass for these (each pause
// is a fraction of the timeout it is measured against, with a wide margin
// either way), so they use pauses, not events.
func TestTimeoutsCountFromTheRightMoment(t *testing.T) {
	t.Run("idle time counts from the last answer", func(t *testing.T) {
		// IdleTimeout 1s; requests 600ms apart: never idle for 1s.
		bothServers(t, func(s *http.Server) { s.IdleTimeout = time.Second }, func(c *client) error {
			start := time.Now()
			for i := range 3 {
				if i > 0 {
					time.Sleep(600 * time.Millisecond)
				}
				if err := c.roundTrip(fmt.Sprintf("/lane/echo/%d", i)); err != nil {
					return fmt.Errorf("request %d, %v after the first (idle 600ms of 1s): %w", i+1, time.Since(start).Round(time.Millisecond), err)
				}
			}
			return nil
		})
	})
	t.Run("WriteTimeout counts from the request", func(t *testing.T) {
		// WriteTimeout 100ms, a handler taking 300ms: net/http's write
		// deadline, set when the request was read, has passed by the time
		// the answer is written, and the connection closes without it.
		bothServers(t, func(s *http.Server) { s.WriteTimeout = 100 * time.Millisecond }, func(c *client) error {
			if err := c.send(req("GET", "/lane/slow")); err != nil {
				return err
			}
			if resp, body, err := c.answer("GET"); err == nil {
				return fmt.Errorf("answered %d %q after WriteTimeout", resp.StatusCode, body)
			}
			return nil
		})
	})
	t.Run("a head that begins before IdleTimeout has ReadHeaderTimeout", func(t *testing.T) {
		// IdleTimeout 300ms, ReadHeaderTimeout 5s: a head whose first
		// line arrives at once and the rest 800ms later is in time.
		bothServers(t, func(s *http.Server) { s.IdleTimeout = 300 * time.Millisecond }, func(c *client) error {
			if err := c.send("GET /lane/echo HTTP/1.1\r\n"); err != nil {
				return err
			}
			time.Sleep(800 * time.Millisecond)
			if err := c.send("Host: example.test\r\n\r\n"); err != nil {
				return err
			}
			if _, _, err := c.answer("GET"); err != nil {
				return fmt.Errorf("head sent in two parts 800ms apart: %w", err)
			}
			return nil
		})
	})
}

// TestShutdown: Shutdown closes idle lane connections at once, lets a
// lane request and a handed-off request in flight finish (each answer
// saying Connection: close), stops Serve with http.ErrServerClosed and
// returns nil once both are done.
func TestShutdown(t *testing.T) {
	entered := make(chan string, 2)
	block := make(chan struct{})
	l := startLane(t, "tcp", nil, entered, block)
	fallbackDown := make(chan struct{})
	var once sync.Once // the cleanup shuts down again
	l.srv.Fallback.RegisterOnShutdown(func() { once.Do(func() { close(fallbackDown) }) })

	idle := dial(t, "tcp", l.addr)
	if err := idle.roundTrip("/lane/echo"); err != nil {
		t.Fatal(err)
	}
	onLane := dial(t, "tcp", l.addr)
	if err := onLane.send(req("GET", "/lane/block")); err != nil {
		t.Fatal(err)
	}
	handedOff := dial(t, "tcp", l.addr)
	if err := handedOff.send(req("POST", "/block", "Content-Length: 2\r\n") + "hi"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-entered:
		case <-time.After(waitBound):
			t.Fatal("the blocking handlers were not entered")
		}
	}

	shutdown := make(chan error, 1)
	go func() { shutdown <- l.srv.Shutdown(context.Background()) }()
	select {
	case err := <-l.served:
		if !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	case <-time.After(waitBound):
		t.Fatal("Serve did not return after Shutdown")
	}
	if err := idle.closed(waitBound); err != nil {
		t.Errorf("idle lane connection during Shutdown: %v", err)
	}
	if c, err := net.DialTimeout("tcp", l.addr, waitBound); err == nil {
		c.Close()
		t.Error("a new connection was accepted during Shutdown")
	}
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned %v with two requests in flight", err)
	case <-fallbackDown: // Fallback is shutting down too: its answer says so
	case <-time.After(waitBound):
		t.Fatal("Fallback was not shut down")
	}

	close(block)
	for name, c := range map[string]*client{"lane": onLane, "handed-off": handedOff} {
		resp, body, err := c.answer("GET")
		if err != nil {
			t.Errorf("%s request in flight: %v", name, err)
			continue
		}
		if resp.StatusCode != 200 || body != "unblocked\n" || !resp.Close {
			t.Errorf("%s request in flight: %d %q close=%v, want 200, its body, Connection: close", name, resp.StatusCode, body, resp.Close)
		}
		if err := c.closed(waitBound); err != nil {
			t.Errorf("%s connection after its answer: %v", name, err)
		}
	}
	select {
	case err := <-shutdown:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(waitBound):
		t.Error("Shutdown did not return once the requests were done")
	}
	if seen := l.h.rec.take(onLane.conn.LocalAddr().String()); len(seen) != 1 || seen[0].via != "lane" {
		t.Errorf("records of the lane request %v: want it served by the lane", seen)
	}
}

// TestShutdownContextExpires: with a request stuck, Shutdown returns its
// context's error when the context ends.
func TestShutdownContextExpires(t *testing.T) {
	entered := make(chan string, 1)
	block := make(chan struct{})
	defer close(block)
	l := startLane(t, "tcp", nil, entered, block)
	c := dial(t, "tcp", l.addr)
	if err := c.send(req("GET", "/lane/block")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(waitBound):
		t.Fatal("the blocking handler was not entered")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.srv.Shutdown(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown returned %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(waitBound):
		t.Fatal("Shutdown did not return when its context ended")
	}
}

// TestServeAfterShutdown: a Server shut down, before serving or after,
// serves no more: Serve returns http.ErrServerClosed and closes the
// listener it was given.
func TestServeAfterShutdown(t *testing.T) {
	for _, servedBefore := range []bool{false, true} {
		t.Run(fmt.Sprintf("served before: %v", servedBefore), func(t *testing.T) {
			s := &fastlane.Server{Fallback: serverConfig(http.NotFoundHandler()), Match: lanePath}
			if servedBefore {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				served := make(chan error, 1)
				go func() { served <- s.Serve(ln) }()
				// Serve has begun once it answers.
				c := dial(t, "tcp", ln.Addr().String())
				if err := c.send(req("GET", "/lane/x")); err != nil {
					t.Fatal(err)
				}
				if resp, _, err := c.answer("GET"); err != nil || resp.StatusCode != 404 {
					t.Fatalf("before Shutdown: %v %v", resp, err)
				}
				if err := s.Shutdown(context.Background()); err != nil {
					t.Fatalf("Shutdown: %v", err)
				}
				if err := <-served; !errors.Is(err, http.ErrServerClosed) {
					t.Fatalf("Serve returned %v", err)
				}
			} else if err := s.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- s.Serve(ln) }()
			select {
			case err := <-done:
				if !errors.Is(err, http.ErrServerClosed) {
					t.Errorf("Serve after Shutdown returned %v, want http.ErrServerClosed", err)
				}
			case <-time.After(waitBound):
				t.Fatal("Serve after Shutdown is serving")
			}
			if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("the listener given to Serve after Shutdown is open (Accept: %v)", err)
			}
		})
	}
}

// TestServeRefusesConnHooks: the lane cannot call Fallback's ConnState,
// ConnContext or BaseContext as net/http would (a connection handed over
// would be seen twice, the second time wrapped), so it refuses to serve
// rather than call them wrong, and closes the listener as Serve does when
// it returns.
func TestServeRefusesConnHooks(t *testing.T) {
	for name, set := range map[string]func(*http.Server){
		"ConnState": func(s *http.Server) { s.ConnState = func(net.Conn, http.ConnState) {} },
		"ConnContext": func(s *http.Server) {
			s.ConnContext = func(ctx context.Context, _ net.Conn) context.Context { return ctx }
		},
		"BaseContext": func(s *http.Server) {
			s.BaseContext = func(net.Listener) context.Context { return context.Background() }
		},
	} {
		t.Run(name, func(t *testing.T) {
			fallback := serverConfig(http.NotFoundHandler())
			set(fallback)
			s := &fastlane.Server{Fallback: fallback, Match: lanePath}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Serve(ln); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("Serve with a %s hook returned %v, want an error naming it", name, err)
			}
			if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("the listener is open after Serve refused (Accept: %v)", err)
			}
		})
	}
}

// TestUnixSocket: the lane serves a Unix-socket listener, and its handler
// sees what net/http's sees there, LocalAddrContextKey's "unix" included.
func TestUnixSocket(t *testing.T) {
	l := startLane(t, "unix", nil, nil, nil)
	plainLn, err := net.Listen("unix", filepath.Join(t.TempDir(), "plain.sock"))
	if err != nil {
		t.Fatal(err)
	}
	plainH := &testHandler{rec: &recorder{}, local: plainLn.Addr().String()}
	plain := serverConfig(plainH)
	plainH.srv = plain
	go plain.Serve(plainLn)
	t.Cleanup(func() { plain.Close() })

	input := []byte(req("GET", "/lane/echo") + req("HEAD", "/lane/echo") + req("GET", "/echo"))
	methods := requestMethods(input)
	var outcomes []outcome
	for _, s := range []struct {
		addr string
		h    *testHandler
	}{{plainLn.Addr().String(), plainH}, {l.addr, l.h}} {
		ex := exchange(t, "unix", s.addr, input, false)
		o := outcome{end: ex.end}
		o.answers, o.tail = parseAnswers(ex.raw, methods)
		// One connection at a time, and a Unix socket's clients have no
		// address to tell them apart: take them all.
		s.h.rec.mu.Lock()
		for _, seen := range s.h.rec.byConn {
			o.seen = append(o.seen, seen...)
		}
		clear(s.h.rec.byConn)
		s.h.rec.mu.Unlock()
		outcomes = append(outcomes, o)
	}
	plainOut, laneOut := outcomes[0], outcomes[1]
	if d := differences(plainOut, laneOut, true); d != "" {
		t.Errorf("over a Unix socket the lane and net/http differ:\n%s", d)
	}
	if got := statuses(laneOut); len(got) != 3 || got[0] != 200 || got[1] != 200 || got[2] != 200 {
		t.Errorf("statuses %v, want 200 three times", got)
	}
	if got := laneServed(laneOut); got != 2 {
		t.Errorf("the lane served %d requests, want 2", got)
	}
	for _, s := range laneOut.seen {
		if !strings.Contains(s.what, "local=unix ours=true") {
			t.Errorf("handler saw %s, want LocalAddrContextKey the listener's unix address", s.what)
		}
	}
}

// TestManyConnections: many connections at once, each sending batches of
// pipelined requests over one kept-alive connection (a few handed over to
// Fallback midway), all get every answer, in order. Under the race
// detector this is what shows the lane's connections share nothing they
// should not.
func TestManyConnections(t *testing.T) {
	const conns, requests, batch = 50, 200, 10
	l := startLane(t, "tcp", nil, nil, nil)
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for g := range conns {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", l.addr, waitBound)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(4 * waitBound))
			br := bufio.NewReader(c)
			for first := 0; first < requests; first += batch {
				var sent strings.Builder
				var paths, methods []string
				for i := first; i < first+batch; i++ {
					method, path := "GET", fmt.Sprintf("/lane/echo/%d/%d", g, i)
					switch {
					case i%7 == 3:
						method = "HEAD"
					case g%10 == 9 && i == requests/2:
						// Handed over: this and the rest are Fallback's.
						method, path = "POST", fmt.Sprintf("/echo/%d/%d", g, i)
					}
					sent.WriteString(req(method, path, "Content-Length: 0\r\n"))
					paths, methods = append(paths, path), append(methods, method)
				}
				if _, err := io.WriteString(c, sent.String()); err != nil {
					errs <- err
					return
				}
				for j, path := range paths {
					resp, err := http.ReadResponse(br, &http.Request{Method: methods[j]})
					if err != nil {
						errs <- fmt.Errorf("connection %d, %s %s: %v", g, methods[j], path, err)
						return
					}
					body, err := io.ReadAll(resp.Body)
					want := fmt.Sprintf("path=%q", path)
					if methods[j] == "HEAD" {
						want = ""
					}
					if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), want) || resp.Header.Get("X-Echo-Path") != fmt.Sprintf("%q", path) {
						errs <- fmt.Errorf("connection %d, %s %s: %d %q %v", g, methods[j], path, resp.StatusCode, body, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	l.h.rec.mu.Lock()
	defer l.h.rec.mu.Unlock()
	total, lane := 0, 0
	for _, seen := range l.h.rec.byConn {
		total += len(seen)
		for _, s := range seen {
			if s.via == "lane" {
				lane++
			}
		}
	}
	handedOver := conns / 10 * (requests / 2)
	if total != conns*requests || lane != total-handedOver {
		t.Errorf("the handler served %d requests, %d on the lane; want %d, %d", total, lane, conns*requests, total-handedOver)
	}
}
