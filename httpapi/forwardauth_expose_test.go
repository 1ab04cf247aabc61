package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/forwardauth"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
)

// exposeRules count a request against two limits, Keys (3 a minute, per
// X-Api-Key) and PerIP (2 a minute, per client address), once for each
// expose value; the last two show what none does to the answers that are
// not decisions.
const exposeRules = `rules:
  deciding:
    limits:
      - {limit: Keys, id: header:X-Api-Key}
      - {limit: PerIP, id: client_ip}
  none:
    limits:
      - {limit: Keys, id: header:X-Api-Key}
      - {limit: PerIP, id: client_ip}
    expose: none
  none-nginx:
    limits:
      - {limit: Keys, id: header:X-Api-Key}
      - {limit: PerIP, id: client_ip}
    deny_status: 403
    expose: none
  all:
    limits:
      - {limit: Keys, id: header:X-Api-Key}
      - {limit: PerIP, id: client_ip}
    expose: all
  none-optional:
    limits: [{limit: Keys, id: header:X-Api-Key}]
    missing: allow
    expose: none
  none-accounts:
    limits:
      - {limit: Keys, id: header:X-Api-Key}
      - {limit: NewOrdersPerAccount, id: header:X-Account}
    expose: none
`

func newExposeServer(t *testing.T, o faOptions) *faServer {
	t.Helper()
	o.rules = func(cfg *ratelimits.Config) func() *forwardauth.Rules {
		rs, err := configfile.ParseForwardAuth("forward-auth.yaml", []byte(exposeRules), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return func() *forwardauth.Rules { return rs }
	}
	return newFAServer(t, o)
}

// rateLimitHeaders are the three headers of a decision, in a fixed order.
func rateLimitHeaders(h http.Header) [3]string {
	return [3]string{h.Get("RateLimit-Policy"), h.Get("RateLimit"), h.Get("Retry-After")}
}

// By default a rule's answer shows the deciding limit alone: the one its
// RateLimit headers name, whichever of the rule's limits that is, allowed
// or denied. The other limit's name, burst and count appear nowhere, and
// the batch's own fields are the deciding decision's.
func TestForwardAuthExposeDeciding(t *testing.T) {
	s := newExposeServer(t, faOptions{})
	// key-low has 1 of Keys' 3 left, so Keys decides the next call (0 left
	// against PerIP's 1); then PerIP decides, and denies the third.
	if rec := s.spend(`{"limit":"Keys","id":"key-low","cost":2}`); rec.Code != 200 {
		t.Fatalf("spend: %d %s", rec.Code, rec.Body)
	}
	for _, tt := range []struct {
		key             string
		status          int
		deciding, other string
		headers         [3]string
	}{
		{"key-low", 200, "Keys", "PerIP", [3]string{`"Keys";q=3;w=60`, `"Keys";r=0;t=60`, ""}},
		{"key-a", 200, "PerIP", "Keys", [3]string{`"PerIP";q=2;w=60`, `"PerIP";r=0;t=60`, ""}},
		{"key-b", 429, "PerIP", "Keys", [3]string{`"PerIP";q=2;w=60`, `"PerIP";r=0;t=60`, "30"}},
	} {
		rec := s.ask("GET", "deciding", faPeer, "X-Api-Key", tt.key)
		if rec.Code != tt.status {
			t.Fatalf("%s: status %d, want %d: %s", tt.key, rec.Code, tt.status, rec.Body)
		}
		if got := rateLimitHeaders(rec.Header()); got != tt.headers {
			t.Errorf("%s: RateLimit-Policy, RateLimit, Retry-After %q; want %q", tt.key, got, tt.headers)
		}
		got := decode[wire.BatchResponse](t, rec)
		if len(got.Decisions) != 1 || got.Decisions[0].Limit != tt.deciding {
			t.Fatalf("%s: decisions %+v; want %s's alone", tt.key, got.Decisions, tt.deciding)
		}
		d := got.Decisions[0]
		if got.Allowed != d.Allowed || got.Remaining != d.Remaining || got.RetryInMS != d.RetryInMS || got.ResetInMS != d.ResetInMS {
			t.Errorf("%s: batch fields %+v differ from the deciding decision %+v", tt.key, got, d)
		}
		if strings.Contains(rec.Body.String(), tt.other) {
			t.Errorf("%s: the body names %s, which did not decide: %s", tt.key, tt.other, rec.Body)
		}
	}
}

// expose: none answers with the status alone: no body, no Content-Type,
// no RateLimit headers, and on a refusal Retry-After, the same as the
// default would send. Both limits are spent as under any other expose.
func TestForwardAuthExposeNone(t *testing.T) {
	s := newExposeServer(t, faOptions{})
	shown := newExposeServer(t, faOptions{}) // the same calls under the default
	for i, key := range []string{"key-a", "key-b", "key-c"} {
		rec := s.ask("GET", "none", faPeer, "X-Api-Key", key)
		same := shown.ask("GET", "deciding", faPeer, "X-Api-Key", key)
		if rec.Code != same.Code {
			t.Fatalf("%s: status %d; the default answers %d", key, rec.Code, same.Code)
		}
		wantRetry := same.Header().Get("Retry-After")
		if (i == 2) != (wantRetry != "") {
			t.Fatalf("%s: the default answers %d with Retry-After %q; want the third call alone denied", key, same.Code, wantRetry)
		}
		if got, want := rateLimitHeaders(rec.Header()), [3]string{"", "", wantRetry}; got != want {
			t.Errorf("%s: RateLimit-Policy, RateLimit, Retry-After %q; want %q", key, got, want)
		}
		if rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
			t.Errorf("%s: %d, Content-Type %q, body %q; want no body", key, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
	}
	if k, ip := s.remaining("Keys", "key-a"), s.remaining("PerIP", "192.0.2.1"); k != 2 || ip != 0 {
		t.Errorf("Keys key-a has %d left, PerIP %d; want 2 and 0", k, ip)
	}

	// HEAD, and another deny status: the same.
	rec := s.ask("HEAD", "none-nginx", faPeer, "X-Api-Key", "key-d")
	if rec.Code != 403 || rateLimitHeaders(rec.Header()) != [3]string{"", "", "30"} || rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
		t.Errorf("HEAD, deny_status 403: %d %v %q; want 403 with Retry-After 30 alone", rec.Code, rec.Header(), rec.Body)
	}
	// Nothing to count (missing: allow): an empty 200.
	rec = s.ask("GET", "none-optional", faPeer)
	if rec.Code != 200 || rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" || rateLimitHeaders(rec.Header()) != [3]string{} {
		t.Errorf("nothing counted: %d %v %q; want an empty 200", rec.Code, rec.Header(), rec.Body)
	}
	// What is not a decision keeps its error body: it tells the client what
	// is wrong with its own request, and shows no threshold or count.
	rec = s.ask("GET", "none", faPeer)
	if e := faError(t, rec); rec.Code != 429 || e.Code != "missing_id" || rateLimitHeaders(rec.Header()) != [3]string{} {
		t.Errorf("no key: %d %+v %v; want 429 missing_id without rate-limit headers", rec.Code, e, rec.Header())
	}
	rec = s.ask("GET", "none-accounts", faPeer, "X-Api-Key", "key-e", "X-Account", "abc")
	if e := faError(t, rec); rec.Code != 400 || e.Code != "invalid_id" {
		t.Errorf("an invalid account: %d %+v; want 400 invalid_id", rec.Code, e)
	}

	// Over a connection: a body of length 0, and no Content-Type.
	srv := httptest.NewServer(s.h)
	defer srv.Close()
	req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/forward-auth/none-optional", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(body) != 0 || resp.ContentLength != 0 || resp.Header.Get("Content-Type") != "" {
		t.Errorf("over a connection: %d, Content-Length %d, Content-Type %q, body %q; want an empty 200",
			resp.StatusCode, resp.ContentLength, resp.Header.Get("Content-Type"), body)
	}
}

