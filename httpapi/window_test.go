package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/internal/vectors"
	"github.com/limiter-dev/limiter/ratelimits"
)

const windowDefaults = `
API:
  enum: 120
  id: string
  algorithm: sliding-window
  count: 5
  period: 1m
  sync_rate: 0.5
Uploads:
  enum: 121
  id: string
  algorithm: fixed-window
  count: 3
  period: 10s
  sync_rate: -1
Logins:
  enum: 101
  id: string
  burst: 3
  count: 3
  period: 1m
`

const windowOverrides = `
- API:
    count: 20
    period: 1m
    ids:
      - id: gold
`

// newWindowServer serves window limits from the model source, which keeps
// windows exactly as every source must, on a fake clock at start (a whole
// minute, so windows of a minute and of 10s begin there).
func newWindowServer(t *testing.T) *server {
	t.Helper()
	cfg, err := configfile.Parse("defaults.yaml", []byte(windowDefaults), "overrides.yaml", []byte(windowOverrides))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(start)
	l, err := ratelimits.NewLimiter(cfg, vectors.NewModelSource(), clk)
	if err != nil {
		t.Fatal(err)
	}
	return &server{t: t, h: httpapi.New(httpapi.Options{Limiter: l}), clock: clk}
}

// A window decision is a GCRA one's fields with burst and count both the
// window's count, period the window, and its algorithm; the headers give
// the count and the window in seconds.
func TestWindowSpendAnswerAndHeaders(t *testing.T) {
	s := newWindowServer(t)
	rec := s.post("/v1/spend", `{"limit":"API","id":"alice","cost":3}`)
	got := decode[wire.BatchResponse](t, rec)
	// 3 of 5 spent at the window's start: 2 remain. The same spend fits
	// again 20s into the next window, when the 3 weigh (60−20)/60 × 3 = 2;
	// nothing counts any more two windows after this one's start.
	want := wire.DecisionResponse{Limit: "API", ID: "alice", Allowed: true, Remaining: 2, RetryInMS: 80000, ResetInMS: 120000,
		Burst: 5, Count: 5, Period: "1m0s", Algorithm: "sliding-window"}
	if rec.Code != 200 || !got.Allowed || len(got.Decisions) != 1 || got.Decisions[0] != want || got.RetryInMS != 80000 || got.ResetInMS != 120000 {
		t.Fatalf("%d %+v\nwant decision %+v", rec.Code, got, want)
	}
	for name, want := range map[string]string{"RateLimit-Policy": `"API";q=5;w=60`, "RateLimit": `"API";r=2;t=120`, "Retry-After": ""} {
		if h := rec.Header().Get(name); h != want {
			t.Errorf("%s = %q; want %q", name, h, want)
		}
	}

	// 30s later the window holds 3 of 5: a spend of 3 is denied, and
	// fits again 50s later (20s into the next window).
	s.clock.Add(30 * time.Second)
	rec = s.post("/v1/spend", `{"limit":"API","id":"alice","cost":3}`)
	got = decode[wire.BatchResponse](t, rec)
	want = wire.DecisionResponse{Limit: "API", ID: "alice", Allowed: false, Remaining: 2, RetryInMS: 50000, ResetInMS: 90000,
		Burst: 5, Count: 5, Period: "1m0s", Algorithm: "sliding-window"}
	if rec.Code != 200 || got.Allowed || got.Decisions[0] != want {
		t.Fatalf("denied: %d %+v\nwant decision %+v", rec.Code, got, want)
	}
	if h := rec.Header().Get("Retry-After"); h != "50" {
		t.Errorf("Retry-After = %q; want 50", h)
	}

	// A fixed window of 10s: what is spent comes back at the next window.
	s.clock.Add(3 * time.Second)
	rec = s.post("/v1/spend", `{"limit":"Uploads","id":"f","cost":3}`)
	got = decode[wire.BatchResponse](t, rec)
	want = wire.DecisionResponse{Limit: "Uploads", ID: "f", Allowed: true, Remaining: 0, RetryInMS: 7000, ResetInMS: 7000,
		Burst: 3, Count: 3, Period: "10s", Algorithm: "fixed-window"}
	if got.Decisions[0] != want || rec.Header().Get("RateLimit-Policy") != `"Uploads";q=3;w=10` {
		t.Fatalf("fixed window: %+v, policy %q\nwant decision %+v", got, rec.Header().Get("RateLimit-Policy"), want)
	}
}

// Every decision of a batch that mixes algorithms says its own.
func TestWindowMixedBatch(t *testing.T) {
	s := newWindowServer(t)
	got := decode[wire.BatchResponse](t, s.post("/v1/check", `{"transactions":[{"limit":"API","id":"a"},{"limit":"Logins","id":"a"},{"limit":"Uploads","id":"a"},{"limit":"API","id":"gold"}]}`))
	var algs []string
	for _, d := range got.Decisions {
		algs = append(algs, d.Algorithm)
	}
	if strings.Join(algs, " ") != "sliding-window gcra fixed-window sliding-window" || got.Decisions[3].Count != 20 || !got.Decisions[3].Override {
		t.Errorf("decisions %+v", got.Decisions)
	}
}

