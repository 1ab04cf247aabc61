package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/forwardauth"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

// faLimits are the limits the forward-auth rules below count against:
// per key (string), per address (ip), per IPv6 /48 (ipv6-range), a roomy
// one per session, and the built-in NewOrdersPerAccount (account).
const faLimits = `Keys:
  enum: 120
  id: string
  burst: 3
  count: 3
  period: 1m
PerIP:
  enum: 121
  id: ip
  burst: 2
  count: 2
  period: 1m
Ranges:
  enum: 122
  id: ipv6-range
  burst: 2
  count: 2
  period: 1m
Sessions:
  enum: 123
  id: string
  burst: 100
  count: 100
  period: 1s
NewOrdersPerAccount:
  burst: 5
  count: 5
  period: 1h
`

// faRulesFile trusts the proxies in 10.0.0.0/8; each rule shows one
// behaviour of the endpoint.
const faRulesFile = `trusted_proxies: [10.0.0.0/8]
rules:
  api:
    limits:
      - {limit: Keys, id: header:X-Api-Key}
      - {limit: PerIP, id: client_ip}
  nginx:
    limits: [{limit: Keys, id: header:X-Api-Key}]
    deny_status: 403
  allow:
    limits:
      - {limit: Keys, id: header:X-Api-Key}
      - {limit: Sessions, id: cookie:session}
    missing: allow
  allow-only:
    limits: [{limit: Keys, id: header:X-Api-Key}]
    missing: allow
  fallback:
    limits: [{limit: Keys, id: header:X-Api-Key}]
    missing: client_ip
  ranges:
    limits: [{limit: Ranges, id: client_ip}]
  range-fallback:
    limits: [{limit: Ranges, id: header:X-Range}]
    missing: client_ip
  accounts:
    limits:
      - {limit: Keys, id: header:X-Api-Key}
      - {limit: NewOrdersPerAccount, id: header:X-Account}
  auth:
    limits: [{limit: Keys, id: header:Authorization}]
  pricey:
    limits: [{limit: Keys, id: header:X-Api-Key}]
    cost: 3
`

// faPeer is the address of a caller that is not a trusted proxy (what
// httptest gives a request); faProxy is a trusted proxy's.
const (
	faPeer  = "192.0.2.1:1234"
	faProxy = "10.0.0.1:5555"
)

// faServer is a handler serving the rules of faRulesFile, or others, on a
// memory source (unless given one) and a fake clock.
type faServer struct {
	t     *testing.T
	h     http.Handler
	l     *ratelimits.Limiter
	clock clock.FakeClock
}

type faOptions struct {
	src      ratelimits.Source
	opts     []ratelimits.Option
	tokens   *bearer.Tokens
	rules    func(cfg *ratelimits.Config) func() *forwardauth.Rules // nil: faRulesFile's
	noOption bool                                                   // Options.ForwardAuth left nil
}