// expose: all shows every decision of the batch: the body and headers of
// the same spend through POST /v1/spend, byte for byte.
func TestForwardAuthExposeAll(t *testing.T) {
	s := newExposeServer(t, faOptions{})
	spend := newExposeServer(t, faOptions{})
	for i, key := range []string{"key-a", "key-b", "key-c"} {
		rec := s.ask("GET", "all", faPeer, "X-Api-Key", key)
		same := spend.spend(`{"transactions":[{"limit":"Keys","id":"` + key + `"},{"limit":"PerIP","id":"192.0.2.1"}]}`)
		if want := []int{200, 200, 429}[i]; rec.Code != want {
			t.Fatalf("%s: status %d, want %d", key, rec.Code, want)
		}
		if rec.Body.String() != same.Body.String() {
			t.Errorf("%s: body\n %s\nwant that of /v1/spend\n %s", key, rec.Body, same.Body)
		}
		if got, want := rateLimitHeaders(rec.Header()), rateLimitHeaders(same.Header()); got != want {
			t.Errorf("%s: headers %q; /v1/spend says %q", key, got, want)
		}
		if got := decode[wire.BatchResponse](t, rec); len(got.Decisions) != 2 {
			t.Errorf("%s: %d decisions; want both", key, len(got.Decisions))
		}
	}
}

// A source that fails with fail-open decides nothing: by default the
// answer is degraded with no decision (the decisions would show every
// limit's burst and count), under none an empty 200, under all every
// limit as /v1/spend shows it.
func TestForwardAuthExposeFailOpen(t *testing.T) {
	s := newExposeServer(t, faOptions{src: failingSource{}, opts: []ratelimits.Option{ratelimits.WithFailOpen()}})
	rec := s.ask("GET", "deciding", faPeer, "X-Api-Key", "key-a")
	var got wire.BatchResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 || !got.Allowed || !got.Degraded || len(got.Decisions) != 0 {
		t.Errorf("deciding: %d %s; want 200, degraded, no decision", rec.Code, rec.Body)
	}
	rec = s.ask("GET", "none", faPeer, "X-Api-Key", "key-a")
	if rec.Code != 200 || rec.Body.Len() != 0 || rateLimitHeaders(rec.Header()) != [3]string{} {
		t.Errorf("none: %d %v %q; want an empty 200", rec.Code, rec.Header(), rec.Body)
	}
	rec = s.ask("GET", "all", faPeer, "X-Api-Key", "key-a")
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 || !got.Degraded || len(got.Decisions) != 2 {
		t.Errorf("all: %d %s; want 200, degraded, both decisions", rec.Code, rec.Body)
	}
}
