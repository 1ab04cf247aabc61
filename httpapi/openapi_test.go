//go:build !limiter_fuzz

package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/jmhodges/clock"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/decisionmetrics"
	"github.com/limiter-dev/limiter/forwardauth"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
	"github.com/limiter-dev/limiter/topdenied"
)

// The configuration the OpenAPI tests serve: a limit of each algorithm, a
// lockout, two rate counters, an id kind whose ids hold "/", a shadow
// limit, an override, and forward-auth rules with each missing action,
// two deny statuses and an answer without a body (expose: none).
const (
	contractDefaults = `
Plain:
  enum: 201
  id: string
  burst: 5
  count: 5
  period: 1s
Lockout:
  enum: 202
  id: string
  burst: 3
  count: 3
  period: 1m
  penalty: 15m
PerIP:
  enum: 203
  id: ip
  algorithm: rate-counter
  window: 10s
  rate: 10
  penalty: 2m
Burst:
  enum: 204
  id: ip
  algorithm: rate-counter
  window: 1s
  rate: 20
  penalty: 1m
Ranges:
  enum: 205
  id: ipv6-range
  burst: 2
  count: 2
  period: 500ms
Window:
  enum: 206
  id: string
  algorithm: sliding-window
  count: 10
  period: 1m
  sync_rate: 0
Shadowed:
  enum: 207
  id: string
  burst: 1
  count: 1
  period: 1h
  shadow: true
Monthly:
  enum: 208
  id: string
  algorithm: calendar
  count: 100
  period: month
  timezone: Europe/Paris
  penalty: 1h
Slots:
  enum: 209
  id: string
  algorithm: concurrency
  count: 2
  period: 1m
`
	contractOverrides = `
- Plain:
    burst: 10
    count: 10
    period: 1s
    ids:
      - id: vip
`
	contractRules = `
trusted_proxies: [192.0.2.1/32]
rules:
  api:
    limits:
      - limit: Plain
        id: header:X-Api-Key
      - limit: PerIP
        id: client_ip
  nginx:
    limits:
      - limit: Plain
        id: header:X-Api-Key
    deny_status: 403
  open:
    limits:
      - limit: Plain
        id: header:X-Api-Key
    missing: allow
  ranges:
    limits:
      - limit: Ranges
        id: header:X-Range
  quiet:
    limits:
      - limit: Plain
        id: header:X-Api-Key
    expose: none
`
)

// The tokens of the handlers built with tokens.
const (
	apiToken   = "api-secret"
	adminToken = "admin-secret"
)

// contractOptions say how to build a handler for the OpenAPI tests.
type contractOptions struct {
	source      ratelimits.Source
	failOpen    bool
	tokens      bool
	fakeClock   bool
	omitMetrics bool
	reload      *reloadHook
	// top, when set, answers /v1/admin/top instead of the denials the
	// handler counts.
	top topdenied.Lister
}

// failingTop is a top list whose store fails, or that panics.
type failingTop struct{ panics bool }

func (f failingTop) Top(context.Context, string, topdenied.Window) ([]topdenied.Entry, error) {
	if f.panics {
		panic("top list panics")
	}
	return nil, errors.New("connection refused")
}

// reloadHook is a handler's Reload: it succeeds, fails or panics as set.
type reloadHook struct {
	err    error
	panics bool
}

func (r *reloadHook) reload() error {
	if r.panics {
		panic("reload bug")
	}
	return r.err
}

// status answers GET /v1/admin/reload: a start, then a failed attempt.
func (r *reloadHook) status() wire.ReloadStatusResponse {
	if r.panics {
		panic("reload status bug")
	}
	inUse := wire.ReloadAttempt{At: "2026-11-22T00:00:00Z", Trigger: "startup", OK: true, Files: []wire.ReloadFile{
		{File: "defaults", Path: "defaults.yaml", Entries: "3"}, {File: "overrides", Path: "overrides.yaml", Entries: "none"}}}
	return wire.ReloadStatusResponse{InUse: inUse, LastAttempt: wire.ReloadAttempt{At: "2026-11-22T00:01:00Z", Trigger: "SIGHUP",
		Problems: []string{"defaults.yaml:3: burst must be positive"}}}
}