func faConfig(t *testing.T) *ratelimits.Config {
	t.Helper()
	cfg, err := configfile.Parse("defaults.yaml", []byte(faLimits), "overrides.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newFAServer(t *testing.T, o faOptions) *faServer {
	t.Helper()
	cfg := faConfig(t)
	if o.src == nil {
		o.src = memory.New(0)
	}
	clk := clock.NewFake()
	clk.Set(start)
	l, err := ratelimits.NewLimiter(cfg, o.src, clk, o.opts...)
	if err != nil {
		t.Fatal(err)
	}
	opts := httpapi.Options{Limiter: l, MaxBatch: 10, Tokens: o.tokens}
	if !o.noOption {
		if o.rules != nil {
			opts.ForwardAuth = o.rules(cfg)
		} else {
			rs, err := configfile.ParseForwardAuth("forward-auth.yaml", []byte(faRulesFile), cfg)
			if err != nil {
				t.Fatal(err)
			}
			opts.ForwardAuth = func() *forwardauth.Rules { return rs }
		}
	}
	return &faServer{t: t, h: httpapi.New(opts), l: l, clock: clk}
}

// ask is a forward-auth call to rule, from peer, with the headers given
// as name, value pairs.
func (s *faServer) ask(method, rule, peer string, hdrs ...string) *httptest.ResponseRecorder {
	s.t.Helper()
	req := httptest.NewRequest(method, "/v1/forward-auth/"+rule, nil)
	req.RemoteAddr = peer
	for i := 0; i+1 < len(hdrs); i += 2 {
		req.Header.Add(hdrs[i], hdrs[i+1])
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	return rec
}

// remaining is what a check of limit and id says is left, without
// spending.
func (s *faServer) remaining(limit, id string) int64 {
	s.t.Helper()
	req := httptest.NewRequest("POST", "/v1/check", strings.NewReader(`{"limit":"`+limit+`","id":"`+id+`","cost":0}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		s.t.Fatalf("check %s/%s: %d %s", limit, id, rec.Code, rec.Body)
	}
	return decode[wire.BatchResponse](s.t, rec).Decisions[0].Remaining
}

func faError(t *testing.T, rec *httptest.ResponseRecorder) wire.ErrorDetail {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	e := decode[wire.ErrorResponse](t, rec)
	if e.Error.Transaction != nil {
		t.Errorf("error %+v names a transaction: a proxy's request has none", e.Error)
	}
	return e.Error
}

// An allowed request is a 200 whose RateLimit headers are those of the
// same spend through POST /v1/spend, and whose body is that spend's with
// the decision of the limit the headers name alone (the rule's default,
// expose: deciding); the rule's limits take their ids from the header and
// the caller's address.
func TestForwardAuthAllowed(t *testing.T) {
	s := newFAServer(t, faOptions{})
	spend := newFAServer(t, faOptions{})
	rec := s.ask("GET", "api", faPeer, "X-Api-Key", "k1")
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	same := spend.spend(`{"transactions":[{"limit":"Keys","id":"k1"},{"limit":"PerIP","id":"192.0.2.1"}]}`)
	if want := decidingOnly(t, same); rec.Body.String() != want {
		t.Errorf("body\n %s\nwant that of /v1/spend with the deciding decision alone\n %s", rec.Body, want)
	}
	for _, h := range []string{"Content-Type", "RateLimit-Policy", "RateLimit", "Retry-After"} {
		if got, want := rec.Header().Get(h), same.Header().Get(h); got != want {
			t.Errorf("%s = %q; /v1/spend says %q", h, got, want)
		}
	}
	got := decode[wire.BatchResponse](t, rec)
	if !got.Allowed || len(got.Decisions) != 1 || got.Decisions[0].ID != "192.0.2.1" || got.Remaining != 1 {
		t.Errorf("answer %+v; want allowed, 192.0.2.1 alone, 1 remaining (PerIP)", got)
	}
	if h := rec.Header().Get("RateLimit-Policy"); h != `"PerIP";q=2;w=60` {
		t.Errorf("RateLimit-Policy = %q; want PerIP's, the deciding limit", h)
	}
	if n := s.remaining("Keys", "k1"); n != 2 {
		t.Errorf("Keys k1 has %d of 3 left; want 2: the limit the body leaves out was spent too", n)
	}
}

// decidingOnly is the body of a /v1/spend answer with only the decision of
// the limit its RateLimit-Policy header names: what a forward-auth rule
// with the default expose answers.
func decidingOnly(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	name, _, _ := strings.Cut(rec.Header().Get("RateLimit-Policy"), ";")
	name, err := strconv.Unquote(name)
	if err != nil {
		t.Fatalf("RateLimit-Policy %q names no limit", rec.Header().Get("RateLimit-Policy"))
	}
	all := decode[wire.BatchResponse](t, rec)
	only := all
	only.Decisions = nil
	for _, d := range all.Decisions {
		if d.Limit == name {
			only.Decisions = append(only.Decisions, d)
		}
	}
	if len(only.Decisions) != 1 {
		t.Fatalf("%d decisions of %s in %s", len(only.Decisions), name, rec.Body)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(only); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// spend is POST /v1/spend with body.
func (s *faServer) spend(body string) *httptest.ResponseRecorder {
	s.t.Helper()
	req := httptest.NewRequest("POST", "/v1/spend", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	return rec
}

// A denied request is the rule's deny status (429 by default, 403 where
// the rule says so for nginx), with the RateLimit headers and Retry-After
// of the same spend through POST /v1/spend, and its body with the
// deciding decision alone.
func TestForwardAuthDenied(t *testing.T) {
	tests := []struct {
		rule   string
		keys   []string // the keys of the allowed calls, then of the denied one
		before []string // /v1/spend bodies that spend what those calls did
		last   string   // the /v1/spend body of the denied call
		status int
	}{
		// PerIP (2 per minute) denies the caller's third call.
		{"api", []string{"k0", "k1", "k2"},
			[]string{`{"transactions":[{"limit":"Keys","id":"k0"},{"limit":"PerIP","id":"192.0.2.1"}]}`,
				`{"transactions":[{"limit":"Keys","id":"k1"},{"limit":"PerIP","id":"192.0.2.1"}]}`},
			`{"transactions":[{"limit":"Keys","id":"k2"},{"limit":"PerIP","id":"192.0.2.1"}]}`, 429},
		// Keys (3 per minute) denies the fourth call with one key.
		{"nginx", []string{"k0", "k0", "k0", "k0"}, []string{`{"limit":"Keys","id":"k0","cost":3}`}, `{"limit":"Keys","id":"k0"}`, 403},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			s := newFAServer(t, faOptions{})
			spend := newFAServer(t, faOptions{})
			var rec *httptest.ResponseRecorder
			for i, key := range tt.keys {
				rec = s.ask("GET", tt.rule, faPeer, "X-Api-Key", key)
				if last := i == len(tt.keys)-1; !last && rec.Code != 200 {
					t.Fatalf("call %d: %d %s; want 200", i, rec.Code, rec.Body)
				}
			}
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			for _, body := range tt.before {
				if r := spend.spend(body); r.Code != 200 {
					t.Fatalf("%s: %d %s", body, r.Code, r.Body)
				}
			}
			same := spend.spend(tt.last)
			if want := decidingOnly(t, same); rec.Body.String() != want {
				t.Errorf("body\n %s\nwant that of /v1/spend with the deciding decision alone\n %s", rec.Body, want)
			}
			for _, h := range []string{"Content-Type", "RateLimit-Policy", "RateLimit", "Retry-After"} {
				if got, want := rec.Header().Get(h), same.Header().Get(h); got != want || got == "" {
					t.Errorf("%s = %q; want %q, as /v1/spend says", h, got, want)
				}
			}
			if got := decode[wire.BatchResponse](t, rec); got.Allowed {
				t.Errorf("answer %+v; want denied", got)
			}
		})
	}
}

// missing: deny answers the deny status with a missing_id error naming
// the source, and spends nothing, not even the limits whose ids were
// found.
func TestForwardAuthMissingDeny(t *testing.T) {
	s := newFAServer(t, faOptions{})
	for _, tt := range []struct {
		rule   string
		status int
	}{{"api", 429}, {"nginx", 403}} {
		rec := s.ask("GET", tt.rule, faPeer, "X-Api-Key", "")
		if rec.Code != tt.status {
			t.Fatalf("%s: status %d, want %d: %s", tt.rule, rec.Code, tt.status, rec.Body)
		}
		e := faError(t, rec)
		if e.Code != "missing_id" || !strings.Contains(e.Message, "header:X-Api-Key") || !strings.Contains(e.Message, "Keys") {
			t.Errorf("%s: error %+v; want missing_id naming header:X-Api-Key and Keys", tt.rule, e)
		}
		if rec.Header().Get("RateLimit") != "" || rec.Header().Get("Retry-After") != "" {
			t.Errorf("%s: RateLimit headers on a request that was not decided: %v", tt.rule, rec.Header())
		}
	}
	if n := s.remaining("PerIP", "192.0.2.1"); n != 2 {
		t.Errorf("PerIP of the caller has %d of 2 left; a refused request spent it", n)
	}
}

// missing: allow leaves the limit out and spends the others; when every
// limit is left out, the answer is allowed with nothing counted and no
// RateLimit headers.
func TestForwardAuthMissingAllow(t *testing.T) {
	s := newFAServer(t, faOptions{})
	rec := s.ask("GET", "allow", faPeer, "X-Api-Key", "k1")
	got := decode[wire.BatchResponse](t, rec)
	if rec.Code != 200 || !got.Allowed || len(got.Decisions) != 1 || got.Decisions[0].Limit != "Keys" {
		t.Fatalf("no session cookie: %d %+v; want Keys alone counted", rec.Code, got)
	}
	rec = s.ask("GET", "allow", faPeer, "X-Api-Key", "k1", "Cookie", "session=s1")
	if got := decode[wire.BatchResponse](t, rec); rec.Code != 200 || len(got.Decisions) != 1 || got.Decisions[0].ID != "k1" {
		t.Fatalf("with the cookie: %d %+v; want Keys alone shown, the deciding limit", rec.Code, got)
	}
	if n := s.remaining("Sessions", "s1"); n != 99 {
		t.Errorf("Sessions s1 has %d of 100 left; want 99, counted", n)
	}

	for _, rule := range []string{"allow", "allow-only"} {
		rec = s.ask("GET", rule, faPeer)
		want := `{"allowed":true,"remaining":` + strconv.FormatInt(math.MaxInt64, 10) + `,"retry_in_ms":0,"reset_in_ms":0,"decisions":[]}` + "\n"
		if rec.Code != 200 || rec.Body.String() != want {
			t.Errorf("%s, nothing to count: %d %q; want 200 %q", rule, rec.Code, rec.Body, want)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", rule, ct)
		}
		for _, h := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
			if v := rec.Header().Get(h); v != "" {
				t.Errorf("%s: %s = %q with nothing counted", rule, h, v)
			}
		}
	}
	if n := s.remaining("Keys", "k1"); n != 1 {
		t.Errorf("Keys k1 has %d left; want 1 (two calls counted it)", n)
	}
}

// missing: client_ip counts the request under the client's address, in
// the limit's own kind; a trusted proxy's X-Forwarded-For names it.
func TestForwardAuthMissingClientIP(t *testing.T) {
	s := newFAServer(t, faOptions{})
	for _, tt := range []struct {
		peer string
		hdrs []string
		id   string
	}{
		{faPeer, nil, "192.0.2.1"},
		{faPeer, []string{"X-Api-Key", "k1"}, "k1"},
		{faProxy, []string{"X-Forwarded-For", "203.0.113.7, 10.0.0.9"}, "203.0.113.7"},
		{"[2001:db8::7]:80", nil, "2001:db8::7"},
	} {
		rec := s.ask("GET", "fallback", tt.peer, tt.hdrs...)
		got := decode[wire.BatchResponse](t, rec)
		if rec.Code != 200 || len(got.Decisions) != 1 || got.Decisions[0].ID != tt.id {
			t.Errorf("peer %s %q: %d %+v; want Keys counted under %s", tt.peer, tt.hdrs, rec.Code, got, tt.id)
		}
	}
}

// missing: client_ip takes the address in the limit's kind: an IPv6
// client of an ipv6-range limit is counted under its /48.
func TestForwardAuthMissingClientIPRange(t *testing.T) {
	s := newFAServer(t, faOptions{})
	for _, tt := range []struct {
		peer string
		hdrs []string
		id   string
	}{
		{"[2001:db8:abcd:12::1]:80", nil, "2001:db8:abcd::/48"},
		{"[2001:db8:abcd:12::1]:80", []string{"X-Range", "2001:DB8:1::/48"}, "2001:db8:1::/48"},
		{faProxy, []string{"X-Forwarded-For", "2001:db8:beef:1::9"}, "2001:db8:beef::/48"},
	} {
		rec := s.ask("GET", "range-fallback", tt.peer, tt.hdrs...)
		got := decode[wire.BatchResponse](t, rec)
		if rec.Code != 200 || len(got.Decisions) != 1 || got.Decisions[0].ID != tt.id {
			t.Errorf("peer %s %q: %d %+v; want Ranges counted under %s", tt.peer, tt.hdrs, rec.Code, got, tt.id)
		}
	}
}

// The client address is the peer, unless the peer is a trusted proxy:
// then X-Forwarded-For says who the client is.
func TestForwardAuthTrustedProxies(t *testing.T) {
	s := newFAServer(t, faOptions{})
	for _, tt := range []struct {
		peer, xff, id string
	}{
		{faProxy, "203.0.113.7", "203.0.113.7"},
		{faProxy, "198.51.100.1, 203.0.113.8, 10.0.0.2", "203.0.113.8"},
		{faProxy, "", "10.0.0.1"},
		{faPeer, "203.0.113.7", "192.0.2.1"},
	} {
		rec := s.ask("GET", "api", tt.peer, "X-Api-Key", "k-"+tt.id, "X-Forwarded-For", tt.xff)
		if rec.Code != 200 || s.remaining("PerIP", tt.id) != 1 {
			t.Errorf("peer %s, X-Forwarded-For %q: %d %s; want PerIP of %s spent", tt.peer, tt.xff, rec.Code, rec.Body, tt.id)
		}
	}
}

// An IPv6 client of an ipv6-range limit is counted under its /48; the
// limit does not apply to an IPv4 client, which it leaves out of the
// batch (nothing counts it: allowed, no decisions).
func TestForwardAuthIPv6Range(t *testing.T) {
	s := newFAServer(t, faOptions{})
	for _, peer := range []string{"[2001:db8:abcd:12::1]:80", "[2001:db8:abcd:ffff::2]:80"} {
		rec := s.ask("GET", "ranges", peer)
		got := decode[wire.BatchResponse](t, rec)
		if rec.Code != 200 || got.Decisions[0].ID != "2001:db8:abcd::/48" {
			t.Fatalf("peer %s: %d %+v; want counted under 2001:db8:abcd::/48", peer, rec.Code, got)
		}
	}
	if rec := s.ask("GET", "ranges", "[2001:db8:abcd:1::3]:80"); rec.Code != 429 {
		t.Errorf("a third address of the /48: %d; want 429, the /48 is spent", rec.Code)
	}
	rec := s.ask("GET", "ranges", faProxy, "X-Forwarded-For", "2001:db8:beef::1")
	if got := decode[wire.BatchResponse](t, rec); rec.Code != 200 || got.Decisions[0].ID != "2001:db8:beef::/48" {
		t.Errorf("through a trusted proxy: %d %+v", rec.Code, got)
	}
	for range 3 {
		rec = s.ask("GET", "ranges", faPeer)
		if got := decode[wire.BatchResponse](t, rec); rec.Code != 200 || !got.Allowed || len(got.Decisions) != 0 {
			t.Fatalf("an IPv4 client: %d %+v; want 200 with the range limit left out", rec.Code, got)
		}
	}
}

// An id the limit's kind refuses is a 400 invalid_id naming the limit,
// and nothing of the batch is spent.
func TestForwardAuthInvalidID(t *testing.T) {
	s := newFAServer(t, faOptions{})
	for _, bad := range []string{"abc", "0", "-1", "1.5"} {
		rec := s.ask("GET", "accounts", faPeer, "X-Api-Key", "k1", "X-Account", bad)
		if e := faError(t, rec); rec.Code != 400 || e.Code != "invalid_id" || !strings.Contains(e.Message, "limit NewOrdersPerAccount") {
			t.Errorf("X-Account %q: %d %+v; want 400 invalid_id naming NewOrdersPerAccount", bad, rec.Code, e)
		}
	}
	if n := s.remaining("Keys", "k1"); n != 3 {
		t.Errorf("Keys k1 has %d of 3 left after refused requests", n)
	}
	rec := s.ask("GET", "accounts", faPeer, "X-Api-Key", "k1", "X-Account", "42")
	if rec.Code != 200 || s.remaining("NewOrdersPerAccount", "42") != 4 {
		t.Errorf("a valid account: %d %s; want NewOrdersPerAccount 42 spent", rec.Code, rec.Body)
	}
	// A header value the string kind refuses (a control character).
	rec = s.ask("GET", "nginx", faPeer, "X-Api-Key", "a\x01b")
	if e := faError(t, rec); rec.Code != 400 || e.Code != "invalid_id" {
		t.Errorf("a control character in the key: %d %+v; want 400 invalid_id", rec.Code, e)
	}
}

// A rule name that no rule has, and a service without rules, are 404s.
func TestForwardAuthUnknownRule(t *testing.T) {
	long := strings.Repeat("x", 500)
	for _, tt := range []struct {
		name string
		o    faOptions
		rule string
	}{
		{"an unknown rule", faOptions{}, "nope"},
		{"a rule in another case", faOptions{}, "API"},
		{"a long unknown rule", faOptions{}, long},
		{"no ForwardAuth option", faOptions{noOption: true}, "api"},
		{"no rules", faOptions{rules: func(*ratelimits.Config) func() *forwardauth.Rules {
			return func() *forwardauth.Rules { return nil }
		}}, "api"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := newFAServer(t, tt.o).ask("GET", tt.rule, faPeer, "X-Api-Key", "k1")
			e := faError(t, rec)
			if rec.Code != 404 || e.Code != "not_found" {
				t.Fatalf("%d %+v; want 404 not_found", rec.Code, e)
			}
			if strings.Contains(e.Message, long) {
				t.Error("the message echoes the whole of a long name")
			}
		})
	}
	// The route is one path segment: more, or none, is no rule.
	s := newFAServer(t, faOptions{})
	for _, path := range []string{"/v1/forward-auth/api/extra", "/v1/forward-auth/", "/v1/forward-auth"} {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("X-Api-Key", "k1")
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		if rec.Code != 404 {
			t.Errorf("%s: %d %s; want 404", path, rec.Code, rec.Body)
		}
	}
}

// Every method asks the same question, the query string and a body are
// ignored, and a HEAD answer has the status and headers but no body.
func TestForwardAuthMethods(t *testing.T) {
	s := newFAServer(t, faOptions{})
	for i, m := range []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"} {
		rec := s.ask(m, "nginx", faPeer, "X-Api-Key", "m"+strconv.Itoa(i))
		if rec.Code != 200 || rec.Header().Get("RateLimit") == "" {
			t.Errorf("%s: %d %s", m, rec.Code, rec.Body)
		}
	}

	// A body that no endpoint would take, and a query that names another
	// key: both ignored.
	req := httptest.NewRequest("POST", "/v1/forward-auth/nginx?X-Api-Key=other&limit=Nope", strings.NewReader(`{"limit":"Nope"`))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("X-Api-Key", "body")
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	if got := decode[wire.BatchResponse](t, rec); rec.Code != 200 || got.Decisions[0].ID != "body" {
		t.Errorf("POST with a body: %d %+v; want 200 counting the header's key", rec.Code, got)
	}

	// Over a real connection, HEAD's body is dropped.
	srv := httptest.NewServer(s.h)
	defer srv.Close()
	hreq, err := http.NewRequestWithContext(t.Context(), "HEAD", srv.URL+"/v1/forward-auth/nginx", nil)
	if err != nil {
		t.Fatal(err)
	}
	hreq.Header.Set("X-Api-Key", "head")
	resp, err := srv.Client().Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("RateLimit") == "" {
		t.Errorf("HEAD: %d, %d body bytes, RateLimit %q; want 200, no body, the headers", resp.StatusCode, len(body), resp.Header.Get("RateLimit"))
	}
	if n := s.remaining("Keys", "head"); n != 2 {
		t.Errorf("HEAD did not count: Keys head has %d of 3 left", n)
	}
}

// With API tokens, the proxy must send one (an admin token works too);
// header:Authorization then reads the client's own, forwarded in
// X-Forwarded-Authorization. Without tokens it reads Authorization.
func TestForwardAuthTokens(t *testing.T) {
	tokens := bearer.NewTokens([][]byte{[]byte("api-token")}, [][]byte{[]byte("admin-token")})
	s := newFAServer(t, faOptions{tokens: tokens})
	for _, tt := range []struct {
		name   string
		hdrs   []string
		status int
		id     string
	}{
		{"no token", []string{"X-Api-Key", "k1"}, 401, ""},
		{"a wrong token", []string{"Authorization", "Bearer nope", "X-Api-Key", "k1"}, 401, ""},
		{"the client's credentials are not a token", []string{"X-Forwarded-Authorization", "Bearer api-token", "X-Api-Key", "k1"}, 401, ""},
	} {
		rec := s.ask("GET", "nginx", faPeer, tt.hdrs...)
		if e := faError(t, rec); rec.Code != tt.status || e.Code != "unauthorized" {
			t.Errorf("%s: %d %+v; want 401 unauthorized", tt.name, rec.Code, e)
		}
	}
	for _, token := range []string{"api-token", "admin-token"} {
		if rec := s.ask("GET", "nginx", faPeer, "Authorization", "Bearer "+token, "X-Api-Key", "k-"+token); rec.Code != 200 {
			t.Errorf("token %s: %d %s", token, rec.Code, rec.Body)
		}
	}
	rec := s.ask("GET", "auth", faPeer, "Authorization", "Bearer api-token", "X-Forwarded-Authorization", "Basic Y2xpZW50")
	if got := decode[wire.BatchResponse](t, rec); rec.Code != 200 || got.Decisions[0].ID != "Basic Y2xpZW50" {
		t.Errorf("header:Authorization with tokens: %d %+v; want the forwarded credentials as the id", rec.Code, got)
	}
	rec = s.ask("GET", "auth", faPeer, "Authorization", "Bearer api-token")
	if e := faError(t, rec); rec.Code != 429 || e.Code != "missing_id" {
		t.Errorf("header:Authorization with tokens, none forwarded: %d %+v; want missing_id, never the limiter's token", rec.Code, e)
	}

	open := newFAServer(t, faOptions{})
	rec = open.ask("GET", "auth", faPeer, "Authorization", "Basic Y2xpZW50", "X-Forwarded-Authorization", "Bearer other")
	if got := decode[wire.BatchResponse](t, rec); rec.Code != 200 || got.Decisions[0].ID != "Basic Y2xpZW50" {
		t.Errorf("header:Authorization without tokens: %d %+v; want Authorization itself", rec.Code, got)
	}
}

// A rule's limits are one atomic spend: when one denies, the other is
// not spent either; and the rule's cost is spent against each.
func TestForwardAuthAtomicAndCost(t *testing.T) {
	s := newFAServer(t, faOptions{})
	// Two calls spend the caller's PerIP (2 per minute).
	s.ask("GET", "api", faPeer, "X-Api-Key", "a")
	s.ask("GET", "api", faPeer, "X-Api-Key", "b")
	rec := s.ask("GET", "api", faPeer, "X-Api-Key", "c")
	if rec.Code != 429 {
		t.Fatalf("third call: %d %s; want 429", rec.Code, rec.Body)
	}
	if n := s.remaining("Keys", "c"); n != 3 {
		t.Errorf("Keys c has %d of 3 left: the denied batch spent it", n)
	}

	rec = s.ask("GET", "pricey", faPeer, "X-Api-Key", "p")
	if got := decode[wire.BatchResponse](t, rec); rec.Code != 200 || got.Decisions[0].Remaining != 0 {
		t.Fatalf("cost 3: %d %+v; want the whole burst spent", rec.Code, got)
	}
	if rec := s.ask("GET", "pricey", faPeer, "X-Api-Key", "p"); rec.Code != 429 {
		t.Errorf("cost 3 again: %d; want 429", rec.Code)
	}
}

// A source that fails is a 503 that says whether the spend may have
// happened; with fail-open the request passes, marked degraded.
func TestForwardAuthSourceFailure(t *testing.T) {
	for _, tt := range []struct {
		src  failingSource
		code string
	}{
		{failingSource{}, "source_outcome_unknown"},
		{failingSource{refused: true}, "source_unavailable"},
	} {
		rec := newFAServer(t, faOptions{src: tt.src}).ask("GET", "api", faPeer, "X-Api-Key", "k1")
		if e := faError(t, rec); rec.Code != 503 || e.Code != tt.code {
			t.Errorf("refused %v: %d %+v; want 503 %s", tt.src.refused, rec.Code, e, tt.code)
		}
	}

	s := newFAServer(t, faOptions{src: failingSource{}, opts: []ratelimits.Option{ratelimits.WithFailOpen()}})
	rec := s.ask("GET", "nginx", faPeer, "X-Api-Key", "k1")
	var got wire.BatchResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 || !got.Allowed || !got.Degraded {
		t.Errorf("fail-open: %d %s; want 200 allowed and degraded", rec.Code, rec.Body)
	}
	// Bad input is still the client's error.
	if rec := s.ask("GET", "accounts", faPeer, "X-Api-Key", "k1", "X-Account", "abc"); rec.Code != 400 {
		t.Errorf("fail-open, an invalid id: %d; want 400", rec.Code)
	}
}

// Between a reload's two swaps, the rules can name a limit the Limiter
// does not have yet: the request is then decided once more, on the rules
// and limits in use by then. A limit that is still unknown on the second
// try is a 400 unknown_limit naming it, after exactly one retry.
func TestForwardAuthUnknownLimitRetry(t *testing.T) {
	entry := func(limit string) []forwardauth.Entry {
		return []forwardauth.Entry{{Limit: limit, Source: forwardauth.Source{Kind: forwardauth.Header, Arg: "X-Api-Key"}}}
	}
	newRules := func(t *testing.T, limit string) *forwardauth.Rules {
		rs, err := forwardauth.New(nil, []forwardauth.Rule{{Name: "api", Limits: entry(limit), Cost: 1, DenyStatus: 429}})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}

	t.Run("the limits arrive", func(t *testing.T) {
		// The reload's new limit files add Added; its rules already name
		// it. The handler reads the rules (new), fails on the limits
		// (old), and on its second read the limits are swapped too.
		withAdded, err := configfile.Parse("defaults.yaml", []byte(faLimits+"Added:\n  enum: 130\n  id: string\n  burst: 7\n  count: 7\n  period: 1m\n"), "overrides.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		rs := newRules(t, "Added")
		var reads atomic.Int32
		var s *faServer
		s = newFAServer(t, faOptions{rules: func(*ratelimits.Config) func() *forwardauth.Rules {
			return func() *forwardauth.Rules {
				if reads.Add(1) == 2 {
					s.l.SetConfig(withAdded)
				}
				return rs
			}
		}})
		rec := s.ask("GET", "api", faPeer, "X-Api-Key", "k1")
		got := decode[wire.BatchResponse](t, rec)
		if rec.Code != 200 || len(got.Decisions) != 1 || got.Decisions[0].Limit != "Added" || got.Decisions[0].Burst != 7 {
			t.Fatalf("%d %+v; want Added decided on the second try", rec.Code, got)
		}
		if n := reads.Load(); n != 2 {
			t.Errorf("the rules were read %d times; want 2", n)
		}
	})

	t.Run("the limit never arrives", func(t *testing.T) {
		rs := newRules(t, "Nope")
		var reads atomic.Int32
		s := newFAServer(t, faOptions{rules: func(*ratelimits.Config) func() *forwardauth.Rules {
			return func() *forwardauth.Rules { reads.Add(1); return rs }
		}})
		rec := s.ask("GET", "api", faPeer, "X-Api-Key", "k1")
		if e := faError(t, rec); rec.Code != 400 || e.Code != "unknown_limit" || !strings.Contains(e.Message, "limit Nope") {
			t.Errorf("%d %+v; want 400 unknown_limit naming Nope", rec.Code, e)
		}
		if n := reads.Load(); n != 2 {
			t.Errorf("the rules were read %d times; want 2 (one retry)", n)
		}
	})
}

// Forward-auth decisions are counted in limiter_decisions_total under
// op="forward_auth", by limit and outcome, and the route is labelled by
// its pattern, never by the rule's name.
func TestForwardAuthMetrics(t *testing.T) {
	s := newFAServer(t, faOptions{})
	s.ask("GET", "nginx", faPeer, "X-Api-Key", "m")
	s.ask("GET", "nginx", faPeer, "X-Api-Key", "m")
	s.ask("GET", "nginx", faPeer, "X-Api-Key", "m")
	s.ask("GET", "nginx", faPeer, "X-Api-Key", "m")
	s.ask("GET", "nginx", faPeer) // missing: nothing decided
	req := httptest.NewRequest("GET", "/metrics", nil)
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	body := rec.Body.String()
	for _, want := range []string{
		`limiter_decisions_total{limit="Keys",op="forward_auth",outcome="allowed"} 3`,
		`limiter_decisions_total{limit="Keys",op="forward_auth",outcome="denied"} 1`,
		`limiter_http_request_duration_seconds_count{method="GET",route="/v1/forward-auth/{rule}",status="200"} 3`,
		`limiter_http_request_duration_seconds_count{method="GET",route="/v1/forward-auth/{rule}",status="403"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, `route="/v1/forward-auth/nginx"`) {
		t.Error("/metrics labels a route by the rule's name")
	}
}

// Rules loaded from a file and rules built with forwardauth.New are
// served alike; the rules are read on every call, so a swap shows at
// once.
func TestForwardAuthRulesSwap(t *testing.T) {
	first, err := forwardauth.New([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, []forwardauth.Rule{{
		Name: "one", Cost: 1, DenyStatus: 403,
		Limits: []forwardauth.Entry{{Limit: "PerIP", Source: forwardauth.Source{Kind: forwardauth.ClientIP}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var current atomic.Pointer[forwardauth.Rules]
	current.Store(first)
	var cfg *ratelimits.Config
	s := newFAServer(t, faOptions{rules: func(c *ratelimits.Config) func() *forwardauth.Rules {
		cfg = c
		return current.Load
	}})
	if rec := s.ask("GET", "one", faProxy, "X-Forwarded-For", "203.0.113.7"); rec.Code != 200 {
		t.Fatalf("rule one: %d %s", rec.Code, rec.Body)
	}
	if n := s.remaining("PerIP", "203.0.113.7"); n != 1 {
		t.Errorf("PerIP 203.0.113.7 has %d of 2 left", n)
	}
	second, err := configfile.ParseForwardAuth("forward-auth.yaml", []byte(faRulesFile), cfg)
	if err != nil {
		t.Fatal(err)
	}
	current.Store(second)
	if rec := s.ask("GET", "one", faProxy); rec.Code != 404 {
		t.Errorf("rule one after the swap: %d; want 404", rec.Code)
	}
	if rec := s.ask("GET", "nginx", faProxy, "X-Api-Key", "k"); rec.Code != 200 {
		t.Errorf("rule nginx after the swap: %d %s", rec.Code, rec.Body)
	}
}

// A call that announces a body and never sends it, as nginx does when it
// drops a request's body but passes its Content-Length on, is answered
// at once, over a real connection, and the connection is then closed
// rather than left waiting for bytes that will never come.
func TestForwardAuthAnsweredWithoutTheAnnouncedBody(t *testing.T) {
	s := newFAServer(t, faOptions{})
	srv := httptest.NewServer(s.h)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = io.WriteString(conn, "POST /v1/forward-auth/allow HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer without the body: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !resp.Close {
		t.Errorf("status %d, close %v; want 200 and the connection closed", resp.StatusCode, resp.Close)
	}
}
