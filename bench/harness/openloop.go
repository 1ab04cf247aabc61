package main

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// openLoopResult is what the open loop measured, in ms.
type openLoopResult struct {
	p50, p99         float64   // from when each request was due (queueing counted)
	sentP50, sentP99 float64   // from when each request was actually sent
	lateP99          float64   // how late the sender itself was
	achieved         float64   // req/s
	redisCPU         []float64 // µs per request, each of the row's redis-servers (measureOpenLoop)
	redisScripts     float64   // script calls per request, all of them
	// failed counts the answers that were not 200 (a source timing out on
	// a host too busy to serve it, say): counted in the row's errors, and
	// in its latencies like any other answer.
	failed int64
}

// openLoopConns is how many keep-alive connections the open loop keeps.
// At 5,000 req/s and sub-millisecond answers a few are busy at once; the
// rest are there so that a slow answer never makes the sender wait.
const openLoopConns = 64

// openConn is one keep-alive connection of the open loop, with the times
// of the request it has outstanding (at most one: no pipelining).
type openConn struct {
	conn       net.Conn
	due, sent  atomic.Int64 // unix ns of the outstanding request
	readerDone chan error
}

// sample is one answered request.
type sample struct{ fromDue, fromSend, late time.Duration }

// call is the request the open loop sends as its i-th of 10,000 distinct
// ones: a path and a JSON body.
type call func(i int) (path, body string)

// spendCall spends 1 of limit for one of 10,000 ids.
func spendCall(limit string) call {
	return func(i int) (string, string) {
		return "/v1/spend", fmt.Sprintf(`{"limit":%q,"id":"key-%d","cost":1}`, limit, i+1)
	}
}

// checkRateCall is bench/check_rate.lua's request: one hit of one of
// 10,000 addresses on counter, 100 per second over 10 s.
func checkRateCall(counter string) call {
	return func(i int) (string, string) {
		return "/v1/erl/check_rate", fmt.Sprintf(`{"entry":"198.18.%d.%d","ratecounter":%q,"delta":1,"window":10,"limit":100,"penaltybox":%q,"ttl":"1m"}`,
			i/256, i%256, counter, counter)
	}
}

// request is the open loop's i-th of 10,000 distinct requests, written
// whole (request line, header and body) for the server at host.
type request func(i int, host string) []byte

// post is the request of c: a POST of its path and JSON body.
func (c call) post() request {
	return func(i int, host string) []byte {
		path, body := c(i)
		return fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, host, len(body), body)
	}
}

// openLoop sends rate requests per second for d, each on a free keep-alive
// connection, and measures latency from when each request was due, so a
// slow server cannot hide its queue by slowing the sender down.
//
// The sender is built so that its own lateness stays small next to what
// it measures on a machine it shares with the server:
//   - one pacing goroutine, locked to its OS thread, sleeps with
//     nanosleep(2). Go's timers sleep in epoll_wait, whose timeout is
//     whole milliseconds: a 200 µs wait can become more than a
//     millisecond when the process is otherwise idle.
//   - requests are prepared bytes written straight to the socket, and
//     answers are read by one goroutine per connection with a minimal
//     HTTP/1.1 parser: no net/http client, no allocation per request to
//     speak of, so the sender's garbage collector stays out of the tail.
//
// The time from actual sending and the sender's own lateness are reported
// beside, so that what belongs to the sender can be told from what belongs
// to the server.
func openLoop(url string, req request, rate int, d time.Duration) (openLoopResult, error) {
	addr := strings.TrimPrefix(url, "http://")
	requests := make([][]byte, 10000)
	for i := range requests {
		requests[i] = req(i, addr)
	}
	free := make(chan *openConn, openLoopConns)
	var mu sync.Mutex
	samples := make([]sample, 0, int(float64(rate)*d.Seconds())+1)
	var failures atomic.Int64
	var conns []*openConn
	defer func() {
		for _, c := range conns {
			c.conn.Close()
			<-c.readerDone
		}
	}()
	for range openLoopConns {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return openLoopResult{}, err
		}
		c := &openConn{conn: conn, readerDone: make(chan error, 1)}
		conns = append(conns, c)
		free <- c
		go func() {
			r := bufio.NewReaderSize(conn, 4096)
			for {
				status, err := readResponse(r)
				if err != nil {
					c.readerDone <- err
					return
				}
				done := time.Now().UnixNano()
				due, sent := c.due.Load(), c.sent.Load()
				if status != 200 {
					failures.Add(1)
				}
				mu.Lock()
				samples = append(samples, sample{time.Duration(done - due), time.Duration(done - sent), time.Duration(sent - due)})
				mu.Unlock()
				free <- c
			}
		}()
	}

	interval := time.Second / time.Duration(rate)
	n := int(d / interval)
	rng := rand.New(rand.NewPCG(uint64(rate), 1))
	start := time.Now().Add(20 * time.Millisecond)
	sendErr := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for k := range n {
			due := start.Add(time.Duration(k) * interval)
			if wait := time.Until(due); wait > 0 {
				ts := syscall.NsecToTimespec(int64(wait))
				for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
				}
			}
			c := <-free // waits only if every connection is busy: counted from due
			c.due.Store(due.UnixNano())
			c.sent.Store(time.Now().UnixNano())
			if _, err := c.conn.Write(requests[rng.IntN(len(requests))]); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- nil
	}()
	if err := <-sendErr; err != nil {
		return openLoopResult{}, err
	}
	// Wait for the last answers: every connection back in the free list.
	deadline := time.After(10 * time.Second)
	for range openLoopConns {
		select {
		case <-free:
		case <-deadline:
			return openLoopResult{}, errors.New("open loop: answers still missing after 10 s")
		}
	}
	elapsed := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	if len(samples) != n {
		return openLoopResult{}, fmt.Errorf("open loop: %d answers for %d requests", len(samples), n)
	}
	pct := func(get func(sample) time.Duration, p float64) float64 {
		xs := make([]time.Duration, len(samples))
		for i, s := range samples {
			xs[i] = get(s)
		}
		slices.Sort(xs)
		return float64(xs[int(p*float64(len(xs)-1))]) / 1e6
	}
	fromDue := func(s sample) time.Duration { return s.fromDue }
	fromSend := func(s sample) time.Duration { return s.fromSend }
	return openLoopResult{
		failed: failures.Load(),
		p50:    pct(fromDue, 0.50), p99: pct(fromDue, 0.99),
		sentP50: pct(fromSend, 0.50), sentP99: pct(fromSend, 0.99),
		lateP99:  pct(func(s sample) time.Duration { return s.late }, 0.99),
		achieved: float64(len(samples)) / elapsed.Seconds(),
	}, nil
}

// readResponse reads one HTTP/1.1 response with a Content-Length body, the
// only kind the servers measured here send, and returns its status code.
func readResponse(r *bufio.Reader) (int, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !strings.HasPrefix(string(line), "HTTP/1.") {
		return 0, fmt.Errorf("open loop: bad status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("open loop: bad status line %q", line)
	}
	length := -1
	for {
		h, err := r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(h) <= 2 { // "\r\n": end of the header
			break
		}
		if len(h) > 15 && strings.EqualFold(string(h[:15]), "Content-Length:") {
			length, err = strconv.Atoi(strings.TrimSpace(string(h[15:])))
			if err != nil {
				return 0, fmt.Errorf("open loop: bad Content-Length %q", h)
			}
		}
	}
	if length < 0 {
		return 0, errors.New("open loop: answer without Content-Length")
	}
	if _, err := r.Discard(length); err != nil {
		return 0, err
	}
	return status, nil
}
