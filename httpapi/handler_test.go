package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/source/memory"
)

const defaults = `
Logins:
  enum: 101
  id: string
  burst: 3
  count: 3
  period: 1m
Fast:
  enum: 102
  id: string
  burst: 20
  count: 20
  period: 1s
Ranges:
  enum: 103
  id: ipv6-range
  burst: 2
  count: 2
  period: 500ms
`

var start = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

type server struct {
	t     *testing.T
	h     http.Handler
	clock clock.FakeClock
}

// newLimiter is a Limiter of the test configuration on src, with a fake
// clock set to start.
func newLimiter(t testing.TB, src ratelimits.Source, opts ...ratelimits.Option) (*ratelimits.Limiter, clock.FakeClock) {
	t.Helper()
	cfg, err := configfile.Parse("defaults.yaml", []byte(defaults), "overrides.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(start)
	l, err := ratelimits.NewLimiter(cfg, src, clk, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

func newServer(t *testing.T, src ratelimits.Source, withFakeClock bool, opts ...ratelimits.Option) *server {
	t.Helper()
	l, clk := newLimiter(t, src, opts...)
	h := httpapi.New(httpapi.Options{Limiter: l, MaxBatch: 10})
	if withFakeClock {
		h = httpapi.WithDebugClock(h, clk, bearer.NewTokens(nil, nil))
	}
	return &server{t: t, h: h, clock: clk}
}

func (s *server) do(method, path, contentType, body string) *httptest.ResponseRecorder {
	s.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	return rec
}

func (s *server) post(path, body string) *httptest.ResponseRecorder {
	return s.do(http.MethodPost, path, "application/json", body)
}

func decode[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %T from %q: %v", v, rec.Body.String(), err)
	}
	return v
}

func TestSpendAnswerAndHeaders(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	rec := s.post("/v1/spend", `{"limit":"Logins","id":"alice","cost":3}`)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	got := decode[wire.BatchResponse](t, rec)
	// retry_in is for another spend of the same cost: three tokens, 60s.
	want := wire.BatchResponse{Allowed: true, Remaining: 0, RetryInMS: 60000, ResetInMS: 60000, Decisions: []wire.DecisionResponse{{
		Limit: "Logins", ID: "alice", Allowed: true, Remaining: 0, RetryInMS: 60000, ResetInMS: 60000,
		Burst: 3, Count: 3, Period: "1m0s", Algorithm: "gcra",
	}}}
	if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.RetryInMS != want.RetryInMS || got.ResetInMS != want.ResetInMS || got.Decisions[0] != want.Decisions[0] {
		t.Fatalf("answer\n got %+v\nwant %+v", got, want)
	}
	if h := rec.Header().Get("RateLimit-Policy"); h != `"Logins";q=3;w=60` {
		t.Errorf("RateLimit-Policy = %q", h)
	}
	if h := rec.Header().Get("RateLimit"); h != `"Logins";r=0;t=60` {
		t.Errorf("RateLimit = %q", h)
	}
	if h := rec.Header().Get("Retry-After"); h != "" {
		t.Errorf("Retry-After on an allowed answer: %q", h)
	}

	// Denied: still 200, with Retry-After in whole seconds rounded up.
	s.clock.Add(500 * time.Millisecond)
	rec = s.post("/v1/spend", `{"limit":"Logins","id":"alice"}`)
	got = decode[wire.BatchResponse](t, rec)
	if rec.Code != 200 || got.Allowed || got.RetryInMS != 19500 {
		t.Fatalf("denied spend: %d %+v", rec.Code, got)
	}
	if h := rec.Header().Get("Retry-After"); h != "20" {
		t.Errorf("Retry-After = %q, want 20 (19.5s rounded up)", h)
	}
	if h := rec.Header().Get("RateLimit"); h != `"Logins";r=0;t=60` {
		t.Errorf("RateLimit when denied = %q, want t=60 (59.5s rounded up)", h)
	}
}

// Sub-second windows are reported as 1 second; sub-millisecond waits as 1ms.
func TestRounding(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	rec := s.post("/v1/spend", `{"limit":"Ranges","id":"2001:db8:abcd::/48","cost":2}`)
	if h := rec.Header().Get("RateLimit-Policy"); h != `"Ranges";q=2;w=1` {
		t.Errorf("RateLimit-Policy = %q, want w=1 for a 500ms period", h)
	}
	s.clock.Add(250*time.Millisecond - time.Nanosecond)
	got := decode[wire.BatchResponse](t, s.post("/v1/spend", `{"limit":"Ranges","id":"2001:db8:abcd::/48"}`))
	if got.Allowed || got.RetryInMS != 1 {
		t.Fatalf("1ns before a token: %+v, want denied with retry 1ms", got)
	}
}

func TestBatchAndModes(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	body := `{"transactions":[
		{"limit":"Fast","id":"a","cost":1},
		{"limit":"Logins","id":"a","cost":1,"mode":"check-only"},
		{"limit":"Ranges","id":"2001:DB8:ABCD:1::/48","cost":1,"mode":"spend-only"}]}`
	got := decode[wire.BatchResponse](t, s.post("/v1/spend", body))
	if !got.Allowed || got.Remaining != 2 || len(got.Decisions) != 3 {
		t.Fatalf("batch: %+v, want allowed, deciding Logins (2 remaining)", got)
	}
	if got.Decisions[2].ID != "2001:db8:abcd::/48" {
		t.Errorf("range id %q, want canonical 2001:db8:abcd::/48", got.Decisions[2].ID)
	}
	// check-only wrote nothing; spend-only and check-and-spend did.
	got = decode[wire.BatchResponse](t, s.post("/v1/check", `{"transactions":[{"limit":"Logins","id":"a","cost":0},{"limit":"Fast","id":"a","cost":0}]}`))
	if got.Decisions[0].Remaining != 3 || got.Decisions[1].Remaining != 19 {
		t.Fatalf("after batch: %+v", got.Decisions)
	}
}

// Every refusal is a JSON error with the right status and code, names the
// transaction when one is at fault, and changes no bucket.
func TestRefusals(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	huge := `{"limit":"Logins","id":"` + strings.Repeat("x", 2<<20) + `"}`
	many := `{"transactions":[` + strings.TrimSuffix(strings.Repeat(`{"limit":"Logins","id":"a"},`, 11), ",") + `]}`
	tests := []struct {
		name, method, path, ctype, body string
		status                          int
		code                            string
		txn                             int // -1: no transaction index
	}{
		{"malformed JSON", "POST", "/v1/spend", "application/json", `{"limit":`, 400, "malformed_json", -1},
		{"not an object", "POST", "/v1/spend", "application/json", `[1,2]`, 400, "invalid_request", -1},
		{"empty body", "POST", "/v1/spend", "application/json", ``, 400, "malformed_json", -1},
		{"trailing data", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a"} {}`, 400, "malformed_json", -1},
		{"unknown field", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a","costs":1}`, 400, "unknown_field", 0},
		{"unknown field in a batch", "POST", "/v1/spend", "application/json", `{"transactions":[{"limit":"Logins","id":"a"},{"limit":"Logins","id":"b","x":1}]}`, 400, "unknown_field", 1},
		{"field name in another case", "POST", "/v1/spend", "application/json", `{"LIMIT":"Logins","id":"a"}`, 400, "unknown_field", 0},
		{"field name in another case in a batch", "POST", "/v1/spend", "application/json", `{"transactions":[{"limit":"Logins","id":"a"},{"limit":"Logins","Id":"b"}]}`, 400, "unknown_field", 1},
		{"field given twice", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a","id":"b"}`, 400, "invalid_request", 0},
		{"field given twice in a batch", "POST", "/v1/spend", "application/json", `{"transactions":[{"limit":"Logins","id":"a","cost":1,"cost":2}]}`, 400, "invalid_request", 0},
		{"transactions inside a transaction", "POST", "/v1/spend", "application/json", `{"transactions":[{"limit":"Logins","id":"a","transactions":[]}]}`, 400, "unknown_field", 0},
		{"transactions given twice", "POST", "/v1/spend", "application/json", `{"transactions":[{"limit":"Logins","id":"a"}],"transactions":[{"limit":"Logins","id":"b"}]}`, 400, "invalid_request", -1},
		{"missing limit", "POST", "/v1/spend", "application/json", `{"id":"a"}`, 400, "invalid_request", 0},
		{"missing id", "POST", "/v1/spend", "application/json", `{"limit":"Logins"}`, 400, "invalid_request", 0},
		{"wrong type", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":7}`, 400, "invalid_request", 0},
		{"both forms", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a","transactions":[]}`, 400, "invalid_request", -1},
		{"unknown field at the top of a batch", "POST", "/v1/spend", "application/json", `{"x":1,"transactions":[{"limit":"Logins","id":"a"}]}`, 400, "unknown_field", -1},
		{"unknown field, then not JSON", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a","x":1,"transactions":`, 400, "unknown_field", -1},
		{"field given twice, then not JSON", "POST", "/v1/spend", "application/json", `{"id":"a","id":"b",`, 400, "invalid_request", 0},
		{"transactions not an array", "POST", "/v1/spend", "application/json", `{"transactions":{"limit":"Logins","id":"a"}}`, 400, "invalid_request", -1},
		{"a transaction not an object", "POST", "/v1/spend", "application/json", `{"transactions":[{"limit":"Logins","id":"a"},7]}`, 400, "invalid_request", 1},
		{"empty batch", "POST", "/v1/spend", "application/json", `{"transactions":[]}`, 400, "empty_batch", -1},
		{"batch too large", "POST", "/v1/spend", "application/json", many, 400, "batch_too_large", -1},
		{"unknown limit", "POST", "/v1/spend", "application/json", `{"limit":"Nope","id":"a"}`, 400, "unknown_limit", 0},
		{"invalid id", "POST", "/v1/spend", "application/json", `{"limit":"Ranges","id":"10.0.0.0/8"}`, 400, "invalid_id", 0},
		{"invalid UTF-8 in id", "POST", "/v1/spend", "application/json", "{\"limit\":\"Logins\",\"id\":\"a\xffb\"}", 400, "malformed_json", -1},
		{"lone high surrogate in id", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"\ud800"}`, 400, "malformed_json", -1},
		{"lone low surrogate in id", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a\udc00"}`, 400, "malformed_json", -1},
		{"high surrogate before another escape", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"\ud800\u0041"}`, 400, "malformed_json", -1},
		{"high surrogate at the end of the body", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"\ud800`, 400, "malformed_json", -1},
		{"surrogate halves reversed", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"\udc00\ud800"}`, 400, "malformed_json", -1},
		{"lone surrogate in limit", "POST", "/v1/spend", "application/json", `{"limit":"Logins\uDBFF","id":"a"}`, 400, "malformed_json", -1},
		{"lone surrogate in mode", "POST", "/v1/check", "application/json", `{"limit":"Logins","id":"a","mode":"\ud800"}`, 400, "malformed_json", -1},
		{"lone surrogate in a field name", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a","\ud800":1}`, 400, "malformed_json", -1},
		{"lone surrogate in a batch", "POST", "/v1/spend", "application/json", `{"transactions":[{"limit":"Logins","id":"a"},{"limit":"Logins","id":"\udfff"}]}`, 400, "malformed_json", -1},
		{"invalid UTF-8 in the subscriber view", "GET", "/v1/limits/Logins/a%FFb", "", ``, 400, "invalid_id", 0},
		{"null cost", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a","cost":null}`, 400, "invalid_cost", 0},
		{"null cost in a batch", "POST", "/v1/spend", "application/json", `{"transactions":[{"limit":"Logins","id":"a"},{"limit":"Logins","id":"b","cost":null}]}`, 400, "invalid_cost", 1},
		{"null cost in reset", "POST", "/v1/reset", "application/json", `{"limit":"Logins","id":"a","cost":null}`, 400, "invalid_cost", 0},
		{"null id", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":null}`, 400, "invalid_request", 0},
		{"null limit", "POST", "/v1/spend", "application/json", `{"limit":null,"id":"a"}`, 400, "invalid_request", 0},
		{"null mode", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a","mode":null}`, 400, "invalid_request", 0},
		{"null mode in reset", "POST", "/v1/reset", "application/json", `{"limit":"Logins","id":"a","mode":null}`, 400, "invalid_request", 0},
		{"null next to transactions", "POST", "/v1/spend", "application/json", `{"cost":null,"transactions":[{"limit":"Logins","id":"a"}]}`, 400, "invalid_cost", -1},
		{"null transactions", "POST", "/v1/spend", "application/json", `{"transactions":null}`, 400, "invalid_request", -1},
		{"null transaction in a batch", "POST", "/v1/spend", "application/json", `{"transactions":[{"limit":"Logins","id":"a"},null]}`, 400, "invalid_request", 1},
		{"null body", "POST", "/v1/spend", "application/json", `null`, 400, "invalid_request", -1},
		{"null, then an unknown field", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":null,"x":1}`, 400, "invalid_request", 0},
		{"unknown field, then null", "POST", "/v1/spend", "application/json", `{"limit":"Logins","x":1,"id":null}`, 400, "unknown_field", 0},
		{"control character in id", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a\u0007b"}`, 400, "invalid_id", 0},
		{"cost above burst", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a","cost":4}`, 400, "invalid_cost", 0},
		{"negative cost", "POST", "/v1/check", "application/json", `{"limit":"Logins","id":"a","cost":-1}`, 400, "invalid_cost", 0},
		{"fractional cost", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a","cost":1.5}`, 400, "invalid_cost", 0},
		{"huge cost", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a","cost":99999999999999999999}`, 400, "invalid_cost", 0},
		{"string cost", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a","cost":"1"}`, 400, "invalid_cost", 0},
		{"bad mode", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a","mode":"spend"}`, 400, "invalid_mode", 0},
		{"empty mode", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"a","mode":""}`, 400, "invalid_mode", 0},
		{"empty mode in a batch", "POST", "/v1/check", "application/json", `{"transactions":[{"limit":"Logins","id":"a"},{"limit":"Logins","id":"b","mode":""}]}`, 400, "invalid_mode", 1},
		{"empty mode, slow path", "POST", "/v1/spend", "application/json", `{"limit":"Logins","id":"\u0061","mode":""}`, 400, "invalid_mode", 0},
		{"bad mode in a batch", "POST", "/v1/refund", "application/json", `{"transactions":[{"limit":"Logins","id":"a"},{"limit":"Logins","id":"b","mode":"x"}]}`, 400, "invalid_mode", 1},
		{"duplicate bucket", "POST", "/v1/spend", "application/json", `{"transactions":[{"limit":"Logins","id":"a"},{"limit":"Fast","id":"a"},{"limit":"Logins","id":"a"}]}`, 400, "duplicate_bucket", 2},
		{"duplicate bucket in reset", "POST", "/v1/reset", "application/json", `{"transactions":[{"limit":"Logins","id":"a"},{"limit":"Logins","id":"a"}]}`, 400, "duplicate_bucket", 1},
		{"body too large", "POST", "/v1/spend", "application/json", huge, 413, "body_too_large", -1},
		{"wrong content type", "POST", "/v1/spend", "text/plain", `{"limit":"Logins","id":"a"}`, 415, "unsupported_media_type", -1},
		{"form content type", "POST", "/v1/reset", "application/x-www-form-urlencoded", `{"limit":"Logins","id":"a"}`, 415, "unsupported_media_type", -1},
		{"wrong method", "GET", "/v1/spend", "", ``, 405, "method_not_allowed", -1},
		{"unknown path", "GET", "/v2/spend", "", ``, 404, "not_found", -1},
		{"no fake clock, no debug path", "POST", "/debug/clock", "application/json", `{"advance":"1s"}`, 404, "not_found", -1},
		{"unknown limit on the subscriber view", "GET", "/v1/limits/Nope/a", "", ``, 400, "unknown_limit", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := s.do(tt.method, tt.path, tt.ctype, tt.body)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			e := decode[wire.ErrorResponse](t, rec)
			if e.Error.Code != tt.code || e.Error.Message == "" {
				t.Errorf("error %+v, want code %q and a message", e.Error, tt.code)
			}
			if got := e.Error.Transaction; (got == nil) != (tt.txn < 0) || (got != nil && *got != tt.txn) {
				t.Errorf("transaction %s, want %d", rec.Body, tt.txn)
			}
		})
	}
	// None of the refusals spent anything.
	got := decode[wire.BatchResponse](t, s.post("/v1/check", `{"transactions":[{"limit":"Logins","id":"a","cost":0},{"limit":"Logins","id":"b","cost":0},{"limit":"Fast","id":"a","cost":0}]}`))
	for _, d := range got.Decisions {
		if d.Remaining != d.Burst {
			t.Errorf("after refusals %s/%s has %d of %d", d.Limit, d.ID, d.Remaining, d.Burst)
		}
	}
}

// Escapes that make valid Unicode are taken: a surrogate pair is one
// character, and an escaped backslash before "ud800" is no escape of a
// surrogate.
func TestUnicodeEscapesTaken(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	for _, tt := range []struct{ body, id string }{
		{`{"limit":"Logins","id":"\ud83d\ude00"}`, "\U0001F600"},
		{`{"limit":"Logins","id":"\uD83D\uDE00x"}`, "\U0001F600x"},
		{`{"limit":"Logins","id":"a\\ud800"}`, `a\ud800`},
		{`{"limit":"Logins","id":"\ufffd"}`, "\ufffd"},
	} {
		rec := s.post("/v1/check", tt.body)
		got := decode[wire.BatchResponse](t, rec)
		if rec.Code != 200 || got.Decisions[0].ID != tt.id {
			t.Errorf("%s: %d, id %q; want 200, id %q", tt.body, rec.Code, got.Decisions[0].ID, tt.id)
		}
	}
}

// A missing Content-Type is accepted as JSON, and parameters are allowed.
func TestContentTypes(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	for _, ct := range []string{"", "application/json", "application/json; charset=utf-8", "Application/JSON"} {
		if rec := s.do("POST", "/v1/check", ct, `{"limit":"Logins","id":"a"}`); rec.Code != 200 {
			t.Errorf("Content-Type %q: status %d", ct, rec.Code)
		}
	}
}

func TestRefundAndReset(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	s.post("/v1/spend", `{"limit":"Logins","id":"a","cost":3}`)
	rec := s.post("/v1/refund", `{"limit":"Logins","id":"a","cost":2}`)
	got := decode[wire.BatchResponse](t, rec)
	if !got.Decisions[0].Allowed || got.Decisions[0].Remaining != 2 || rec.Header().Get("RateLimit") != "" {
		t.Fatalf("refund: %+v headers %v", got, rec.Header())
	}
	rec = s.post("/v1/reset", `{"transactions":[{"limit":"Logins","id":"a","cost":99,"mode":"whatever"},{"limit":"Logins","id":"never"}]}`)
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"reset":1}` {
		t.Fatalf("reset: %d %s, want {\"reset\":1}", rec.Code, rec.Body)
	}
	if d := decode[wire.DecisionResponse](t, s.do("GET", "/v1/limits/Logins/a", "", "")); d.Remaining != 3 {
		t.Fatalf("after reset: %+v", d)
	}
}

// The subscriber view takes ids with "/" in them, escaped or not.
func TestSubscriberView(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	s.post("/v1/spend", `{"limit":"Ranges","id":"2001:db8:abcd::/48"}`)
	for _, path := range []string{"/v1/limits/Ranges/2001:db8:abcd::/48", "/v1/limits/Ranges/2001:DB8:ABCD::%2F48"} {
		rec := s.do("GET", path, "", "")
		d := decode[wire.DecisionResponse](t, rec)
		if rec.Code != 200 || d.ID != "2001:db8:abcd::/48" || d.Remaining != 1 || d.Burst != 2 || d.Override {
			t.Errorf("%s: %d %+v", path, rec.Code, d)
		}
	}
	rec := s.do("GET", "/v1/limits/CertificatesPerDomainPerAccount/7", "", "")
	if d := decode[wire.DecisionResponse](t, rec); !d.Unlimited || !d.Allowed {
		t.Errorf("limit without default: %+v, want unlimited", d)
	}
}

func TestLimitsListing(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	rec := s.do("GET", "/v1/limits", "", "")
	var got wire.LimitsResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 {
		t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
	}
	byName := map[string]int{}
	for i, l := range got.Limits {
		byName[l.Limit] = i
	}
	if i, ok := byName["Logins"]; !ok || got.Limits[i].Enum != 101 || !got.Limits[i].Declared || got.Limits[i].Default == nil || got.Limits[i].Default.Burst != 3 {
		t.Errorf("Logins entry missing or wrong: %s", rec.Body)
	}
	if i, ok := byName["NewOrdersPerAccount"]; !ok || got.Limits[i].Default != nil || got.Limits[i].IDKind != "account" {
		t.Errorf("built-in without default should be listed with default null: %s", rec.Body)
	}
}

func TestFakeClockEndpoint(t *testing.T) {
	s := newServer(t, memory.New(0), true)
	rec := s.post("/debug/clock", `{"advance":"1500ms"}`)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"now":"2026-11-22T00:00:01.5Z"`) {
		t.Fatalf("advance: %d %s", rec.Code, rec.Body)
	}
	rec = s.post("/debug/clock", `{"set":"2027-01-02T03:04:05Z"}`)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"now":"2027-01-02T03:04:05Z"`) {
		t.Fatalf("set: %d %s", rec.Code, rec.Body)
	}
	for _, bad := range []string{`{}`, `{"advance":"soon"}`, `{"set":"yesterday"}`, `{"advance":"1s","set":"2027-01-02T03:04:05Z"}`} {
		if rec := s.post("/debug/clock", bad); rec.Code != 400 {
			t.Errorf("%s: status %d, want 400", bad, rec.Code)
		}
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	if rec := s.do("GET", "/healthz", "", ""); rec.Code != 200 {
		t.Errorf("healthz %d", rec.Code)
	}
	if rec := s.do("GET", "/readyz", "", ""); rec.Code != 200 {
		t.Errorf("readyz %d", rec.Code)
	}
	s.post("/v1/spend", `{"limit":"Logins","id":"secret-subscriber"}`)
	rec := s.do("GET", "/metrics", "", "")
	body := rec.Body.String()
	for _, want := range []string{
		`limiter_decisions_total{limit="Logins",op="spend",outcome="allowed"} 1`,
		`limiter_http_request_duration_seconds_count{method="POST",route="/v1/spend",status="200"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "secret-subscriber") {
		t.Error("/metrics contains a subscriber id")
	}
}

// failingSource fails every call: as a store that timed out after the call
// was sent (the outcome is unknown), or with refused set, as one that could
// not be reached (nothing was applied).
type failingSource struct{ panics, refused bool }

var errDown = errors.New("store down")

func (f failingSource) fail() error {
	if f.panics {
		panic("source bug")
	}
	if f.refused {
		return fmt.Errorf("%w: %w", once.ErrNotApplied, errDown)
	}
	return errDown
}
func (f failingSource) Spend(context.Context, int64, []bucket.Op, []bucket.Outcome) error {
	return f.fail()
}
func (f failingSource) Refund(context.Context, int64, []bucket.Op, []bucket.Outcome) error {
	return f.fail()
}
func (f failingSource) SpendOnce(context.Context, int64, once.Record, []bucket.Op, []bucket.Outcome) (bool, error) {
	return false, f.fail()
}
func (f failingSource) RefundOnce(context.Context, int64, once.Record, []bucket.Op, []bucket.Outcome) (bool, error) {
	return false, f.fail()
}
func (f failingSource) Reset(context.Context, int64, []bucket.Op) (int, error) { return 0, f.fail() }
func (f failingSource) Ping(context.Context) error                             { return f.fail() }
func (f failingSource) Call(context.Context, int64, *bucket.Call, *bucket.CallResult) error {
	return f.fail()
}
func (f failingSource) Close() error { return nil }
func (f failingSource) ListBox(context.Context, int64, string, string, int) (ratelimits.BoxPage, error) {
	return ratelimits.BoxPage{}, f.fail()
}

func TestSourceFailureIs503(t *testing.T) {
	// A 503 says whether the request may have taken effect: a store that
	// was never reached changed nothing (source_unavailable, safe to
	// retry), one that timed out may have (source_outcome_unknown). A
	// check never changes anything.
	for _, c := range []struct {
		source failingSource
		path   string
		code   string
	}{
		{failingSource{}, "/v1/spend", "source_outcome_unknown"},
		{failingSource{}, "/v1/refund", "source_outcome_unknown"},
		{failingSource{}, "/v1/reset", "source_outcome_unknown"},
		{failingSource{}, "/v1/check", "source_unavailable"},
		{failingSource{refused: true}, "/v1/spend", "source_unavailable"},
		{failingSource{refused: true}, "/v1/refund", "source_unavailable"},
		{failingSource{refused: true}, "/v1/reset", "source_unavailable"},
		{failingSource{refused: true}, "/v1/check", "source_unavailable"},
	} {
		rec := newServer(t, c.source, false).post(c.path, `{"limit":"Logins","id":"a"}`)
		if e := decode[wire.ErrorResponse](t, rec); rec.Code != 503 || e.Error.Code != c.code {
			t.Errorf("%s (refused %v): %d %+v, want 503 %s", c.path, c.source.refused, rec.Code, e, c.code)
		}
	}
	s := newServer(t, failingSource{}, false)
	if rec := s.do("GET", "/readyz", "", ""); rec.Code != 503 {
		t.Errorf("readyz with a failing source: %d, want 503", rec.Code)
	}
	// Bad input is still the client's error, whatever the source does.
	if rec := s.post("/v1/spend", `{"limit":"Nope","id":"a"}`); rec.Code != 400 {
		t.Errorf("bad input with a failing source: %d, want 400", rec.Code)
	}
}

// With fail-open, a failing source lets spends and checks through, marked
// degraded; refunds and resets still fail, and bad input is still a 400.
func TestFailOpen(t *testing.T) {
	s := newServer(t, failingSource{}, false, ratelimits.WithFailOpen())
	for _, path := range []string{"/v1/spend", "/v1/check"} {
		rec := s.post(path, `{"limit":"Logins","id":"a"}`)
		var got wire.BatchResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 || !got.Allowed || !got.Degraded {
			t.Errorf("%s: %d %s, want 200 allowed and degraded", path, rec.Code, rec.Body)
		}
	}
	for _, path := range []string{"/v1/refund", "/v1/reset"} {
		if rec := s.post(path, `{"limit":"Logins","id":"a"}`); rec.Code != 503 {
			t.Errorf("%s with fail-open: %d, want 503", path, rec.Code)
		}
	}
	// A view of one bucket has nothing true to show without the source:
	// it fails rather than invent an allowed decision.
	if rec := s.do("GET", "/v1/limits/Logins/a", "", ""); rec.Code != 503 {
		t.Errorf("GET /v1/limits/Logins/a with fail-open: %d %s, want 503", rec.Code, rec.Body)
	}
	if rec := s.post("/v1/spend", `{"limit":"Logins","id":"a","cost":9}`); rec.Code != 400 {
		t.Errorf("bad cost with fail-open: %d, want 400", rec.Code)
	}
	metrics := s.do("GET", "/metrics", "", "").Body.String()
	if !strings.Contains(metrics, "limiter_degraded_answers_total 2") {
		t.Error("degraded answers not counted")
	}
	if !strings.Contains(metrics, `limiter_decisions_total{limit="Logins",op="spend",outcome="degraded"} 1`) || strings.Contains(metrics, `outcome="allowed"`) {
		t.Errorf("fail-open answers must count as degraded, not allowed:\n%s", metrics)
	}
}

func TestPanicIs500(t *testing.T) {
	s := newServer(t, failingSource{panics: true}, false)
	rec := s.post("/v1/spend", `{"limit":"Logins","id":"a"}`)
	if e := decode[wire.ErrorResponse](t, rec); rec.Code != 500 || e.Error.Code != "internal" {
		t.Fatalf("panicking source: %d %+v, want 500 internal", rec.Code, e)
	}
	if rec := s.do("GET", "/healthz", "", ""); rec.Code != 200 {
		t.Fatalf("after a panic: healthz %d", rec.Code)
	}
}

// The panic's log line carries the stack, down to the frame that panicked.
func TestPanicLogsStack(t *testing.T) {
	l, _ := newLimiter(t, failingSource{panics: true})
	var logs bytes.Buffer
	h := httpapi.New(httpapi.Options{Limiter: l, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	req := httptest.NewRequest("POST", "/v1/spend", strings.NewReader(`{"limit":"Logins","id":"a"}`))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if line := logs.String(); !strings.Contains(line, "panic in handler") || !strings.Contains(line, "stack=") || !strings.Contains(line, "failingSource.fail") {
		t.Errorf("panic log without the stack of the panicking frame:\n%s", line)
	}
}

func BenchmarkSpendHandler(b *testing.B) {
	cfg, err := configfile.Parse("d", []byte(defaults), "o", nil)
	if err != nil {
		b.Fatal(err)
	}
	l, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.New())
	if err != nil {
		b.Fatal(err)
	}
	h := httpapi.New(httpapi.Options{Limiter: l})
	body := `{"limit":"Fast","id":"12345","cost":0}`
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/v1/spend", strings.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		_, _ = io.Copy(io.Discard, rec.Body)
	}
}

// A source failure is logged by route, never by path: the path of the
// subscriber view carries the subscriber's id.
func TestSourceFailureLogCarriesNoID(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		var opts []ratelimits.Option
		if failOpen {
			opts = append(opts, ratelimits.WithFailOpen())
		}
		l, _ := newLimiter(t, failingSource{}, opts...)
		var logs bytes.Buffer
		h := httpapi.New(httpapi.Options{Limiter: l, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		for _, req := range []*http.Request{
			httptest.NewRequest("GET", "/v1/limits/Logins/secret-subscriber", nil),
			httptest.NewRequest("POST", "/v1/spend", strings.NewReader(`{"limit":"Logins","id":"secret-subscriber"}`)),
		} {
			h.ServeHTTP(httptest.NewRecorder(), req)
		}
		if strings.Contains(logs.String(), "secret-subscriber") || !strings.Contains(logs.String(), "route=/v1/limits/{limit}") {
			t.Errorf("fail-open %v: the log names the subscriber or not the route:\n%s", failOpen, logs.String())
		}
	}
}
