package fastlane_test

// The lane's promise is that a client cannot tell it from net/http: for
// any bytes sent, the same answers in the same order, the connection
// closed at the same point, and the handler shown the same request. The
// tests here hold it to that by sending the same bytes to two servers on
// loopback, a plain http.Server and a fastlane.Server in front of an
// identically configured one, and comparing everything that comes back,
// byte for byte apart from Date.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/httpapi/fastlane"
)

// lanePath is the Match of every lane server in these tests: the paths
// under /lane/ are the lane's, the same paths without the prefix are
// Fallback's alone.
func lanePath(p string) bool { return strings.HasPrefix(p, "/lane/") }

// exchangeTimeout bounds one exchange: a server that neither answers nor
// closes fails the test that sent the bytes instead of hanging the suite.
const exchangeTimeout = 10 * time.Second

// seen is what the test handler saw of one request. what is compared
// between the two servers; via (which ResponseWriter served it) is not,
// since it is the one thing meant to differ, but it lets a case say how
// many of its requests the lane itself must have served, so a lane that
// handed everything to net/http could not pass for a correct one.
type seen struct {
	via  string // "lane" or "net/http"
	what string
}

// recorder collects what the handler saw, per client connection (keyed
// by the client's address as the server sees it), so one pair of
// servers can serve every case of a test, and every input of a fuzzer,
// without the cases' records mixing.
type recorder struct {
	mu     sync.Mutex
	byConn map[string][]seen
}

func (r *recorder) add(remote string, s seen) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byConn == nil {
		r.byConn = map[string][]seen{}
	}
	r.byConn[remote] = append(r.byConn[remote], s)
}

// take returns and forgets the records of the connection from remote.
// The exchange has read the server's close by then, and a server closes
// a connection only after its last handler has returned, so nothing is
// added for that connection afterwards.
func (r *recorder) take(remote string) []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.byConn[remote]
	delete(r.byConn, remote)
	return s
}

// testHandler is the handler both servers of a pair run (one instance
// each). It records what it is shown, then answers according to the path,
// with or without the /lane prefix. Its answers stay under the 2 KiB
// net/http buffers before it switches to chunked encoding, a framing
// difference the lane makes on purpose.
type testHandler struct {
	rec   *recorder
	local string       // the address LocalAddrContextKey must hold
	srv   *http.Server // the server ServerContextKey must hold
	// fuzzSafe turns the routes whose outcome a fuzzer cannot rely on
	// (a panic's close races with the bytes still arriving) and those
	// whose mismatches the table tests already report into plain echoes.
	fuzzSafe bool
	// block, when set, is waited on by /block (lifecycle tests), after
	// entered is sent on.
	entered chan<- string
	block   <-chan struct{}
}

func (h *testHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, bodyErr := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	via := "net/http"
	if strings.Contains(fmt.Sprintf("%T", w), "fastlane") {
		via = "lane"
	}
	h.rec.add(r.RemoteAddr, seen{via: via, what: h.describe(r, body, bodyErr)})

	route := strings.TrimPrefix(r.URL.Path, "/lane")
	if h.fuzzSafe {
		switch route {
		case "/panic", "/abort", "/cl-long", "/cl-short", "/close-token", "/trailer", "/crlf-value", "/slow",
			"/te-chunked", "/te-identity", "/conn-multi", "/nil-write":
			route = "/echo"
		}
	}
	hdr := w.Header()
	switch {
	case strings.HasPrefix(route, "/status/"):
		code, err := strconv.Atoi(strings.TrimPrefix(route, "/status/"))
		if err != nil || code < 200 || code > 999 {
			// 1xx answers are a difference the lane makes on purpose.
			code = http.StatusBadRequest
		}
		hdr.Set("Content-Type", "text/plain; charset=utf-8")
		hdr.Set("X-Status", strconv.Itoa(code))
		w.WriteHeader(code)
		io.WriteString(w, "status body\n") // refused for 204 and 304
	case route == "/nobody":
		hdr.Set("X-Nobody", "1")
	case route == "/sniff":
		io.WriteString(w, "<html><body>sniffed</body></html>")
	case route == "/late-header":
		hdr.Set("X-Early", "1")
		w.WriteHeader(http.StatusAccepted)
		hdr.Set("X-Late", "1") // after WriteHeader: never sent
		io.WriteString(w, "late\n")
	case route == "/close":
		hdr.Set("Connection", "close")
		io.WriteString(w, "closing\n")
	case route == "/close-token":
		// Not exactly "close": net/http does not close for it.
		hdr.Set("Connection", "Close")
		io.WriteString(w, "closing?\n")
	case route == "/headers":
		hdr.Add("X-Multi", "one")
		hdr.Add("X-Multi", "two")
		hdr["Bad Name"] = []string{"dropped"} // not a token: never sent
		hdr.Set("X-Padded", " \t padded \t ")
		hdr.Set("X-Empty", "")
		hdr.Set("Content-Encoding", "identity") // no sniffing
		io.WriteString(w, "<html>not sniffed</html>")
	case route == "/no-type":
		hdr["Content-Type"] = nil // present but empty: no sniffing
		io.WriteString(w, "<html>not sniffed</html>")
	case route == "/crlf-value":
		hdr.Set("X-Crlf", "a\r\n")
		hdr.Set("X-Lead", "\nb")
		io.WriteString(w, "crlf\n")
	case route == "/head-length":
		hdr.Set("Content-Length", "7")
		if r.Method != http.MethodHead {
			io.WriteString(w, "7 bytes")
		}
	case route == "/cl-long":
		// Declares fewer bytes than it writes.
		hdr.Set("Content-Length", "2")
		io.WriteString(w, "hello")
	case route == "/cl-short":
		// Declares more bytes than it writes.
		hdr.Set("Content-Length", "10")
		io.WriteString(w, "hello")
	case route == "/trailer":
		hdr.Set("Trailer", "X-Sum")
		io.WriteString(w, "with a trailer\n")
		hdr.Set("X-Sum", "42")
	case route == "/big":
		// Over net/http's 2 KiB buffer in one write: chunked for GET, no
		// length for HEAD.
		io.WriteString(w, strings.Repeat("big body\n", 600))
	case route == "/big-writes":
		// Over the buffer in writes that straddle it: the chunks end
		// where net/http's buffer fills.
		for i := range 7 {
			io.WriteString(w, strings.Repeat(strconv.Itoa(i), 700))
		}
	case route == "/te-chunked":
		hdr.Set("Transfer-Encoding", "chunked")
		io.WriteString(w, "chunked on request\n")
	case route == "/te-identity":
		// No length, no chunks: the answer ends with the connection.
		hdr.Set("Transfer-Encoding", "identity")
		io.WriteString(w, "identity\n")
	case route == "/conn-multi":
		hdr["Connection"] = []string{"keep-alive", "close"}
		io.WriteString(w, "two values\n")
	case route == "/nil-write":
		w.WriteHeader(http.StatusNoContent)
		if n, err := w.Write(nil); n != 0 || err != nil {
			hdr.Set("X-Never", "sent") // after WriteHeader: shows up nowhere
			panic(fmt.Sprintf("Write(nil) after 204: %d, %v", n, err))
		}
	case route == "/panic":
		panic("fastlane test: a handler panics")
	case route == "/abort":
		panic(http.ErrAbortHandler)
	case route == "/slow":
		// Slower than the WriteTimeout of TestTimeoutsCountFromTheRightMoment.
		time.Sleep(300 * time.Millisecond)
		io.WriteString(w, "slow\n")
	case route == "/block" && h.block != nil:
		h.entered <- r.URL.Path
		<-h.block
		io.WriteString(w, "unblocked\n")
	default: // "/echo" and anything else
		hdr.Set("Content-Type", "text/plain; charset=utf-8")
		hdr.Set("X-Echo-Method", r.Method)
		hdr.Set("X-Echo-Path", strconv.Quote(trunc(r.URL.Path)))
		fmt.Fprintf(w, "method=%s path=%q host=%q close=%v header=%08x body=%q\n",
			r.Method, trunc(r.URL.Path), trunc(r.Host), r.Close, hashHeader(r.Header), trunc(string(body)))
	}
}

