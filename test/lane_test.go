package test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// laneExchange is what one connection sends: raw requests, written at
// once (pipelined), and then the end of the client's side.
type laneExchange struct {
	name     string
	requests []string
	// answers is how many answers must come back, so that two servers
	// that both answer nothing cannot agree.
	answers int
}

// laneAnswer is one answer as the comparison sees it: everything but the
// Date header.
type laneAnswer struct {
	status int
	header http.Header
	body   string
}

// TestForwardAuthLaneAnswersAsNetHTTP sends the same bytes to two
// limiters, one reading forward-auth calls with the HTTP/1.1 lane (the
// default) and one with net/http alone, and demands the same answers,
// in the same order, on every connection: calls the lane serves, calls it
// hands to net/http (a body, a query, HTTP/1.0, an unknown method, a bad
// header) and connections that switch from one to the other. Both run on
// the same fake clock and see the same calls, so their buckets, and so
// their decisions and RateLimit headers, must agree too.
func TestForwardAuthLaneAnswersAsNetHTTP(t *testing.T) {
	t.Parallel()
	lane, _ := startForwardAuth(t, faTrusted)
	plain, _ := startForwardAuth(t, faTrusted, "--forward-auth-lane=false")

	get := func(rule string, headers ...string) string {
		return "GET /v1/forward-auth/" + rule + " HTTP/1.1\r\nHost: limiter.test\r\n" + strings.Join(headers, "") + "\r\n"
	}
	head := func(rule string, headers ...string) string {
		return "HEAD /v1/forward-auth/" + rule + " HTTP/1.1\r\nHost: limiter.test\r\n" + strings.Join(headers, "") + "\r\n"
	}
	const spend = `{"limit":"FAByKey","id":"from-spend","cost":1}`
	exchanges := []laneExchange{
		{"a GET by header", []string{get("header", "X-Api-Key: k1\r\n")}, 1},
		{"a HEAD by header", []string{head("header", "X-Api-Key: k1\r\n")}, 1},
		{"three pipelined calls, the third denied", []string{
			get("tight", "X-Api-Key: t1\r\n"), get("tight", "X-Api-Key: t1\r\n"), get("tight", "X-Api-Key: t1\r\n")}, 3},
		{"the nginx rule's denial, asked with HEAD", []string{head("tight-nginx", "X-Api-Key: t1\r\n")}, 1},
		{"answers without a body (expose: none), allowed and denied, GET and HEAD", []string{
			get("pair-none", "X-Api-Key: n1\r\n", "X-Other: o\r\n"), head("pair-none", "X-Api-Key: n1\r\n", "X-Other: o\r\n"),
			get("pair-none", "X-Api-Key: n1\r\n", "X-Other: o\r\n"), head("pair-none", "X-Api-Key: n1\r\n", "X-Other: o\r\n")}, 4},
		{"a spend with a body between two calls", []string{
			get("ip", "X-Forwarded-For: 203.0.113.9\r\n"),
			"POST /v1/spend HTTP/1.1\r\nHost: limiter.test\r\nContent-Type: application/json\r\nContent-Length: " +
				strconv.Itoa(len(spend)) + "\r\n\r\n" + spend,
			get("header", "X-Api-Key: after-spend\r\n")}, 3},
		{"every id source", []string{
			get("cookie", "Cookie: session=abc; other=1\r\n"),
			get("path", "X-Original-URI: /shop/cart?x=1\r\n"),
			get("host", "X-Forwarded-Host: shop.example, proxy.example\r\n"),
			get("method", "X-Original-Method: DELETE\r\n"),
			get("range", "X-Forwarded-For: 2001:db8:1:2::9, 10.1.1.1\r\n"),
			get("const"),
			get("auth", "Authorization: Bearer client-token\r\n"),
			get("account", "X-Api-Key: k2\r\n", "X-Account: 42\r\n"),
			get("optional-all"),
			get("fallback", "X-Real-IP: 198.51.100.3\r\n")}, 10},
		{"repeated and padded headers", []string{get("header", "X-Api-Key:   padded  \r\n", "X-Api-Key: second\r\n", "Accept: */*\r\n")}, 1},
		{"a missing id and an unknown rule", []string{get("header"), get("no-such-rule", "X-Api-Key: k\r\n")}, 2},
		{"Connection: close ends the connection", []string{get("header", "X-Api-Key: k3\r\n", "Connection: close\r\n"), get("header", "X-Api-Key: never\r\n")}, 1},
		{"a query string", []string{"GET /v1/forward-auth/header?x=1 HTTP/1.1\r\nHost: limiter.test\r\nX-Api-Key: q\r\n\r\n"}, 1},
		{"HTTP/1.0", []string{"GET /v1/forward-auth/header HTTP/1.0\r\nX-Api-Key: old\r\n\r\n"}, 1},
		{"an unknown method", []string{"PROPFIND /v1/forward-auth/header HTTP/1.1\r\nHost: limiter.test\r\nX-Api-Key: dav\r\n\r\n"}, 1},
		{"a body announced and sent", []string{"GET /v1/forward-auth/header HTTP/1.1\r\nHost: limiter.test\r\nX-Api-Key: body\r\nContent-Length: 2\r\n\r\n{}"}, 1},
		{"a control character in a value", []string{get("header", "X-Api-Key: bad\x01value\r\n")}, 1},
		{"no Host", []string{"GET /v1/forward-auth/header HTTP/1.1\r\nX-Api-Key: k\r\n\r\n"}, 1},
		{"a head over 4 KiB", []string{get("header", "X-Api-Key: big\r\n", "X-Padding: "+strings.Repeat("p", 5000)+"\r\n")}, 1},
		{"calls after a handed-over one", []string{get("header", "X-Api-Key: k4\r\n"), "OPTIONS /v1/forward-auth/header HTTP/1.1\r\nHost: limiter.test\r\nX-Api-Key: k4\r\n\r\n", get("header", "X-Api-Key: k4\r\n")}, 3},
	}
	for _, ex := range exchanges {
		got := laneExchangeAnswers(t, lane.URL, ex)
		want := laneExchangeAnswers(t, plain.URL, ex)
		if len(want) != ex.answers {
			t.Errorf("%s: net/http gave %d answers, the test expects %d", ex.name, len(want), ex.answers)
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d answers with the lane, %d without", ex.name, len(got), len(want))
			continue
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.status != w.status || g.body != w.body || !headersEqual(g.header, w.header) {
				t.Errorf("%s, answer %d:\nwith the lane: %d %v %s\nwithout:       %d %v %s", ex.name, i+1, g.status, g.header, g.body, w.status, w.header, w.body)
			}
		}
	}
	// The calls above were decided, not only answered alike: the third
	// pipelined call was denied, and the spend handed over counted.
	ans := laneExchangeAnswers(t, lane.URL, laneExchange{requests: []string{get("tight", "X-Api-Key: t1\r\n")}})
	if len(ans) != 1 || ans[0].status != http.StatusTooManyRequests || ans[0].header.Get("Retry-After") == "" {
		t.Errorf("a fifth call of tight: %+v, want 429 with Retry-After", ans)
	}
}

// laneExchangeAnswers sends ex on a new connection to base, closes the
// sending side, and reads every answer until the server closes.
func laneExchangeAnswers(t *testing.T, base string, ex laneExchange) []laneAnswer {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, strings.Join(ex.requests, "")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("%s: %v (read %q)", ex.name, err, raw)
	}
	// The method of each request decides whether its answer has a body.
	var methods []string
	for _, r := range ex.requests {
		m, _, _ := strings.Cut(r, " ")
		methods = append(methods, m)
	}
	var answers []laneAnswer
	br := bufio.NewReader(bytes.NewReader(raw))
	for i := 0; ; i++ {
		if _, err := br.Peek(1); err == io.EOF {
			return answers
		}
		method := http.MethodGet
		if i < len(methods) {
			method = methods[i]
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%s: answer %d: %v (all: %q)", ex.name, i+1, err, raw)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: answer %d body: %v", ex.name, i+1, err)
		}
		resp.Header.Del("Date")
		answers = append(answers, laneAnswer{status: resp.StatusCode, header: resp.Header, body: string(body)})
	}
}

// headersEqual compares two headers, names and values in order.
func headersEqual(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
