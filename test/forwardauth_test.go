package test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/internal/redistest"
)

// forwardAuth calls /v1/forward-auth/{rule} as a proxy would, with the
// given headers ("Name: value" each; a Host header sets the request's
// host) and, when token is not empty, the limiter's API token.
func forwardAuth(t *testing.T, p *limiterProc, method, rule, token string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, p.URL+"/v1/forward-auth/"+rule, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			t.Fatalf("header %q: want Name: value", h)
		}
		value = strings.TrimSpace(value)
		if strings.EqualFold(name, "Host") {
			req.Host = value
			continue
		}
		req.Header.Add(name, value)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return sendRequest(t, req)
}

// sendRequest sends req and reads the whole answer.
func sendRequest(t *testing.T, req *http.Request) response {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// checkRemaining reads one bucket with a cost-0 check, which spends
// nothing, presenting token when it is not empty.
func checkRemaining(t *testing.T, p *limiterProc, token, limit, id string) int64 {
	t.Helper()
	body, err := json.Marshal(map[string]any{"limit": limit, "id": id, "cost": 0})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("POST", p.URL+"/v1/check", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	r := sendRequest(t, req)
	var a wire.BatchResponse
	if r.Status != 200 || json.Unmarshal(r.Body, &a) != nil || len(a.Decisions) != 1 {
		t.Fatalf("check %s %q: %d %s", limit, id, r.Status, r.Body)
	}
	return a.Decisions[0].Remaining
}

// advanceWithToken moves p's fake clock, presenting token when it is not
// empty (a limiter with tokens asks for one on /debug/clock too).
func advanceWithToken(t *testing.T, p *limiterProc, token string, d time.Duration) {
	t.Helper()
	req, err := http.NewRequest("POST", p.URL+"/debug/clock", strings.NewReader(fmt.Sprintf(`{"advance":%q}`, d.String())))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if r := sendRequest(t, req); r.Status != 200 {
		t.Fatalf("advance the clock: %d %s", r.Status, r.Body)
	}
}

// faDefaults are the limits of the forward-auth tests: generous ones that
// record which id each source gave, and FATight, which denies the third
// request of a minute.
const faDefaults = `FAByIP:
  enum: 130
  id: ip
  burst: 1000
  count: 1000
  period: 1h
FAByRange:
  enum: 131
  id: ipv6-range
  burst: 1000
  count: 1000
  period: 1h
FAByKey:
  enum: 132
  id: string
  burst: 1000
  count: 1000
  period: 1h
FAByCookie:
  enum: 133
  id: string
  burst: 1000
  count: 1000
  period: 1h
FAByMethod:
  enum: 134
  id: string
  burst: 1000
  count: 1000
  period: 1h
FAByPath:
  enum: 135
  id: string
  burst: 1000
  count: 1000
  period: 1h
FAByHost:
  enum: 136
  id: string
  burst: 1000
  count: 1000
  period: 1h
FAByConst:
  enum: 137
  id: string
  burst: 1000
  count: 1000
  period: 1h
FAByAuth:
  enum: 138
  id: string
  burst: 1000
  count: 1000
  period: 1h
FAByAccount:
  enum: 139
  id: account
  burst: 1000
  count: 1000
  period: 1h
FATight:
  enum: 140
  id: string
  burst: 2
  count: 2
  period: 1m
`

// faRules are the rules of the forward-auth tests, with %s the trusted
// proxies: one rule per id source, then rules for denials, what answers
// show, costs, batches and each missing action.
const faRules = `trusted_proxies: [%s]
rules:
  ip:
    limits: [{limit: FAByIP, id: client_ip}]
  range:
    limits: [{limit: FAByRange, id: client_ip}]
  header:
    limits: [{limit: FAByKey, id: "header:X-Api-Key"}]
  cookie:
    limits: [{limit: FAByCookie, id: "cookie:session"}]
  method:
    limits: [{limit: FAByMethod, id: method}]
  path:
    limits: [{limit: FAByPath, id: path}]
  host:
    limits: [{limit: FAByHost, id: host}]
  const:
    limits: [{limit: FAByConst, id: "const:everyone"}]
  auth:
    limits: [{limit: FAByAuth, id: "header:Authorization"}]
  tight:
    limits: [{limit: FATight, id: "header:X-Api-Key"}]
  tight-nginx:
    limits: [{limit: FATight, id: "header:X-Api-Key"}]
    deny_status: 403
  pair:
    limits:
      - {limit: FATight, id: "header:X-Api-Key"}
      - {limit: FAByKey, id: "header:X-Other"}
  pair-none:
    limits:
      - {limit: FATight, id: "header:X-Api-Key"}
      - {limit: FAByKey, id: "header:X-Other"}
    expose: none
  pair-all:
    limits:
      - {limit: FATight, id: "header:X-Api-Key"}
      - {limit: FAByKey, id: "header:X-Other"}
    expose: all
  costly:
    limits: [{limit: FATight, id: "const:costly"}]
    cost: 2
  account:
    limits:
      - {limit: FAByKey, id: "header:X-Api-Key"}
      - {limit: FAByAccount, id: "header:X-Account"}
  optional:
    limits:
      - {limit: FAByKey, id: "header:X-Api-Key"}
      - {limit: FAByIP, id: client_ip}
    missing: allow
  optional-all:
    limits:
      - {limit: FAByKey, id: "header:X-Api-Key"}
      - {limit: FAByCookie, id: "cookie:session"}
    missing: allow
  fallback:
    limits: [{limit: FAByKey, id: "header:X-Api-Key"}]
    missing: client_ip
`

// faTrusted are the proxies the trusting limiter believes: the test
// client's address, and a network for proxies further out.
const faTrusted = "127.0.0.1/32, 10.0.0.0/8"

// startForwardAuth starts a limiter on faDefaults and faRules trusting
// trusted, on the fake clock, with args added; it returns the limiter and
// the rules file's path.
func startForwardAuth(t *testing.T, trusted string, args ...string) (*limiterProc, string) {
	t.Helper()
	dir := t.TempDir()
	rules := writeFile(t, dir, "forward-auth.yaml", fmt.Sprintf(faRules, trusted))
	p := startLimiter(t, procOptions{
		Env: map[string]string{
			"LIMITER_DEFAULTS":        writeFile(t, dir, "defaults.yaml", faDefaults),
			"LIMITER_OVERRIDES":       writeFile(t, dir, "no-overrides.yaml", "[]\n"),
			"LIMITER_FAKECLOCK":       fakeClockStart,
			"LIMITER_RELOAD_INTERVAL": "0",
		},
		Args: append([]string{"--forward-auth", rules}, args...),
	})
	return p, rules
}

// decoded is a forward-auth answer whose body is a decision.
func decoded(t *testing.T, r response) wire.BatchResponse {
	t.Helper()
	var a wire.BatchResponse
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatalf("answer %d %q: not a decision: %v", r.Status, r.Body, err)
	}
	return a
}

// apiError is a forward-auth answer whose body is an error, with its
// status and code checked.
func apiError(t *testing.T, r response, status int, code string) wire.ErrorDetail {
	t.Helper()
	var e wire.ErrorResponse
	if r.Status != status || json.Unmarshal(r.Body, &e) != nil || e.Error.Code != code {
		t.Fatalf("answer %d %q, want %d with error code %s", r.Status, r.Body, status, code)
	}
	return e.Error
}

// The id each source gives, from a proxy the limiter trusts and from any
// other address (the same headers, sent to a limiter that does not trust
// the test's address). Forwarding headers count only from a trusted
// proxy; the request's own headers, cookies, method and host always do.
func TestForwardAuthIDSources(t *testing.T) {
	t.Parallel()
	const missing = "(missing)"
	rows := []struct {
		name, rule, method string
		headers            []string
		trusted, untrusted string
	}{
		{"client_ip: the peer", "ip", "GET", nil, "127.0.0.1", "127.0.0.1"},
		{"client_ip: X-Forwarded-For", "ip", "GET", []string{"X-Forwarded-For: 203.0.113.1"}, "203.0.113.1", "127.0.0.1"},
		{"client_ip: trusted proxies are skipped from the right", "ip", "GET",
			[]string{"X-Forwarded-For: 198.51.100.1, 203.0.113.2, 10.1.2.3"}, "203.0.113.2", "127.0.0.1"},
		{"client_ip: every hop trusted: the leftmost", "ip", "GET", []string{"X-Forwarded-For: 10.0.0.1, 10.0.0.2"}, "10.0.0.1", "127.0.0.1"},
		{"client_ip: every X-Forwarded-For line, in order", "ip", "GET",
			[]string{"X-Forwarded-For: 203.0.113.3", "X-Forwarded-For: 10.0.0.7"}, "203.0.113.3", "127.0.0.1"},
		{"client_ip: a port is cut off", "ip", "GET", []string{"X-Forwarded-For: 203.0.113.4:4711"}, "203.0.113.4", "127.0.0.1"},
		{"client_ip: an IPv6 address with a port", "ip", "GET", []string{"X-Forwarded-For: [2001:db8::6]:443"}, "2001:db8::6", "127.0.0.1"},
		{"client_ip: IPv4 written as IPv6", "ip", "GET", []string{"X-Forwarded-For: ::ffff:203.0.113.7"}, "203.0.113.7", "127.0.0.1"},
		{"client_ip: an entry that is no address ends the walk; X-Real-IP then", "ip", "GET",
			[]string{"X-Forwarded-For: 203.0.113.8, unknown", "X-Real-IP: 192.0.2.8"}, "192.0.2.8", "127.0.0.1"},
		{"client_ip: no address at all: the peer", "ip", "GET", []string{"X-Forwarded-For: 203.0.113.9, unknown"}, "127.0.0.1", "127.0.0.1"},
		{"client_ip: X-Real-IP alone", "ip", "GET", []string{"X-Real-IP: 192.0.2.9"}, "192.0.2.9", "127.0.0.1"},
		{"client_ip: an ipv6-range limit counts the /48", "range", "GET",
			[]string{"X-Forwarded-For: 2001:db8:abcd:12::1"}, "2001:db8:abcd::/48", ""},
		{"header", "header", "GET", []string{"X-Api-Key: key-1"}, "key-1", "key-1"},
		{"header: the first of several", "header", "GET", []string{"X-Api-Key: key-2", "X-Api-Key: key-3"}, "key-2", "key-2"},
		{"cookie", "cookie", "GET", []string{"Cookie: theme=dark; session=s-1"}, "s-1", "s-1"},
		{"method: the request's own", "method", "PATCH", nil, "PATCH", "PATCH"},
		{"method: X-Forwarded-Method", "method", "GET", []string{"X-Forwarded-Method: DELETE"}, "DELETE", "GET"},
		{"method: X-Original-Method", "method", "GET", []string{"X-Original-Method: PUT"}, "PUT", "GET"},
		{"method: X-Forwarded-Method first", "method", "GET",
			[]string{"X-Original-Method: PUT", "X-Forwarded-Method: POST"}, "POST", "GET"},
		{"path: X-Forwarded-Uri, without its query", "path", "GET", []string{"X-Forwarded-Uri: /a/b?x=1"}, "/a/b", missing},
		{"path: X-Original-URI", "path", "GET", []string{"X-Original-URI: /c/d?y"}, "/c/d", missing},
		{"path: X-Forwarded-Uri first", "path", "GET", []string{"X-Original-URI: /e", "X-Forwarded-Uri: /f"}, "/f", missing},
		{"path: none sent", "path", "GET", nil, missing, missing},
		{"host: Host, without its port", "host", "GET", []string{"Host: shop.example:8080"}, "shop.example", "shop.example"},
		{"host: X-Forwarded-Host", "host", "GET",
			[]string{"Host: shop.example", "X-Forwarded-Host: fwd.example:443"}, "fwd.example", "shop.example"},
		{"host: an IPv6 literal", "host", "GET", []string{"Host: [2001:db8::1]:8443"}, "2001:db8::1", "2001:db8::1"},
		{"const", "const", "GET", []string{"X-Forwarded-For: 203.0.113.10"}, "everyone", "everyone"},
		// Without API tokens, Authorization is the client's: read as it is,
		// and X-Forwarded-Authorization means nothing.
		{"header:Authorization without tokens", "auth", "GET",
			[]string{"Authorization: Bearer user-2", "X-Forwarded-Authorization: Bearer other"}, "Bearer user-2", "Bearer user-2"},
	}
	for _, side := range []struct{ name, trusted string }{{"trusted", faTrusted}, {"untrusted", "10.0.0.0/8"}} {
		t.Run(side.name, func(t *testing.T) {
			t.Parallel()
			p, _ := startForwardAuth(t, side.trusted)
			for _, row := range rows {
				want := row.trusted
				if side.name == "untrusted" {
					want = row.untrusted
				}
				if want == "" {
					continue // not asked of this side
				}
				r := forwardAuth(t, p, row.method, row.rule, "", row.headers...)
				if want == missing {
					e := apiError(t, r, 429, "missing_id")
					if !strings.Contains(e.Message, "path") {
						t.Errorf("%s: the refusal does not name the source: %q", row.name, e.Message)
					}
					continue
				}
				a := decoded(t, r)
				if r.Status != 200 || !a.Allowed || len(a.Decisions) != 1 || a.Decisions[0].ID != want {
					t.Errorf("%s: %d %s, want 200 counting id %q", row.name, r.Status, r.Body, want)
				}
				if r.Header.Get("RateLimit-Policy") == "" || r.Header.Get("RateLimit") == "" {
					t.Errorf("%s: no RateLimit headers: %v", row.name, r.Header)
				}
			}
		})
	}
}

// The answers: 200 with the decision when allowed, the rule's deny_status
// (429, or 403 for nginx) with the same body and Retry-After when denied;
// a batch is all spent or none; cost; every method, whatever the body or
// query; the three missing actions; an invalid id and an unknown rule.
// Nothing refused is spent.
func TestForwardAuthAnswers(t *testing.T) {
	t.Parallel()
	p, _ := startForwardAuth(t, faTrusted)
	remaining := func(limit, id string) int64 { return checkRemaining(t, p, "", limit, id) }
	headersOf := func(r response) [3]string {
		return [3]string{r.Header.Get("RateLimit"), r.Header.Get("RateLimit-Policy"), r.Header.Get("Retry-After")}
	}
	const tightPolicy = `"FATight";q=2;w=60`

	t.Run("allowed, then denied with the rule's status", func(t *testing.T) {
		r := forwardAuth(t, p, "GET", "tight", "", "X-Api-Key: a1")
		a := decoded(t, r)
		d := wire.DecisionResponse{Limit: "FATight", ID: "a1", Allowed: true, Remaining: 1, ResetInMS: 30000,
			Burst: 2, Count: 2, Period: "1m0s", Algorithm: "gcra"}
		if r.Status != 200 || !a.Allowed || a.Remaining != 1 || a.RetryInMS != 0 || a.ResetInMS != 30000 || a.Degraded ||
			len(a.Decisions) != 1 || a.Decisions[0] != d {
			t.Errorf("first: %d %s", r.Status, r.Body)
		}
		if got, want := headersOf(r), [3]string{`"FATight";r=1;t=30`, tightPolicy, ""}; got != want {
			t.Errorf("first: RateLimit, RateLimit-Policy, Retry-After %q, want %q", got, want)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		if r := forwardAuth(t, p, "GET", "tight", "", "X-Api-Key: a1"); r.Status != 200 || decoded(t, r).Remaining != 0 {
			t.Errorf("second: %d %s", r.Status, r.Body)
		}
		r = forwardAuth(t, p, "GET", "tight", "", "X-Api-Key: a1")
		a = decoded(t, r)
		d = wire.DecisionResponse{Limit: "FATight", ID: "a1", Remaining: 0, RetryInMS: 30000, ResetInMS: 60000,
			Burst: 2, Count: 2, Period: "1m0s", Algorithm: "gcra"}
		if r.Status != 429 || a.Allowed || a.RetryInMS != 30000 || len(a.Decisions) != 1 || a.Decisions[0] != d {
			t.Errorf("third: %d %s, want 429 and the denial", r.Status, r.Body)
		}
		if got, want := headersOf(r), [3]string{`"FATight";r=0;t=60`, tightPolicy, "30"}; got != want {
			t.Errorf("third: RateLimit, RateLimit-Policy, Retry-After %q, want %q", got, want)
		}
		// The same bucket through a rule for nginx: 403.
		if r := forwardAuth(t, p, "GET", "tight-nginx", "", "X-Api-Key: a1"); r.Status != 403 || decoded(t, r).Allowed || r.Header.Get("Retry-After") != "30" {
			t.Errorf("tight-nginx: %d %v %s, want 403 with Retry-After 30", r.Status, r.Header, r.Body)
		}
		advanceWithToken(t, p, "", 30*time.Second)
		if r := forwardAuth(t, p, "GET", "tight-nginx", "", "X-Api-Key: a1"); r.Status != 200 {
			t.Errorf("after Retry-After: %d %s", r.Status, r.Body)
		}
	})

	t.Run("a batch is spent whole or not at all", func(t *testing.T) {
		for i, want := range []int{200, 200, 429, 429} {
			if r := forwardAuth(t, p, "GET", "pair", "", "X-Api-Key: b1", "X-Other: o1"); r.Status != want {
				t.Errorf("request %d: %d %s, want %d", i+1, r.Status, r.Body, want)
			}
		}
		if got := remaining("FAByKey", "o1"); got != 998 {
			t.Errorf("the other limit has %d left, want 998: a denied batch spent it", got)
		}
	})

	t.Run("cost", func(t *testing.T) {
		r := forwardAuth(t, p, "GET", "costly", "")
		if a := decoded(t, r); r.Status != 200 || a.Remaining != 0 {
			t.Errorf("first: %d %s, want 200 with 0 left", r.Status, r.Body)
		}
		if r := forwardAuth(t, p, "GET", "costly", ""); r.Status != 429 {
			t.Errorf("second: %d %s, want 429", r.Status, r.Body)
		}
	})

	t.Run("every method; the body and query are ignored", func(t *testing.T) {
		methods := []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"}
		for _, m := range methods {
			req, err := http.NewRequest(m, p.URL+"/v1/forward-auth/method?rule=nope&cost=99", strings.NewReader(`{"not":"read"`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "text/plain")
			r := sendRequest(t, req)
			if r.Status != 200 {
				t.Errorf("%s: %d %s", m, r.Status, r.Body)
				continue
			}
			if m == "HEAD" {
				if len(r.Body) != 0 || r.Header.Get("RateLimit") == "" {
					t.Errorf("HEAD: body %q, headers %v", r.Body, r.Header)
				}
				continue
			}
			if a := decoded(t, r); len(a.Decisions) != 1 || a.Decisions[0].ID != m || a.Decisions[0].Remaining != 999 {
				t.Errorf("%s: %s, want one spent for %s", m, r.Body, m)
			}
		}
		if got := remaining("FAByMethod", "HEAD"); got != 999 {
			t.Errorf("HEAD has %d left, want 999", got)
		}
	})

	t.Run("missing: deny refuses with the rule's status and spends nothing", func(t *testing.T) {
		e := apiError(t, forwardAuth(t, p, "GET", "pair", "", "X-Api-Key: c1"), 429, "missing_id")
		if !strings.Contains(e.Message, "header:X-Other") || !strings.Contains(e.Message, "FAByKey") {
			t.Errorf("the refusal does not name the source and limit: %q", e.Message)
		}
		if got := remaining("FATight", "c1"); got != 2 {
			t.Errorf("c1 has %d left, want 2: a refused batch spent it", got)
		}
		apiError(t, forwardAuth(t, p, "GET", "tight", "", "X-Api-Key:"), 429, "missing_id") // empty is missing
		r := forwardAuth(t, p, "GET", "tight-nginx", "")
		apiError(t, r, 403, "missing_id")
		if got := headersOf(r); got != [3]string{} {
			t.Errorf("a refusal for a missing id has rate-limit headers %q", got)
		}
	})

	t.Run("missing: allow leaves the limit out", func(t *testing.T) {
		r := forwardAuth(t, p, "GET", "optional", "", "X-Forwarded-For: 203.0.113.20")
		if a := decoded(t, r); r.Status != 200 || len(a.Decisions) != 1 || a.Decisions[0].Limit != "FAByIP" || a.Decisions[0].ID != "203.0.113.20" {
			t.Errorf("without a key: %d %s, want only the address counted", r.Status, r.Body)
		}
		r = forwardAuth(t, p, "GET", "optional", "", "X-Forwarded-For: 203.0.113.20", "X-Api-Key: d1")
		if a := decoded(t, r); r.Status != 200 || len(a.Decisions) != 1 || remaining("FAByKey", "d1") != 999 || remaining("FAByIP", "203.0.113.20") != 998 {
			t.Errorf("with a key: %d %s, want both counted, the deciding one shown", r.Status, r.Body)
		}
		r = forwardAuth(t, p, "GET", "optional-all", "")
		const nothing = `{"allowed":true,"remaining":9223372036854775807,"retry_in_ms":0,"reset_in_ms":0,"decisions":[]}`
		if r.Status != 200 || strings.TrimSpace(string(r.Body)) != nothing || headersOf(r) != [3]string{} {
			t.Errorf("nothing to count: %d %v %s, want 200 %s without rate-limit headers", r.Status, r.Header, r.Body, nothing)
		}
	})

	t.Run("missing: client_ip counts the client instead", func(t *testing.T) {
		r := forwardAuth(t, p, "GET", "fallback", "", "X-Forwarded-For: 203.0.113.21")
		if a := decoded(t, r); r.Status != 200 || len(a.Decisions) != 1 || a.Decisions[0].ID != "203.0.113.21" {
			t.Errorf("without a key: %d %s, want the client address", r.Status, r.Body)
		}
		r = forwardAuth(t, p, "GET", "fallback", "", "X-Forwarded-For: 203.0.113.21", "X-Api-Key: e1")
		if a := decoded(t, r); r.Status != 200 || len(a.Decisions) != 1 || a.Decisions[0].ID != "e1" {
			t.Errorf("with a key: %d %s, want the key", r.Status, r.Body)
		}
	})

	t.Run("an invalid id is a 400 and spends nothing", func(t *testing.T) {
		e := apiError(t, forwardAuth(t, p, "GET", "account", "", "X-Api-Key: f1", "X-Account: 0042"), 400, "invalid_id")
		if !strings.Contains(e.Message, "FAByAccount") {
			t.Errorf("the message does not name the limit: %q", e.Message)
		}
		if got := remaining("FAByKey", "f1"); got != 1000 {
			t.Errorf("f1 has %d left, want 1000", got)
		}
		apiError(t, forwardAuth(t, p, "GET", "header", "", "X-Api-Key: "+strings.Repeat("k", 257)), 400, "invalid_id")
	})

	t.Run("an unknown rule is a 404", func(t *testing.T) {
		e := apiError(t, forwardAuth(t, p, "GET", "no-such-rule", ""), 404, "not_found")
		if !strings.Contains(e.Message, "no-such-rule") {
			t.Errorf("the message does not name the rule: %q", e.Message)
		}
		apiError(t, forwardAuth(t, p, "POST", strings.Repeat("r", 300), ""), 404, "not_found")
	})
}

// With API tokens: 401 without one (or with a wrong one), an API or admin
// token passes. header:Authorization then reads the client's
// Authorization from X-Forwarded-Authorization, as the proxy's own
// carries the token; the token itself is never an id.
func TestForwardAuthTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, _ := startForwardAuth(t, faTrusted,
		"--api-token-file", writeFile(t, dir, "api.tokens", "api-token\n"),
		"--admin-token-file", writeFile(t, dir, "admin.tokens", "admin-token\n"))
	for _, token := range []string{"", "wrong-token"} {
		r := forwardAuth(t, p, "GET", "const", token)
		apiError(t, r, 401, "unauthorized")
		if r.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("token %q: 401 without WWW-Authenticate", token)
		}
	}
	for _, token := range []string{"api-token", "admin-token"} {
		if r := forwardAuth(t, p, "GET", "const", token); r.Status != 200 {
			t.Errorf("token %q: %d %s", token, r.Status, r.Body)
		}
	}
	r := forwardAuth(t, p, "GET", "auth", "api-token", "X-Forwarded-Authorization: Bearer user-9")
	if a := decoded(t, r); r.Status != 200 || len(a.Decisions) != 1 || a.Decisions[0].ID != "Bearer user-9" {
		t.Errorf("with X-Forwarded-Authorization: %d %s, want the client's Authorization counted", r.Status, r.Body)
	}
	apiError(t, forwardAuth(t, p, "GET", "auth", "api-token"), 429, "missing_id")
	if got := checkRemaining(t, p, "api-token", "FAByAuth", "Bearer api-token"); got != 1000 {
		t.Errorf("the token was counted as an id: %d left", got)
	}
}

// Broken rules files, each problem at its line (the files are faRules
// with one change).
var faBadRules = []struct{ name, rules, where, what string }{
	{"unknown field", strings.Replace(faRules, "    limits: [{limit: FAByIP, id: client_ip}]\n", "    limits: [{limit: FAByIP, id: client_ip}]\n    colour: blue\n", 1),
		"forward-auth.yaml:5", "colour"},
	{"unknown limit", strings.Replace(faRules, "{limit: FAByCookie,", "{limit: NoSuchLimit,", 1), "forward-auth.yaml:10", "NoSuchLimit"},
	{"bad id source", strings.Replace(faRules, `"cookie:session"}]`, `"cookies:session"}]`, 1), "forward-auth.yaml:10", "cookies:session"},
	{"deny_status not a 4xx", strings.Replace(faRules, "deny_status: 403", "deny_status: 500", 1), "forward-auth.yaml:25", "deny_status"},
	{"bad trusted proxy", strings.Replace(faRules, "[%s]", "[%s, 10.0.0.0/33]", 1), "forward-auth.yaml:1", "10.0.0.0/33"},
}

// The rules file is reloaded with the limit files, by SIGHUP and by POST
// /v1/admin/reload: a new rule takes effect. A broken file is refused
// whole, with its problems at their lines, and the rules in use keep
// serving.
func TestForwardAuthReload(t *testing.T) {
	t.Parallel()
	p, rules := startForwardAuth(t, faTrusted)
	status := func(rule string) int { return forwardAuth(t, p, "GET", rule, "").Status }
	if s := status("new-rule"); s != 404 {
		t.Fatalf("new-rule before it exists: %d", s)
	}
	replaceFile(t, rules, fmt.Sprintf(faRules, faTrusted)+"  new-rule:\n    limits: [{limit: FAByConst, id: \"const:new\"}]\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 5*time.Second, "new-rule in use after SIGHUP", func() bool { return status("new-rule") == 200 })
	good := fmt.Sprintf(faRules, faTrusted) // new-rule dropped again, through the admin endpoint
	replaceFile(t, rules, good)
	if r := p.post("/v1/admin/reload", ""); r.Status != 200 {
		t.Fatalf("admin reload: %d %s", r.Status, r.Body)
	}
	if s := status("new-rule"); s != 404 {
		t.Errorf("new-rule after the admin reload dropped it: %d", s)
	}
	replaceFile(t, rules, good+"  new-rule:\n    limits: [{limit: FAByConst, id: \"const:new\"}]\n")
	if r := p.post("/v1/admin/reload", ""); r.Status != 200 || status("new-rule") != 200 {
		t.Fatalf("admin reload adding new-rule: %d %s", r.Status, r.Body)
	}

	for _, bad := range faBadRules {
		failures := metricValue(p, p.URL, "limiter_config_reload_failures_total")
		replaceFile(t, rules, fmt.Sprintf(bad.rules, faTrusted))
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		pollUntil(t, 5*time.Second, bad.name+": the refused reload counted", func() bool {
			return metricValue(p, p.URL, "limiter_config_reload_failures_total") == failures+1
		})
		r := p.post("/v1/admin/reload", "")
		e := apiError(t, r, 422, "reload_failed")
		if !strings.Contains(e.Message, bad.where) || !strings.Contains(e.Message, bad.what) {
			t.Errorf("%s: admin reload says %q, want %s and %s", bad.name, e.Message, bad.where, bad.what)
		}
		if a, b := status("new-rule"), status("const"); a != 200 || b != 200 {
			t.Errorf("%s: after the refused reload new-rule answers %d and const %d, want the rules in use kept", bad.name, a, b)
		}
	}
	if !p.alive() {
		t.Fatalf("the process exited:\n%s", p.logs())
	}
}

// `limiter check-config --forward-auth FILE` says ok for a good file and
// lists a broken one's problems at their lines, exiting 1; `limiter serve`
// refuses to start with it.
func TestForwardAuthCheckConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	defaults := writeFile(t, dir, "defaults.yaml", faDefaults)
	overrides := writeFile(t, dir, "overrides.yaml", "[]\n")
	good := writeFile(t, dir, "forward-auth.yaml", fmt.Sprintf(faRules, faTrusted))
	out, err := exec.Command(binary, "check-config", "--defaults", defaults, "--overrides", overrides, "--forward-auth", good).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok: ") || !strings.Contains(string(out), good+" (19 forward-auth rules)") {
		t.Errorf("check-config of a good file: %v\n%s", err, out)
	}
	for _, bad := range faBadRules {
		t.Run(bad.name, func(t *testing.T) {
			t.Parallel()
			rules := writeFile(t, t.TempDir(), "forward-auth.yaml", fmt.Sprintf(bad.rules, faTrusted))
			out, err := exec.Command(binary, "check-config", "--defaults", defaults, "--overrides", overrides, "--forward-auth", rules).CombinedOutput()
			exit, ok := err.(*exec.ExitError)
			line := rules + strings.TrimPrefix(bad.where, "forward-auth.yaml")
			if !ok || exit.ExitCode() != 1 || !strings.Contains(string(out), line+": ") || !strings.Contains(string(out), bad.what) ||
				!strings.Contains(string(out), "1 problem(s) found") {
				t.Errorf("check-config: %v\n%s\nwant exit 1 and one problem at %s naming %s", err, out, line, bad.what)
			}
			served, err := refusesToServe(t, "--listen", "127.0.0.1:0", "--defaults", defaults, "--overrides", overrides, "--forward-auth", rules)
			if err == nil || !strings.Contains(served, line) || !strings.Contains(served, bad.what) || strings.Contains(served, "msg=listening") {
				t.Errorf("serve: %v\n%s\nwant a refusal naming %s and %s before listening", err, served, line, bad.what)
			}
		})
	}
}