// describe is the record of a request: every field of *http.Request a
// handler may read, in a form that compares by value (no pointers).
func (h *testHandler) describe(r *http.Request, body []byte, bodyErr error) string {
	u := r.URL
	url := fmt.Sprintf("scheme=%q opaque=%q user=%q host=%q path=%q rawpath=%q forcequery=%v rawquery=%q fragment=%q omithost=%v",
		u.Scheme, u.Opaque, u.User.String(), u.Host, u.Path, u.RawPath, u.ForceQuery, u.RawQuery, u.Fragment, u.OmitHost)
	local := "none"
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		local = fmt.Sprintf("%s ours=%v", la.Network(), la.String() == h.local)
	}
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	return fmt.Sprintf("%s uri=%q url{%s} proto=%s %d.%d host=%q header=%s close=%v contentlength=%d te=%q trailer=%v nobody=%v body=%q bodyerr=%v tls=%v local=%s server=%v basectx=%v connctx=%v",
		r.Method, r.RequestURI, url, r.Proto, r.ProtoMajor, r.ProtoMinor, r.Host, sortedHeader(r.Header),
		r.Close, r.ContentLength, r.TransferEncoding, r.Trailer, r.Body == http.NoBody, body, bodyErr,
		r.TLS != nil, local, srv != nil && srv == h.srv,
		r.Context().Value(ctxKey("base")), r.Context().Value(ctxKey("conn")))
}

// sortedHeader is h as one string, in name order.
func sortedHeader(h http.Header) string {
	var b strings.Builder
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range h {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "%s=%q;", k, h[k])
	}
	return b.String()
}

// hashHeader stands for the request's header in the echoed body, which
// must stay short whatever the request carries.
func hashHeader(h http.Header) uint32 {
	f := fnv.New32a()
	io.WriteString(f, sortedHeader(h))
	return f.Sum32()
}

// trunc keeps echoed strings short (see testHandler).
func trunc(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// pair is a plain http.Server and a fastlane.Server in front of an
// identically configured one, each with its own testHandler.
type pair struct {
	plainAddr, laneAddr string
	plainH, laneH       *testHandler
}

// serverConfig is the configuration both servers of a pair share: header
// timeouts long enough never to fire in an exchange (every exchange
// half-closes), and a MaxHeaderBytes small enough for a test to exceed.
func serverConfig(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       5 * time.Second,
		MaxHeaderBytes:    8 << 10,
		ErrorLog:          log.New(io.Discard, "", 0), // the panics are deliberate
	}
}

// ctxKey marks the values a server's BaseContext and ConnContext put in
// the context, so the handler can say whether it got them.
type ctxKey string

