package httpapi_test

import (
	"bytes"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/source/memory"
)

// newRegistryServer serves the test configuration with its metrics in reg
// and its access log in logs.
func newRegistryServer(t *testing.T, reg *prometheus.Registry, logs *bytes.Buffer) http.Handler {
	t.Helper()
	l, clk := newLimiter(t, memory.New(0))
	h := httpapi.New(httpapi.Options{
		Limiter: l, Registry: reg, AccessLog: true,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	return httpapi.WithDebugClock(h, clk, bearer.NewTokens(nil, nil))
}

// series counts the time series in reg, by label name and value.
func series(t *testing.T, reg *prometheus.Registry) (n int, values map[string]map[string]bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values = map[string]map[string]bool{}
	for _, f := range families {
		n += len(f.GetMetric())
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if values[lp.GetName()] == nil {
					values[lp.GetName()] = map[string]bool{}
				}
				values[lp.GetName()][lp.GetValue()] = true
			}
		}
	}
	return n, values
}

// randomToken is a valid HTTP method name of up to max characters.
func randomToken(rng *rand.Rand, max int) string {
	const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!~*'+"
	b := make([]byte, 1+rng.IntN(max))
	for i := range b {
		b[i] = chars[rng.IntN(len(chars))]
	}
	return string(b)
}

// randomPath is a path that sometimes starts like a real route.
func randomPath(rng *rand.Rand) string {
	prefixes := []string{"/", "/v1/", "/v1/limits/", "/v1/limits/Logins/", "/debug/", "/metrics/",
		"/v1/erl/", "/v1/erl/ratecounters/", "/v1/erl/ratecounters/Logins/", "/v1/erl/penaltyboxes/Logins/"}
	var b strings.Builder
	b.WriteString(prefixes[rng.IntN(len(prefixes))])
	for i := range rng.IntN(4) {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(randomToken(rng, 12))
	}
	return b.String()
}

// No label value and no access log field is taken from what a client
// sent: random methods and paths add no series once each fixed label
// value has been seen, and never reach the log.
func TestClientTextNeverBecomesALabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	h := newRegistryServer(t, reg, &logs)
	rng := rand.New(rand.NewPCG(1, 2))
	methods := []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"}
	send := func(n int) {
		for range n {
			method := randomToken(rng, 1024)
			if rng.IntN(4) == 0 {
				method = methods[rng.IntN(len(methods))]
			}
			req := httptest.NewRequest(http.MethodGet, randomPath(rng), nil)
			req.Method = method
			h.ServeHTTP(httptest.NewRecorder(), req)
		}
	}
	// The first 10,000 requests meet every label value they can; the next
	// 10,000 must add no series.
	send(10_000)
	before, _ := series(t, reg)
	logs.Reset()
	send(10_000)
	after, values := series(t, reg)
	if after != before {
		t.Errorf("%d series after 10,000 random requests, %d after 10,000 more: client text makes series", before, after)
	}
	fixed := map[string]bool{"other": true, "GET": true, "HEAD": true, "POST": true, "PUT": true, "DELETE": true,
		"PATCH": true, "OPTIONS": true, "CONNECT": true, "TRACE": true}
	for m := range values["method"] {
		if !fixed[m] {
			t.Errorf("%d method label values, such as %.40q, outside the fixed set", len(values["method"]), m)
			break
		}
	}
	routes := map[string]bool{"unmatched": true, "/v1/spend": true, "/v1/check": true, "/v1/refund": true, "/v1/reset": true,
		"/v1/limits": true, "/v1/limits/{limit}": true, "/healthz": true, "/readyz": true, "/metrics": true, "/debug/clock": true,
		"/v1/erl/check_rate": true, "/v1/erl/check_rates": true, "/v1/erl/ratecounters/{ratecounter}/increment": true,
		"/v1/erl/ratecounters/{ratecounter}": true, "/v1/erl/penaltyboxes/{penaltybox}/add": true,
		"/v1/erl/penaltyboxes/{penaltybox}": true, "/v1/erl/penaltyboxes/{penaltybox}/remove": true}
	for r := range values["route"] {
		if !routes[r] {
			t.Errorf("route label %.60q is not a registered pattern", r)
			break
		}
	}
	for line := range strings.Lines(logs.String()) {
		if len(line) > 300 {
			t.Fatalf("access log line of %d bytes: %.200s", len(line), line)
		}
	}
}

// A 405 names the methods the path serves; a method on a path no method
// serves is a 404, whatever the method.
func TestMethodNotAllowedSaysWhatIs(t *testing.T) {
	s := newServer(t, memory.New(0), true)
	tests := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/v1/spend", 405, "POST"},
		{"PUT", "/v1/reset", 405, "POST"},
		{"POST", "/healthz", 405, "GET, HEAD"},
		{"DELETE", "/v1/limits/Logins/a", 405, "GET, HEAD"},
		{"POST", "/v1/limits", 405, "GET, HEAD"},
		{"PATCH", "/debug/clock", 405, "GET, HEAD, POST"},
		{"BREW", "/metrics", 405, "GET, HEAD"},
		{"BREW", "/no/such/path", 404, ""},
		{"GET", "/no/such/path", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rec := s.do(tt.method, tt.path, "", "")
			if rec.Code != tt.status || rec.Header().Get("Allow") != tt.allow {
				t.Fatalf("status %d, Allow %q; want %d, %q: %s", rec.Code, rec.Header().Get("Allow"), tt.status, tt.allow, rec.Body)
			}
			e := decode[wire.ErrorResponse](t, rec)
			if want := map[int]string{404: "not_found", 405: "method_not_allowed"}[tt.status]; e.Error.Code != want {
				t.Errorf("code %q, want %q", e.Error.Code, want)
			}
		})
	}
}

// HEAD answers wherever GET does, with GET's status and headers and no
// body.
func TestHeadWhereverGet(t *testing.T) {
	s := newServer(t, memory.New(0), true)
	srv := httptest.NewServer(s.h)
	defer srv.Close()
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/v1/limits", "/v1/limits/Logins/a", "/debug/clock"} {
		get, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		get.Body.Close()
		head, err := http.Head(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(head.Body)
		head.Body.Close()
		if head.StatusCode != 200 || get.StatusCode != 200 || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") || body.Len() != 0 {
			t.Errorf("%s: HEAD %d %q with %d body bytes; GET %d %q", path, head.StatusCode, head.Header.Get("Content-Type"), body.Len(), get.StatusCode, get.Header.Get("Content-Type"))
		}
	}
}