// newContractHandler serves the contract configuration on a fake clock:
// bodies of at most 2048 bytes, batches of at most 5.
func newContractHandler(t *testing.T, o contractOptions) http.Handler {
	t.Helper()
	cfg, err := configfile.Parse("defaults.yaml", []byte(contractDefaults), "overrides.yaml", []byte(contractOverrides))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := configfile.ParseForwardAuth("forward-auth.yaml", []byte(contractRules), cfg)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(start)
	var lopts []ratelimits.Option
	if o.failOpen {
		lopts = append(lopts, ratelimits.WithFailOpen())
	}
	src := o.source
	if src == nil {
		src = memory.New(0)
	}
	l, err := ratelimits.NewLimiter(cfg, src, clk, lopts...)
	if err != nil {
		t.Fatal(err)
	}
	tokens := bearer.NewTokens(nil, nil)
	if o.tokens {
		tokens = bearer.NewTokens([][]byte{[]byte(apiToken)}, [][]byte{[]byte(adminToken)})
	}
	reload := &reloadHook{}
	if o.reload != nil {
		reload = o.reload
	}
	reg := prometheus.NewRegistry()
	counted := topdenied.New(clk)
	top := o.top
	if top == nil {
		top = counted
	}
	h := httpapi.New(httpapi.Options{
		Limiter:      l,
		Registry:     reg,
		Decisions:    decisionmetrics.New(reg, decisionmetrics.WithDenials(counted)),
		TopDenied:    top,
		MaxBodyBytes: 2048,
		MaxBatch:     5,
		Tokens:       tokens,
		Reload:       reload.reload,
		ReloadStatus: reload.status,
		ForwardAuth:  func() *forwardauth.Rules { return rules },
		OmitMetrics:  o.omitMetrics,
	})
	if o.fakeClock {
		h = httpapi.WithDebugClock(h, clk, tokens)
	}
	return h
}

// The document is a valid OpenAPI 3.1 document, and every operation has
// an id of its own.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	c := loadContract(t)
	if !c.doc.IsOpenAPI31OrLater() || c.doc.IsOpenAPI32OrLater() {
		t.Errorf("openapi %q, want 3.1.x", c.doc.OpenAPI)
	}
	seen := map[string]string{}
	for _, p := range c.paths {
		for m, op := range p.item.Operations() {
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", m, p.template)
			}
			if other, ok := seen[op.OperationID]; ok {
				t.Errorf("operationId %q on both %s and %s %s", op.OperationID, other, m, p.template)
			}
			seen[op.OperationID] = m + " " + p.template
		}
	}
}

// The document describes exactly the routes the router has: a route added
// without being described, or described and then removed, fails here.
func TestOpenAPIRoutesAreTheRoutersRoutes(t *testing.T) {
	c := loadContract(t)
	h := newContractHandler(t, contractOptions{})
	routes, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("httpapi.New returned a %T, not a chi router", h)
	}
	var served []string
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served = append(served, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// /debug/clock is mounted beside the router, and only on a fake
	// clock; its methods are compared with the Allow header it sends.
	const clockPath = "/debug/clock"
	var documented, clockMethods []string
	for _, p := range c.paths {
		for _, m := range p.methods() {
			if p.template == clockPath {
				clockMethods = append(clockMethods, m)
				continue
			}
			documented = append(documented, m+" "+routerPattern(p))
		}
	}
	slices.Sort(served)
	slices.Sort(documented)
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("the router serves %s, which openapi.json does not describe", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(served, d) {
			t.Errorf("openapi.json describes %s, which the router does not serve", d)
		}
	}

	clockHandler := newContractHandler(t, contractOptions{fakeClock: true})
	rec := c.run(t, clockHandler, exchange{name: "a method /debug/clock lacks", method: "PUT", path: clockPath, status: 405, code: "method_not_allowed"})
	var want []string
	for _, m := range standardMethodOrder() {
		if slices.Contains(clockMethods, m) {
			want = append(want, m)
		}
	}
	if got := rec.Header().Get("Allow"); got != strings.Join(want, ", ") {
		t.Errorf("/debug/clock serves %s; openapi.json describes %v", got, want)
	}
}

// routerPattern is a document path as the router spells it: a parameter
// that takes the rest of the path is the router's catch-all "*".
func routerPattern(p contractPath) string {
	if p.rest == "" {
		return p.template
	}
	return strings.TrimSuffix(p.template, "{"+p.rest+"}") + "*"
}

// The service serves the document of the repository as it is, to anyone.
func TestOpenAPIServedAsItIs(t *testing.T) {
	file, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	h := newContractHandler(t, contractOptions{tokens: true})
	for _, method := range []string{"GET", "HEAD"} {
		rec := call(h, method, "/openapi.json", "", "")
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s /openapi.json without a token: %d %q", method, rec.Code, rec.Header().Get("Content-Type"))
		}
		if got, want := rec.Header().Get("Content-Length"), strconv.Itoa(len(file)); got != want {
			t.Errorf("%s /openapi.json: Content-Length %s, want %s", method, got, want)
		}
		if method == "GET" && rec.Body.String() != string(file) {
			t.Errorf("GET /openapi.json is not httpapi/openapi.json")
		}
	}
}