// startPair starts a pair on loopback and stops it when tb ends. The
// configure functions, if any, change both servers' configuration alike.
func startPair(tb testing.TB, fuzzSafe bool, configure ...func(*http.Server)) *pair {
	tb.Helper()
	plainLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	laneLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &pair{
		plainAddr: plainLn.Addr().String(),
		laneAddr:  laneLn.Addr().String(),
		plainH:    &testHandler{rec: &recorder{}, local: plainLn.Addr().String(), fuzzSafe: fuzzSafe},
		laneH:     &testHandler{rec: &recorder{}, local: laneLn.Addr().String(), fuzzSafe: fuzzSafe},
	}
	plain := serverConfig(p.plainH)
	p.plainH.srv = plain
	lane := &fastlane.Server{Fallback: serverConfig(p.laneH), Match: lanePath}
	p.laneH.srv = lane.Fallback
	for _, f := range configure {
		f(plain)
		f(lane.Fallback)
	}
	go plain.Serve(plainLn)
	go lane.Serve(laneLn)
	tb.Cleanup(func() {
		plain.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := lane.Shutdown(ctx); err != nil {
			tb.Errorf("lane Shutdown: %v", err)
		}
	})
	return p
}

// exchanged is what one connection got back for the bytes sent on it.
type exchanged struct {
	raw   []byte
	end   string // "EOF" or "reset" (the server closed with bytes unread)
	local string // the client's address: the recorder's key
}

// exchange sends input on a new connection to addr (all at once, or one
// byte per write), half-closes it so the server sees the end of the
// request stream instead of waiting for more, and reads until the server
// closes. It reads while it writes, so neither side can fill the other's
// buffers and stall.
func exchange(tb testing.TB, network, addr string, input []byte, bytewise bool) exchanged {
	tb.Helper()
	c, err := net.DialTimeout(network, addr, exchangeTimeout)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(exchangeTimeout))
	type result struct {
		raw []byte
		err error
	}
	read := make(chan result, 1)
	go func() {
		raw, err := io.ReadAll(c)
		read <- result{raw, err}
	}()
	if bytewise {
		for i := range input {
			if _, err := c.Write(input[i : i+1]); err != nil {
				break // the server closed: what it answered is still read
			}
		}
	} else {
		c.Write(input) // an error means the server closed early, as above
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	res := <-read
	ex := exchanged{raw: res.raw, end: "EOF", local: c.LocalAddr().String()}
	switch {
	case res.err == nil:
	case errors.Is(res.err, syscall.ECONNRESET):
		ex.end = "reset"
	default:
		tb.Fatalf("reading the answers from %s: %v (after %q)", addr, res.err, res.raw)
	}
	return ex
}

// answer is one parsed response.
type answer struct {
	status int
	header http.Header // as http.ReadResponse leaves it: without Connection: close
	close  bool        // the answer said Connection: close
	body   string
	// norm is the response as sent, with the Date line removed and the
	// header lines sorted: what two servers must agree on byte for byte.
	norm string
}

// outcome is everything one server did with one input.
type outcome struct {
	answers []answer
	// tail is what followed the last whole answer: a response that did
	// not parse or was cut short (empty when every byte parsed).
	tail string
	end  string
	seen []seen
}

// requestMethods is the method of each request in input, as far as it
// parses, so that the answers to HEAD requests are parsed as bodiless.
// It guides the parsing only: both servers' bytes are parsed alike.
func requestMethods(input []byte) []string {
	br := bufio.NewReader(bytes.NewReader(input))
	var methods []string
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return methods
		}
		methods = append(methods, req.Method)
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return methods
		}
	}
}