// On Redis, forward-auth spends in Redis, shared by every process. With
// Redis stopped, it answers 503 source_unavailable, or under --fail-open
// 200 with "degraded": true.
func TestForwardAuthRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.NewStandalone(t)
	args := append([]string{"--source", srv.URL()}, redisPatientArgs...)
	closed, _ := startForwardAuth(t, faTrusted, args...)
	open, _ := startForwardAuth(t, faTrusted, append(args, "--fail-open")...)
	for i, p := range []*limiterProc{closed, open} {
		r := forwardAuth(t, p, "GET", "tight", "", "X-Api-Key: r1")
		if a := decoded(t, r); r.Status != 200 || a.Remaining != int64(1-i) || a.Degraded {
			t.Fatalf("process %d: %d %s, want 200 with %d left", i, r.Status, r.Body, 1-i)
		}
	}
	srv.Stop(t)
	r := forwardAuth(t, closed, "GET", "tight", "", "X-Api-Key: r2")
	if e := apiError(t, r, 503, "source_unavailable"); e.Message == "" {
		t.Errorf("503 without a message: %s", r.Body)
	}
	r = forwardAuth(t, open, "GET", "tight", "", "X-Api-Key: r2")
	if a := decoded(t, r); r.Status != 200 || !a.Allowed || !a.Degraded {
		t.Errorf("under --fail-open: %d %s, want 200 allowed and degraded", r.Status, r.Body)
	}
}
