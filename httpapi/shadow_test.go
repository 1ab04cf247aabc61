package httpapi_test

import (
	"net/http/httptest"
	"testing"

	"github.com/jmhodges/clock"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

const shadowDefaults = `
Logins:
  enum: 101
  id: string
  burst: 3
  count: 3
  period: 1m
NewLimit:
  enum: 102
  id: string
  burst: 1
  count: 1
  period: 1m
  shadow: true
`

// A shadow limit rolled out beside an enforced one: every answer shows
// what it decided, marked shadow, but only the enforced limit denies,
// decides the headers, and the would-be denials are counted.
func TestShadowLimitOverHTTP(t *testing.T) {
	cfg, err := configfile.Parse("defaults.yaml", []byte(shadowDefaults), "overrides.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(start)
	l, err := ratelimits.NewLimiter(cfg, memory.New(0), clk)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s := &server{t: t, h: httpapi.New(httpapi.Options{Limiter: l, Registry: reg}), clock: clk}
	body := `{"transactions":[{"limit":"Logins","id":"a"},{"limit":"NewLimit","id":"a"}]}`

	for i, wantShadowAllowed := range []bool{true, false, false} {
		rec := s.post("/v1/spend", body)
		if rec.Code != 200 {
			t.Fatalf("spend %d: status %d: %s", i, rec.Code, rec.Body)
		}
		if got := rec.Header().Get("RateLimit-Policy"); got != `"Logins";q=3;w=60` {
			t.Errorf("spend %d: RateLimit-Policy %q, want the enforced limit's", i, got)
		}
		got := decode[wire.BatchResponse](t, rec)
		if !got.Allowed || got.Remaining != int64(2-i) {
			t.Errorf("spend %d: batch allowed %v remaining %d, want allowed with %d left", i, got.Allowed, got.Remaining, 2-i)
		}
		if d := got.Decisions[1]; !d.Shadow || d.Allowed != wantShadowAllowed {
			t.Errorf("spend %d: shadow decision %+v, want shadow with allowed %v", i, d, wantShadowAllowed)
		}
		if got.Decisions[0].Shadow {
			t.Errorf("spend %d: the enforced decision is marked shadow", i)
		}
	}
	if n := counterSum(t, reg, "limiter_shadow_denials_total"); n != 2 {
		t.Errorf("limiter_shadow_denials_total = %v, want 2", n)
	}

	// A check answers the same way and counts under its own op.
	rec := s.post("/v1/check", `{"limit":"NewLimit","id":"a"}`)
	got := decode[wire.BatchResponse](t, rec)
	if !got.Allowed || got.Decisions[0].Allowed || !got.Decisions[0].Shadow || rec.Header().Get("RateLimit") != "" {
		t.Errorf("check of the shadow limit alone: %+v, headers %v; want allowed, its decision denied, no RateLimit headers", got, rec.Header())
	}

	// GET /v1/limits says which names are shadow limits.
	req := httptest.NewRequest("GET", "/v1/limits", nil)
	lrec := httptest.NewRecorder()
	s.h.ServeHTTP(lrec, req)
	limits := decode[wire.LimitsResponse](t, lrec)
	shadows := map[string]bool{}
	for _, lim := range limits.Limits {
		shadows[lim.Limit] = lim.Shadow
	}
	if !shadows["NewLimit"] || shadows["Logins"] {
		t.Errorf("GET /v1/limits shadow flags %v, want NewLimit only", shadows)
	}
}

// counterSum sums the series of a counter family in reg, and fails the
// test if any of them is labelled with the enforced limit.
func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		total := 0.0
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "limit" && l.GetValue() != "NewLimit" {
					t.Errorf("%s counted limit %q", name, l.GetValue())
				}
			}
			total += m.GetCounter().GetValue()
		}
		return total
	}
	t.Fatalf("no %s in the registry", name)
	return 0
}