// parseAnswers splits raw into responses.
func parseAnswers(raw []byte, methods []string) (answers []answer, tail string) {
	src := bytes.NewReader(raw)
	br := bufio.NewReader(src)
	consumed := func() int { return len(raw) - src.Len() - br.Buffered() }
	for next := 0; consumed() < len(raw); {
		start := consumed()
		method := http.MethodGet
		if next < len(methods) {
			method = methods[next]
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return answers, fmt.Sprintf("%q (%v)", raw[start:], err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return answers, fmt.Sprintf("%q (body: %v)", raw[start:], err)
		}
		if resp.StatusCode >= 200 {
			next++ // a 1xx answer comes before the answer to the same request
		}
		answers = append(answers, answer{
			status: resp.StatusCode,
			header: resp.Header,
			close:  resp.Close,
			body:   string(body),
			norm:   normalize(raw[start:consumed()]),
		})
	}
	return answers, ""
}

// normalize removes the Date line of a response as sent and sorts its
// header lines: the order of fields is not part of the promise, and the
// lane writes its own Connection: close after the handler's fields where
// net/http writes a handler's among them.
func normalize(resp []byte) string {
	head, body, _ := bytes.Cut(resp, []byte("\r\n\r\n"))
	lines := strings.Split(string(head), "\r\n")
	fields := slices.DeleteFunc(lines[1:], func(l string) bool { return strings.HasPrefix(l, "Date: ") })
	slices.Sort(fields)
	return lines[0] + "\r\n" + strings.Join(fields, "\r\n") + "\r\n\r\n" + string(body)
}

// run sends input to both servers and returns what each did.
func (p *pair) run(tb testing.TB, input []byte, bytewise bool) (plain, lane outcome) {
	tb.Helper()
	methods := requestMethods(input)
	one := func(addr string, h *testHandler) outcome {
		ex := exchange(tb, "tcp", addr, input, bytewise)
		o := outcome{end: ex.end, seen: h.rec.take(ex.local)}
		o.answers, o.tail = parseAnswers(ex.raw, methods)
		return o
	}
	return one(p.plainAddr, p.plainH), one(p.laneAddr, p.laneH)
}

// differences describes how lane's outcome differs from plain's, or is
// empty. withEnd compares how the connection ended too, which is
// deterministic only when the server cannot have bytes unread when it
// closes, so only some callers ask for it.
func differences(plain, lane outcome, withEnd bool) string {
	var d []string
	n := max(len(plain.answers), len(lane.answers))
	for i := range n {
		var pa, la string
		if i < len(plain.answers) {
			pa = plain.answers[i].norm
		}
		if i < len(lane.answers) {
			la = lane.answers[i].norm
		}
		if pa != la {
			d = append(d, fmt.Sprintf("answer %d:\n  net/http: %q\n  lane:     %q", i+1, pa, la))
		}
	}
	if plain.tail != lane.tail {
		d = append(d, fmt.Sprintf("after the answers:\n  net/http: %s\n  lane:     %s", plain.tail, lane.tail))
	}
	if withEnd && plain.end != lane.end {
		d = append(d, fmt.Sprintf("connection ended: net/http %s, lane %s", plain.end, lane.end))
	}
	n = max(len(plain.seen), len(lane.seen))
	for i := range n {
		var ps, ls string
		if i < len(plain.seen) {
			ps = plain.seen[i].what
		}
		if i < len(lane.seen) {
			ls = lane.seen[i].what
		}
		if ps != ls {
			d = append(d, fmt.Sprintf("request %d as the handler saw it:\n  net/http: %s\n  lane:     %s", i+1, ps, ls))
		}
	}
	return strings.Join(d, "\n")
}

// laneServed counts the requests the lane served itself.
func laneServed(o outcome) int {
	n := 0
	for _, s := range o.seen {
		if s.via == "lane" {
			n++
		}
	}
	return n
}

// statuses lists the answers' status codes.
func statuses(o outcome) []int {
	var s []int
	for _, a := range o.answers {
		s = append(s, a.status)
	}
	return s
}

// A diffCase is bytes to send, how many of its requests the lane must
// serve itself (the rest are Fallback's), and, for some, what the answers
// must be: two servers broken alike would agree with each other.
type diffCase struct {
	name  string
	input string
	lane  int
	// withEnd: the connection must end alike (EOF or reset), for inputs
	// where that does not depend on timing.
	withEnd bool
	check   func(t *testing.T, o outcome)
}

// req builds a request head with a Host header and the given extra
// lines, each ended by CRLF.
func req(method, target string, lines ...string) string {
	return method + " " + target + " HTTP/1.1\r\nHost: example.test\r\n" + strings.Join(lines, "") + "\r\n"
}

// wantStatuses is a check that the answers have exactly these statuses.
func wantStatuses(want ...int) func(*testing.T, outcome) {
	return func(t *testing.T, o outcome) {
		t.Helper()
		if got := statuses(o); !slices.Equal(got, want) {
			t.Errorf("statuses %v, want %v (tail %s)", got, want, o.tail)
		}
	}
}

var diffCases = []diffCase{
	{
		name:  "a body over net/http's buffer, GET and HEAD",
		input: req("GET", "/lane/big") + req("HEAD", "/lane/big") + req("GET", "/lane/big-writes") + req("HEAD", "/lane/big-writes"),
		lane:  4, withEnd: true, check: wantStatuses(200, 200, 200, 200),
	},
	{
		name:  "a handler's Transfer-Encoding",
		input: req("GET", "/lane/te-chunked") + req("HEAD", "/lane/te-chunked") + req("GET", "/lane/te-identity") + req("GET", "/lane/echo"),
		lane:  3, withEnd: true, // identity ends the connection
	},
	{
		name:  "a handler's Connection of two values, the request's close",
		input: req("GET", "/lane/conn-multi") + req("GET", "/lane/conn-multi", "Connection: close\r\n"),
		lane:  2, withEnd: true,
	},
	{
		name:  "a handler writing nothing after a 204",
		input: req("GET", "/lane/nil-write") + req("GET", "/lane/echo"),
		lane:  2, withEnd: true, check: wantStatuses(204, 200),
	},
	{
		// 65 heads of 63 bytes fill the lane's 4 KiB buffer but for one
		// byte, which the first byte of the next request takes: a read
		// then holds a full buffer with a stub of a head at its end.
		name:  "pipelined heads that fill the buffer, a stub at its end",
		input: strings.Repeat(req("GET", "/lane/echo", "X: 12345678901\r\n"), 65) + req("GET", "/lane/echo"),
		lane:  66, withEnd: true,
		check: func(t *testing.T, o outcome) {
			if len(o.answers) != 66 {
				t.Errorf("%d answers, want 66", len(o.answers))
			}
		},
	},
	{
		name:  "single GET",
		input: req("GET", "/lane/echo", "User-Agent: t\r\n", "Accept: */*\r\n"),
		lane:  1, withEnd: true,
		check: func(t *testing.T, o outcome) {
			wantStatuses(200)(t, o)
			if len(o.answers) == 1 && !strings.Contains(o.answers[0].body, `method=GET path="/lane/echo" host="example.test"`) {
				t.Errorf("body %q does not echo the request", o.answers[0].body)
			}
		},
	},
	{
		name:  "single HEAD",
		input: req("HEAD", "/lane/echo"),
		lane:  1, withEnd: true,
		check: func(t *testing.T, o outcome) {
			wantStatuses(200)(t, o)
			if len(o.answers) == 1 && (o.answers[0].body != "" || o.answers[0].header.Get("Content-Length") == "") {
				t.Errorf("HEAD answer: body %q, Content-Length %q; want no body, a length", o.answers[0].body, o.answers[0].header.Get("Content-Length"))
			}
		},
	},
	{
		name:  "three pipelined lane requests",
		input: req("GET", "/lane/echo/1") + req("GET", "/lane/echo/2") + req("GET", "/lane/echo/3"),
		lane:  3, withEnd: true,
		check: func(t *testing.T, o outcome) {
			wantStatuses(200, 200, 200)(t, o)
			for i, a := range o.answers {
				if want := fmt.Sprintf(`path="/lane/echo/%d"`, i+1); !strings.Contains(a.body, want) {
					t.Errorf("answer %d is %q, want the one for %s", i+1, a.body, want)
				}
			}
		},
	},
	{
		name: "every lane variant pipelined",
		input: req("GET", "/lane/status/204") + req("GET", "/lane/status/304") + req("GET", "/lane/nobody") +
			req("GET", "/lane/sniff") + req("GET", "/lane/late-header") + req("GET", "/lane/headers") +
			req("GET", "/lane/no-type") + req("GET", "/lane/status/599") + req("HEAD", "/lane/head-length") +
			req("HEAD", "/lane/nobody") + req("HEAD", "/lane/sniff") + req("GET", "/lane/head-length") +
			req("GET", "/lane/status/0") + req("GET", "/lane/close") + req("GET", "/lane/echo"),
		lane: 14, withEnd: true,
		check: func(t *testing.T, o outcome) {
			wantStatuses(204, 304, 200, 200, 202, 200, 200, 599, 200, 200, 200, 200, 400, 200)(t, o)
			if len(o.answers) != 14 {
				return
			}
			if ct := o.answers[3].header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("/sniff Content-Type %q, want the sniffed text/html", ct)
			}
			if h := o.answers[4].header; h.Get("X-Late") != "" || h.Get("X-Early") != "1" {
				t.Errorf("/late-header sent %v: want X-Early only", h)
			}
			if !o.answers[13].close {
				t.Errorf("/close answer without Connection: close: %v", o.answers[13].header)
			}
		},
	},
	{
		name:  "the same variants without the lane prefix",
		input: req("GET", "/status/204") + req("GET", "/status/304") + req("GET", "/nobody") + req("GET", "/sniff") + req("GET", "/late-header") + req("GET", "/headers") + req("HEAD", "/head-length") + req("GET", "/close"),
		lane:  0, withEnd: true,
		check: wantStatuses(204, 304, 200, 200, 202, 200, 200, 200),
	},
	{
		name:  "handoff in the middle of a connection",
		input: req("GET", "/lane/echo/1") + req("POST", "/echo/2", "Content-Length: 5\r\n") + "hello" + req("GET", "/lane/echo/3"),
		// The third is Fallback's too: from the POST on, the connection is.
		lane: 1, withEnd: true,
		check: func(t *testing.T, o outcome) {
			wantStatuses(200, 200, 200)(t, o)
			for i, a := range o.answers {
				if want := fmt.Sprintf("/echo/%d", i+1); !strings.Contains(a.body, want) {
					t.Errorf("answer %d is %q, want the one for %s", i+1, a.body, want)
				}
			}
			if len(o.answers) == 3 && !strings.Contains(o.answers[1].body, `body="hello"`) {
				t.Errorf("the POST's handler did not get its body: %q", o.answers[1].body)
			}
		},
	},
	{
		name:  "non-lane request first",
		input: req("GET", "/echo") + req("GET", "/lane/echo"),
		lane:  0, withEnd: true, check: wantStatuses(200, 200),
	},
	{
		name:  "HTTP/1.0 without keep-alive",
		input: "GET /lane/echo HTTP/1.0\r\n\r\nGET /lane/echo HTTP/1.0\r\n\r\n",
		lane:  0, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "HTTP/1.0 with keep-alive",
		input: "GET /lane/echo HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /lane/echo HTTP/1.0\r\n\r\n",
		lane:  0, withEnd: true, check: wantStatuses(200, 200),
	},
	{
		name:  "Connection: close ends the connection",
		input: req("GET", "/lane/echo", "Connection: close\r\n") + req("GET", "/lane/echo"),
		lane:  1, withEnd: true,
		check: func(t *testing.T, o outcome) {
			wantStatuses(200)(t, o)
			if len(o.answers) == 1 && !o.answers[0].close {
				t.Errorf("answer without Connection: close: %v", o.answers[0].header)
			}
		},
	},
	{
		name:  "Connection: close in upper case",
		input: req("GET", "/lane/echo", "connection: CLOSE\r\n") + req("GET", "/lane/echo"),
		lane:  1, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "Connection: keep-alive",
		input: req("GET", "/lane/echo", "Connection: keep-alive\r\n") + req("GET", "/lane/echo", "Connection: Keep-Alive\r\n"),
		lane:  2, withEnd: true, check: wantStatuses(200, 200),
	},
	{
		name:  "Connection: upgrade",
		input: req("GET", "/lane/echo", "Connection: upgrade\r\n", "Upgrade: websocket\r\n"),
		lane:  0, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "Connection with two tokens",
		input: req("GET", "/lane/echo", "Connection: keep-alive, close\r\n") + req("GET", "/lane/echo"),
		lane:  0, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "duplicate headers",
		input: req("GET", "/lane/echo", "X-Dup: a\r\n", "x-dup: b\r\n", "X-DUP: c\r\n"),
		lane:  1, withEnd: true,
		check: func(t *testing.T, o outcome) {
			wantStatuses(200)(t, o)
			if len(o.seen) == 1 && !strings.Contains(o.seen[0].what, `X-Dup=["a" "b" "c"]`) {
				t.Errorf("handler saw %s, want X-Dup a, b, c", o.seen[0].what)
			}
		},
	},
	{
		name:  "odd whitespace around a value",
		input: req("GET", "/lane/echo", "X-Pad: \t  padded \t value\t \t\r\n", "X-Tight:tight\r\n"),
		lane:  1, withEnd: true,
		check: func(t *testing.T, o outcome) {
			if len(o.seen) == 1 && !strings.Contains(o.seen[0].what, `X-Pad=["padded \t value"];X-Tight=["tight"]`) {
				t.Errorf("handler saw %s", o.seen[0].what)
			}
		},
	},
	{
		name:  "obs-fold continuation line",
		input: req("GET", "/lane/echo", "X-Fold: a\r\n", "  b\r\n"),
		lane:  0, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "obs-fold continuation line with a colon",
		input: req("GET", "/lane/echo", "X-Fold: a\r\n", "\tb: c\r\n"),
		lane:  0, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "bare LF line ends",
		input: "GET /lane/echo HTTP/1.1\nHost: example.test\n\n",
		lane:  0, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "bare LF after a lane request",
		input: req("GET", "/lane/echo") + "GET /lane/echo HTTP/1.1\r\nHost: example.test\n\r\n",
		lane:  1, withEnd: true, check: wantStatuses(200, 200),
	},
	{
		name:  "missing Host",
		input: "GET /lane/echo HTTP/1.1\r\nAccept: */*\r\n\r\n",
		lane:  0, withEnd: true, check: wantStatuses(400),
	},
	{
		name:  "two Host headers",
		input: req("GET", "/lane/echo", "Host: other.test\r\n"),
		lane:  0, withEnd: true, check: wantStatuses(400),
	},
	{
		name:  "Host with a port and an underscore",
		input: "GET /lane/echo HTTP/1.1\r\nHost: exa_mple.test:8080\r\n\r\n",
		lane:  1, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "Host with characters the lane leaves to net/http",
		input: "GET /lane/echo HTTP/1.1\r\nHost: ex%41mple!test\r\n\r\n",
		lane:  0, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "Host with a space",
		input: "GET /lane/echo HTTP/1.1\r\nHost: exa mple\r\n\r\n",
		lane:  0, withEnd: true, check: wantStatuses(400),
	},
	{
		name:  "Host with a non-ASCII byte",
		input: "GET /lane/echo HTTP/1.1\r\nHost: caf\xc3\xa9.test\r\n\r\n",
		lane:  0, withEnd: true, check: wantStatuses(400),
	},
	{
		name:  "empty Host",
		input: "GET /lane/echo HTTP/1.1\r\nHost:\r\n\r\n",
		lane:  0, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "Content-Length: 0",
		input: req("GET", "/lane/echo", "Content-Length: 0\r\n") + req("HEAD", "/lane/echo", "Content-Length: 0\r\n"),
		lane:  2, withEnd: true, check: wantStatuses(200, 200),
	},
	{
		name:  "Content-Length: 5 with a body",
		input: req("GET", "/lane/echo", "Content-Length: 5\r\n") + "hello" + req("GET", "/lane/echo"),
		lane:  0, withEnd: true,
		check: func(t *testing.T, o outcome) {
			wantStatuses(200, 200)(t, o)
			if len(o.answers) == 2 && !strings.Contains(o.answers[0].body, `body="hello"`) {
				t.Errorf("the GET's body was not read: %q", o.answers[0].body)
			}
		},
	},
	{
		name:  "Transfer-Encoding: chunked",
		input: req("GET", "/lane/echo", "Transfer-Encoding: chunked\r\n") + "5\r\nhello\r\n0\r\n\r\n" + req("GET", "/lane/echo"),
		lane:  0, withEnd: true, check: wantStatuses(200, 200),
	},
	{
		name:  "Expect: 100-continue without a body",
		input: req("GET", "/lane/echo", "Expect: 100-continue\r\n") + req("GET", "/lane/echo"),
		lane:  0, withEnd: true, check: wantStatuses(200, 200),
	},
	{
		name:  "Expect with another expectation",
		input: req("GET", "/lane/echo", "Expect: teapot\r\n"),
		lane:  0, withEnd: true, check: wantStatuses(417),
	},
	{
		name:  "Expect: 100-continue with a body",
		input: req("POST", "/lane/echo", "Expect: 100-continue\r\n", "Content-Length: 2\r\n") + "hi",
		lane:  0, withEnd: true, check: wantStatuses(100, 200),
	},
	{
		name:  "Pragma: no-cache",
		input: req("GET", "/lane/echo", "Pragma: no-cache\r\n"),
		lane:  0, withEnd: true,
		check: func(t *testing.T, o outcome) {
			if len(o.seen) == 1 && !strings.Contains(o.seen[0].what, `Cache-Control=["no-cache"]`) {
				t.Errorf("handler saw %s, want the Cache-Control net/http adds", o.seen[0].what)
			}
		},
	},
	{
		name:  "query string",
		input: req("GET", "/lane/echo?x=1&y=%20"),
		lane:  0, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "percent-escaped path",
		input: req("GET", "/lane/ec%68o"),
		lane:  0, withEnd: true,
		check: func(t *testing.T, o outcome) {
			if len(o.seen) == 1 && !strings.Contains(o.seen[0].what, `path="/lane/echo"`) {
				t.Errorf("handler saw %s, want the decoded path", o.seen[0].what)
			}
		},
	},
	{
		name:  "dot segments and other path bytes",
		input: req("GET", "/lane/../lane/./echo") + req("GET", "/lane//echo~_-.") + req("GET", "/lane/echo/"),
		lane:  3, withEnd: true, check: wantStatuses(200, 200, 200),
	},
	{
		name:  "absolute-form target",
		input: req("GET", "http://example.test/lane/echo"),
		lane:  0, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "asterisk target",
		input: req("GET", "*"),
		lane:  0, withEnd: true,
	},
	{
		name:  "lower-case method",
		input: req("get", "/lane/echo"),
		lane:  0, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "unknown method",
		input: req("FROB", "/lane/echo"),
		lane:  0, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "head over the lane's 4 KiB",
		input: req("GET", "/lane/echo", "X-Big: "+strings.Repeat("b", 6000)+"\r\n") + req("GET", "/lane/echo"),
		lane:  0, withEnd: true, check: wantStatuses(200, 200),
	},
	{
		name:  "lane request, then one over the lane's 4 KiB",
		input: req("GET", "/lane/echo") + req("GET", "/lane/echo", "X-Big: "+strings.Repeat("b", 4100)+"\r\n"),
		lane:  1, withEnd: true, check: wantStatuses(200, 200),
	},
	{
		name:  "head over Fallback's MaxHeaderBytes",
		input: req("GET", "/lane/echo", "X-Huge: "+strings.Repeat("h", 20000)+"\r\n"),
		lane:  0, withEnd: true, check: wantStatuses(431),
	},
	{
		name:  "many short headers",
		input: req("GET", "/lane/echo", strings.Repeat("X-Many: m\r\n", 80)),
		lane:  0, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "invalid header name characters",
		input: req("GET", "/lane/echo", "X(Bad): 1\r\n"),
		lane:  0, withEnd: true, check: wantStatuses(400),
	},
	{
		name:  "space before the colon",
		input: req("GET", "/lane/echo", "X-Space : 1\r\n"),
		lane:  0, withEnd: true, check: wantStatuses(400),
	},
	{
		name:  "line without a colon",
		input: req("GET", "/lane/echo", "NoColon\r\n"),
		lane:  0, withEnd: true, check: wantStatuses(400),
	},
	{
		name:  "control character in a value",
		input: req("GET", "/lane/echo", "X-Ctl: a\x01b\r\n"),
		lane:  0, withEnd: true, check: wantStatuses(400),
	},
	{
		name:  "CR inside a value",
		input: req("GET", "/lane/echo", "X-Cr: a\rb\r\n"),
		lane:  0, withEnd: true, check: wantStatuses(400),
	},
	{
		name:  "DEL in a value",
		input: req("GET", "/lane/echo", "X-Del: a\x7f\r\n") + req("GET", "/lane/echo"),
		lane:  0, withEnd: true, check: wantStatuses(400),
	},
	{
		name:  "obs-text in a value",
		input: req("GET", "/lane/echo", "X-Obs: caf\xc3\xa9\xff\r\n"),
		lane:  1, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "empty value",
		input: req("GET", "/lane/echo", "X-Empty:\r\n", "X-Blank:   \r\n"),
		lane:  1, withEnd: true,
		check: func(t *testing.T, o outcome) {
			if len(o.seen) == 1 && !strings.Contains(o.seen[0].what, `X-Blank=[""];X-Empty=[""]`) {
				t.Errorf("handler saw %s", o.seen[0].what)
			}
		},
	},
	{
		name:  "request line with extra spaces",
		input: "GET  /lane/echo HTTP/1.1\r\nHost: a\r\n\r\nGET /lane/echo  HTTP/1.1\r\nHost: a\r\n\r\n",
		lane:  0, withEnd: true, check: wantStatuses(400),
	},
	{
		name:  "request line with a trailing space",
		input: "GET /lane/echo HTTP/1.1 \r\nHost: a\r\n\r\n",
		lane:  0, withEnd: true, check: wantStatuses(400),
	},
	{
		name:  "HTTP/1.2 and HTTP/2.0",
		input: "GET /lane/echo HTTP/1.2\r\nHost: a\r\n\r\nGET /lane/echo HTTP/2.0\r\nHost: a\r\n\r\n",
		lane:  0, withEnd: true,
	},
	{
		name:  "empty line before the request",
		input: "\r\n" + req("GET", "/lane/echo"),
		lane:  0, withEnd: true, check: wantStatuses(400),
	},
	{
		name:  "incomplete head, then EOF",
		input: "GET /lane/echo HTTP/1.1\r\nHost: example.test\r\n",
		lane:  0, withEnd: true, check: wantStatuses(400),
	},
	{
		name:  "lane request, then an incomplete head and EOF",
		input: req("GET", "/lane/echo") + "GET /lane/echo HTTP/1.1\r\nHo",
		lane:  1, withEnd: true, check: wantStatuses(200, 400),
	},
	{
		name:  "lane request, then three bytes and EOF",
		input: req("GET", "/lane/echo") + "GET",
		lane:  1, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "nothing at all",
		input: "",
		lane:  0, withEnd: true, check: wantStatuses(),
	},
	{
		name:  "garbage",
		input: "\x00\x01\xff\xfe garbage \x80\r\n\r\n",
		lane:  0, withEnd: true, check: wantStatuses(400),
	},
	{
		name:  "a panicking handler after a pipelined answer",
		input: req("GET", "/lane/echo/1") + req("GET", "/lane/panic") + req("GET", "/lane/echo/3"),
		lane:  2, withEnd: true,
		check: func(t *testing.T, o outcome) {
			wantStatuses(200)(t, o)
			if o.tail != "" {
				t.Errorf("after the answers: %s", o.tail)
			}
		},
	},
	{
		name:  "a panicking handler on the lane alone",
		input: req("GET", "/lane/panic") + req("GET", "/lane/echo"),
		lane:  1, withEnd: true, check: wantStatuses(),
	},
	{
		name:  "an aborting handler after a pipelined answer",
		input: req("GET", "/lane/echo/1") + req("GET", "/lane/abort") + req("GET", "/lane/echo/3"),
		lane:  2, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "panicking and aborting handlers on Fallback",
		input: req("GET", "/echo") + req("GET", "/panic") + req("GET", "/echo"),
		lane:  0, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "a handler's header value with line breaks",
		input: req("GET", "/lane/crlf-value"),
		lane:  1, withEnd: true, check: wantStatuses(200),
	},
	{
		name:  "a handler writing more than its Content-Length",
		input: req("GET", "/lane/cl-long") + req("GET", "/lane/echo"),
		lane:  1, withEnd: true, // the connection ends after the first answer
	},
	{
		name:  "a handler writing less than its Content-Length",
		input: req("GET", "/lane/cl-short") + req("GET", "/lane/echo"),
		lane:  1, withEnd: true, // the connection ends after the first answer
	},
	{
		name:  "a handler's Connection header other than close",
		input: req("GET", "/lane/close-token") + req("GET", "/lane/echo"),
		lane:  2, withEnd: true,
	},
}

