package fastlane_test

// What the lane is for: the cost of a bodiless GET on a kept-alive
// connection. The two benchmarks run the same trivial handler, one behind
// the lane and one on a plain http.Server, and time request-to-answer
// round trips on one connection over loopback:
//
//	go test -run '^$' -bench . ./httpapi/fastlane

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/httpapi/fastlane"
)

// benchHandler answers as a forward-auth decision does: a header or two
// and a short body.
var benchHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Decision", "allow")
	io.WriteString(w, "ok\n")
})

// benchRequest is what a reverse proxy sends for a forward-auth call.
const benchRequest = "GET /lane/auth HTTP/1.1\r\nHost: limiter.internal\r\nX-Forwarded-For: 192.0.2.1\r\nX-Forwarded-Method: GET\r\nX-Forwarded-Uri: /api/resource\r\n\r\n"

func BenchmarkLaneKeepAlive(b *testing.B) {
	benchKeepAlive(b, func(ln net.Listener) func() {
		s := &fastlane.Server{Fallback: &http.Server{Handler: benchHandler}, Match: lanePath}
		go s.Serve(ln)
		return func() { s.Shutdown(context.Background()) }
	})
}

func BenchmarkNetHTTPKeepAlive(b *testing.B) {
	benchKeepAlive(b, func(ln net.Listener) func() {
		s := &http.Server{Handler: benchHandler}
		go s.Serve(ln)
		return func() { s.Close() }
	})
}

// benchKeepAlive times round trips on one kept-alive connection to the
// server serve starts. The client side is kept lean (its request bytes
// made once, the answer read by its Content-Length) so the figures are
// mostly the server's.
func benchKeepAlive(b *testing.B, serve func(net.Listener) (stop func())) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer serve(ln)()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(c)
	request := []byte(benchRequest)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(request); err != nil {
			b.Fatal(err)
		}
		if err := readAnswer(br); err != nil {
			b.Fatal(err)
		}
	}
}

// readAnswer reads one 200 answer with a Content-Length, whole.
func readAnswer(br *bufio.Reader) error {
	length := -1
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if first && !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
			return &answerError{line}
		}
		if len(line) == 2 {
			break
		}
		if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(v))); err != nil {
				return err
			}
		}
	}
	if length < 0 {
		return &answerError{[]byte("no Content-Length")}
	}
	_, err := br.Discard(length)
	return err
}

type answerError struct{ line []byte }

func (e *answerError) Error() string { return "unexpected answer: " + strconv.Quote(string(e.line)) }