// A window limit's cost may be at most its count (the override's, for an
// overridden id): anything above is refused before anything is counted.
func TestWindowCostAboveCount(t *testing.T) {
	s := newWindowServer(t)
	for _, c := range []struct {
		body   string
		status int
	}{
		{`{"limit":"API","id":"a","cost":6}`, 400},
		{`{"limit":"API","id":"a","cost":5}`, 200},
		{`{"limit":"API","id":"gold","cost":21}`, 400},
		{`{"limit":"API","id":"gold","cost":20}`, 200},
		{`{"limit":"Uploads","id":"a","cost":4}`, 400},
	} {
		rec := s.post("/v1/check", c.body)
		if rec.Code != c.status {
			t.Errorf("%s: %d %s; want %d", c.body, rec.Code, rec.Body, c.status)
			continue
		}
		if c.status == 400 {
			if e := decode[wire.ErrorResponse](t, rec); e.Error.Code != "invalid_cost" || !strings.Contains(e.Error.Message, "exceeds") {
				t.Errorf("%s: %+v; want invalid_cost", c.body, e.Error)
			}
		}
	}
}

// GET /v1/limits gives every name's algorithm, and for a window its
// sync_rate and a default of count and period, without burst.
func TestWindowLimitsListing(t *testing.T) {
	s := newWindowServer(t)
	rec := s.do(http.MethodGet, "/v1/limits", "", "")
	body := rec.Body.String()
	got := decode[wire.LimitsResponse](t, rec)
	byName := map[string]wire.LimitResponse{}
	for _, l := range got.Limits {
		byName[l.Limit] = l
	}
	api, uploads, logins, orders := byName["API"], byName["Uploads"], byName["Logins"], byName["NewOrdersPerAccount"]
	if api.Algorithm != "sliding-window" || api.SyncRate == nil || *api.SyncRate != 0.5 || api.Default == nil ||
		*api.Default != (wire.LimitSettings{Count: 5, Period: "1m0s"}) || api.Overrides != 1 {
		t.Errorf("API = %+v", api)
	}
	if uploads.Algorithm != "fixed-window" || uploads.SyncRate == nil || *uploads.SyncRate != -1 {
		t.Errorf("Uploads = %+v", uploads)
	}
	if logins.Algorithm != "gcra" || logins.SyncRate != nil || *logins.Default != (wire.LimitSettings{Burst: 3, Count: 3, Period: "1m0s"}) {
		t.Errorf("Logins = %+v", logins)
	}
	if orders.Algorithm != "gcra" || orders.Default != nil {
		t.Errorf("NewOrdersPerAccount = %+v", orders)
	}
	// The raw answer: a window's default has no burst, a GCRA name no sync_rate.
	var raw struct{ Limits []map[string]json.RawMessage }
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, l := range raw.Limits {
		switch string(l["limit"]) {
		case `"API"`:
			seen++
			if string(l["default"]) != `{"count":5,"period":"1m0s"}` || string(l["sync_rate"]) != "0.5" {
				t.Errorf("API: default %s, sync_rate %s", l["default"], l["sync_rate"])
			}
		case `"Logins"`:
			seen++
			if _, has := l["sync_rate"]; has {
				t.Errorf("Logins has a sync_rate: %v", l)
			}
		}
	}
	if seen != 2 {
		t.Errorf("the raw answer lists API and Logins %d times in all; want 2", seen)
	}
}

// GET /v1/limits/{limit}/{id} of a window limit shows its effective count
// and period, its algorithm and its name's sync_rate; a GCRA one shows no
// sync_rate.
func TestWindowSubscriberView(t *testing.T) {
	s := newWindowServer(t)
	s.post("/v1/spend", `{"limit":"API","id":"gold","cost":4}`)
	rec := s.do(http.MethodGet, "/v1/limits/API/gold", "", "")
	want := `{"limit":"API","id":"gold","allowed":true,"remaining":16,"retry_in_ms":0,"reset_in_ms":120000,"unlimited":false,"burst":20,"count":20,"period":"1m0s","override":true,"algorithm":"sliding-window","sync_rate":0.5}` + "\n"
	if rec.Code != 200 || rec.Body.String() != want {
		t.Errorf("GET /v1/limits/API/gold = %d\n%s\nwant\n%s", rec.Code, rec.Body, want)
	}
	rec = s.do(http.MethodGet, "/v1/limits/Uploads/x", "", "")
	if d := decode[wire.DecisionResponse](t, rec); d.SyncRate == nil || *d.SyncRate != -1 || d.Algorithm != "fixed-window" {
		t.Errorf("GET /v1/limits/Uploads/x = %s", rec.Body)
	}
	rec = s.do(http.MethodGet, "/v1/limits/Logins/a", "", "")
	if strings.Contains(rec.Body.String(), "sync_rate") || !strings.Contains(rec.Body.String(), `"algorithm":"gcra"`) {
		t.Errorf("GET /v1/limits/Logins/a = %s", rec.Body)
	}
	// A spend's decisions never carry sync_rate.
	if body := s.post("/v1/spend", `{"limit":"API","id":"gold"}`).Body.String(); strings.Contains(body, "sync_rate") {
		t.Errorf("a spend answer shows sync_rate: %s", body)
	}
}