// TestLaneMatchesNetHTTP sends every case to both servers, all at once
// and one byte per write (which makes the lane read its heads in pieces),
// and compares what came back.
func TestLaneMatchesNetHTTP(t *testing.T) {
	p := startPair(t, false)
	for _, c := range diffCases {
		for _, bytewise := range []bool{false, true} {
			mode := "whole"
			if bytewise {
				mode = "bytewise"
			}
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				plain, lane := p.run(t, []byte(c.input), bytewise)
				if d := differences(plain, lane, c.withEnd && !bytewise); d != "" {
					t.Errorf("for %q the lane and net/http differ:\n%s", c.input, d)
				}
				// The lane's count stands only where the lane served what
				// it should and no more; a mismatch above says why not.
				if got := laneServed(lane); got != c.lane {
					t.Errorf("the lane served %d of the requests itself, want %d", got, c.lane)
				}
				if got := laneServed(plain); got != 0 {
					t.Errorf("net/http's records say the lane served %d requests", got)
				}
				if c.check != nil {
					c.check(t, plain)
					c.check(t, lane)
				}
			})
		}
	}
}

// FuzzLaneMatchesNetHTTP is the same comparison on arbitrary bytes, sent
// at once or one byte per write. Its handler leaves out the routes whose
// outcome is timing-dependent or already reported by the table above.
func FuzzLaneMatchesNetHTTP(f *testing.F) {
	for _, c := range diffCases {
		f.Add([]byte(c.input), false)
	}
	f.Add([]byte(req("GET", "/lane/echo")+req("HEAD", "/lane/sniff")), true)
	p := startPair(f, true)
	f.Fuzz(func(t *testing.T, input []byte, bytewise bool) {
		if len(input) > 4<<10 {
			// Past what either server reads at once, a server that answers
			// 400 and closes may leave input unread, and the kernel then
			// resets the connection: answers the client has not read yet
			// are lost, on either side, at random (seen with net/http
			// alone). The longer cases are in TestLaneMatchesNetHTTP, where
			// no server closes with input unread.
			t.Skip("longer than both servers read at once")
		}
		plain, lane := p.run(t, input, bytewise)
		// Up to 4 KiB sent at once, both servers read it all in their first
		// read, so neither closes with bytes unread: the end is
		// deterministic.
		if d := differences(plain, lane, !bytewise); d != "" {
			t.Errorf("for %q (bytewise %v) the lane and net/http differ:\n%s", input, bytewise, d)
		}
	})
}

// TestLaneHonoursFallbackSettings compares the two servers under settings
// of Fallback's that net/http acts on for every request it serves: the
// lane serves requests on Fallback's behalf, so it must act on them too.
func TestLaneHonoursFallbackSettings(t *testing.T) {
	twoLaneRequests := req("GET", "/lane/echo/1") + req("GET", "/lane/echo/2")
	for _, c := range []struct {
		name      string
		configure func(*http.Server)
		input     string
		check     func(*testing.T, outcome)
	}{
		{
			name:      "no Handler: DefaultServeMux serves",
			configure: func(s *http.Server) { s.Handler = nil },
			input:     twoLaneRequests,
			check:     wantStatuses(404, 404),
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startPair(t, false, c.configure)
			plain, lane := p.run(t, []byte(c.input), false)
			if d := differences(plain, lane, true); d != "" {
				t.Errorf("for %q the lane and net/http differ:\n%s", c.input, d)
			}
			c.check(t, plain)
			c.check(t, lane)
		})
	}
}
