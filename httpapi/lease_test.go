package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

const leaseDefaults = `
Exports:
  enum: 140
  id: account
  algorithm: concurrency
  count: 2
  period: 10m
Logins:
  enum: 101
  id: string
  burst: 3
  count: 3
  period: 1m
`

// newLeaseServer serves a concurrency limit on a memory source and a fake
// clock at start.
func newLeaseServer(t *testing.T) *server {
	t.Helper()
	cfg, err := configfile.Parse("defaults.yaml", []byte(leaseDefaults), "overrides.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(start)
	l, err := ratelimits.NewLimiter(cfg, memory.New(0), clk)
	if err != nil {
		t.Fatal(err)
	}
	return &server{t: t, h: httpapi.New(httpapi.Options{Limiter: l, MaxBatch: 10}), clock: clk}
}

// An acquire answers its lease and the lease's time to live; the headers
// give the slots as a quota of concurrent requests, with no window.
func TestLeaseAcquireReleaseRenew(t *testing.T) {
	s := newLeaseServer(t)
	rec := s.post("/v1/spend", `{"limit":"Exports","id":"7"}`)
	got := decode[wire.BatchResponse](t, rec)
	d := got.Decisions[0]
	if rec.Code != 200 || !d.Allowed || len(d.Lease) != 32 || d.LeaseExpiresInMS != 600_000 || d.Algorithm != "concurrency" ||
		d.Burst != 2 || d.Count != 2 || d.Period != "10m0s" || d.Remaining != 1 || d.ResetInMS != 600_000 {
		t.Fatalf("acquire = %d %+v", rec.Code, got)
	}
	if p, r := rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"); p != `"Exports";q=2;qu="concurrent-requests"` || r != `"Exports";r=1;t=600` {
		t.Errorf("headers: RateLimit-Policy %q, RateLimit %q", p, r)
	}
	lease := d.Lease
	s.post("/v1/spend", `{"limit":"Exports","id":"7"}`)
	rec = s.post("/v1/spend", `{"limit":"Exports","id":"7"}`)
	denied := decode[wire.BatchResponse](t, rec)
	if denied.Allowed || denied.Decisions[0].Lease != "" || rec.Header().Get("Retry-After") != "600" {
		t.Fatalf("third acquire = %+v, Retry-After %q; want denied, no lease, 600", denied, rec.Header().Get("Retry-After"))
	}
	// A check takes no lease and shows none.
	if c := decode[wire.BatchResponse](t, s.post("/v1/check", `{"limit":"Exports","id":"8"}`)); c.Decisions[0].Lease != "" || !c.Allowed {
		t.Fatalf("check = %+v", c)
	}
	body := `{"limit":"Exports","id":"7","lease":"` + lease + `"}`
	rec = s.post("/v1/renew", body)
	if r := decode[wire.BatchResponse](t, rec); rec.Code != 200 || !r.Allowed || r.RetryInMS != 0 || rec.Header().Get("Retry-After") != "" {
		t.Fatalf("renew = %d %+v", rec.Code, r)
	}
	rec = s.post("/v1/release", `{"transactions":[`+body+`]}`)
	if r := decode[wire.BatchResponse](t, rec); !r.Allowed || r.Remaining != 1 {
		t.Fatalf("release = %+v, want allowed with 1 left", r)
	}
	if r := decode[wire.BatchResponse](t, s.post("/v1/release", body)); r.Allowed {
		t.Fatalf("second release = %+v, want allowed false", r)
	}
}

func TestLeaseRefusals(t *testing.T) {
	s := newLeaseServer(t)
	valid := strings.Repeat("ab", 16)
	tests := []struct {
		name, path, body, code string
		index                  *int
	}{
		{"a lease that is no id", "/v1/release", `{"limit":"Exports","id":"7","lease":"ABC"}`, "invalid_lease", ptr(0)},
		{"a release of another algorithm", "/v1/release", `{"transactions":[{"limit":"Exports","id":"7","lease":"` + valid + `"},{"limit":"Logins","id":"a","lease":"` + valid + `"}]}`, "invalid_request", ptr(1)},
		{"a refund of a concurrency limit", "/v1/refund", `{"limit":"Exports","id":"7"}`, "invalid_request", ptr(0)},
		{"a release without its lease", "/v1/renew", `{"limit":"Exports","id":"7"}`, "invalid_request", ptr(0)},
		{"a release with a cost", "/v1/release", `{"limit":"Exports","id":"7","lease":"` + valid + `","cost":1}`, "unknown_field", ptr(0)},
		{"a null lease", "/v1/release", `{"limit":"Exports","id":"7","lease":null}`, "invalid_lease", ptr(0)},
		{"an empty batch", "/v1/renew", `{"transactions":[]}`, "empty_batch", nil},
		{"a lease that is a number", "/v1/renew", `{"transactions":[{"limit":"Exports","id":"7","lease":5}]}`, "invalid_lease", ptr(0)},
		{"a lease that is an object", "/v1/release", `{"limit":"Exports","id":"7","lease":{}}`, "invalid_lease", ptr(0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := s.post(tt.path, tt.body)
			e := decode[wire.ErrorResponse](t, rec)
			if rec.Code != http.StatusBadRequest || e.Error.Code != tt.code || (tt.index == nil) != (e.Error.Transaction == nil) ||
				(tt.index != nil && *tt.index != *e.Error.Transaction) {
				t.Errorf("%s %s = %d %+v, want 400 %s at %v", tt.path, tt.body, rec.Code, e, tt.code, tt.index)
			}
		})
	}
}

func ptr(i int) *int { return &i }

// With an Idempotency-Key, a replayed acquire answers the same lease.
func TestLeaseIdempotencyKey(t *testing.T) {
	s := newLeaseServer(t)
	send := func(path, body string) *wire.BatchResponse {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k-"+path)
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		got := decode[wire.BatchResponse](t, rec)
		return &got
	}
	first := send("/v1/spend", `{"limit":"Exports","id":"7"}`)
	again := send("/v1/spend", `{"limit":"Exports","id":"7"}`)
	if first.Decisions[0].Lease == "" || again.Decisions[0].Lease != first.Decisions[0].Lease || again.Remaining != 1 {
		t.Fatalf("replay = %+v, first %+v", again, first)
	}
	rel := `{"limit":"Exports","id":"7","lease":"` + first.Decisions[0].Lease + `"}`
	if r := send("/v1/release", rel); !r.Allowed {
		t.Fatalf("release = %+v", r)
	}
	if r := send("/v1/release", rel); !r.Allowed {
		t.Fatalf("replayed release = %+v, want the first answer", r)
	}
}

// GET /v1/limits shows a concurrency limit's count and period.
func TestLeaseLimitsListing(t *testing.T) {
	s := newLeaseServer(t)
	got := decode[wire.LimitsResponse](t, s.do(http.MethodGet, "/v1/limits", "", ""))
	for _, l := range got.Limits {
		if l.Limit == "Exports" {
			if l.Algorithm != "concurrency" || l.Default == nil || *l.Default != (wire.LimitSettings{Count: 2, Period: "10m0s"}) || l.SyncRate != nil {
				t.Errorf("Exports = %+v", l)
			}
			return
		}
	}
	t.Error("Exports is not listed")
}
