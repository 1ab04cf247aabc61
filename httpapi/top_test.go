package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/decisionmetrics"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/source/memory"
	"github.com/limiter-dev/limiter/topdenied"
)

// newTopServer serves the test configuration with the top denied ids
// counted, and admin as the admin token when given.
func newTopServer(t *testing.T, admin ...string) *server {
	t.Helper()
	l, clk := newLimiter(t, memory.New(0))
	rec := topdenied.New(clk)
	reg := prometheus.NewRegistry()
	var tokens [][]byte
	for _, a := range admin {
		tokens = append(tokens, []byte(a))
	}
	h := httpapi.New(httpapi.Options{
		Limiter: l, Registry: reg, TopDenied: rec,
		Decisions: decisionmetrics.New(reg, decisionmetrics.WithDenials(rec)),
		Tokens:    bearer.NewTokens(nil, tokens),
	})
	return &server{t: t, h: h, clock: clk}
}

func TestTopDenied(t *testing.T) {
	s := newTopServer(t)
	for range 5 { // Logins allows 3 a minute: 2 denied
		s.post("/v1/spend", `{"limit": "Logins", "id": "alice"}`)
	}
	for range 4 { // 1 denied
		s.post("/v1/spend", `{"limit": "Logins", "id": "bob"}`)
	}
	s.post("/v1/check", `{"limit": "Logins", "id": "alice"}`) // a check denies nobody
	for range 21 {
		s.post("/v1/spend", `{"limit": "Fast", "id": "carol"}`)
	}

	rec := s.do(http.MethodGet, "/v1/admin/top?limit=Logins&window=5m", "", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	got := decode[wire.TopResponse](t, rec)
	if got.Limit != "Logins" || got.WindowS != 300 || len(got.IDs) != 2 ||
		got.IDs[0] != (wire.TopEntry{ID: "alice", Denied: 2}) || got.IDs[1] != (wire.TopEntry{ID: "bob", Denied: 1}) {
		t.Fatalf("top = %+v", got)
	}

	got = decode[wire.TopResponse](t, s.do(http.MethodGet, "/v1/admin/top?window=1h", "", ""))
	if got.Limit != "" || got.WindowS != 3600 || len(got.IDs) != 3 || got.IDs[0].Limit != "Logins" || got.IDs[0].ID != "alice" ||
		got.IDs[1] != (wire.TopEntry{Limit: "Fast", ID: "carol", Denied: 1}) {
		t.Fatalf("top of all = %+v", got)
	}

	s.clock.Add(7 * time.Minute)
	if got := decode[wire.TopResponse](t, s.do(http.MethodGet, "/v1/admin/top?limit=Logins", "", "")); len(got.IDs) != 0 {
		t.Fatalf("five-minute top 7 minutes on = %+v, want none", got)
	}
	if got := decode[wire.TopResponse](t, s.do(http.MethodGet, "/v1/admin/top?limit=Logins&window=1h", "", "")); len(got.IDs) != 2 {
		t.Fatalf("hour top 7 minutes on = %+v, want two", got)
	}
	// An empty list is a list, not null.
	if body := s.do(http.MethodGet, "/v1/admin/top?limit=Fast", "", "").Body.String(); !strings.Contains(body, `"ids":[]`) {
		t.Fatalf("empty top = %s", body)
	}
}

func TestTopDeniedRefusals(t *testing.T) {
	s := newTopServer(t)
	tests := []struct {
		query  string
		status int
		code   string
	}{
		{"?limit=Nope", 400, "unknown_limit"},
		{"?limit=", 400, "unknown_limit"},
		{"?window=5", 400, "invalid_argument"},
		{"?window=24h", 400, "invalid_argument"},
		{"?limit=Logins&limit=Fast", 400, "invalid_argument"},
		{"?limt=Logins", 400, "invalid_argument"},
		{"?limit=%zz", 400, "invalid_argument"},
		{"?window=" + strings.Repeat("x", 5000), 400, "invalid_argument"},
	}
	for _, tt := range tests {
		rec := s.do(http.MethodGet, "/v1/admin/top"+tt.query, "", "")
		if rec.Code != tt.status || !strings.Contains(rec.Body.String(), `"code":"`+tt.code+`"`) || rec.Body.Len() > 400 {
			t.Errorf("%.40s: %d %s, want %d %s", tt.query, rec.Code, rec.Body, tt.status, tt.code)
		}
	}
	if rec := s.do(http.MethodPost, "/v1/admin/top", "", ""); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", rec.Code)
	}
}

// The list is an admin's: an API token, or none, is refused.
func TestTopDeniedNeedsAdmin(t *testing.T) {
	s := newTopServer(t, "root-token")
	for _, auth := range []string{"", "Bearer wrong"} {
		req := httptest.NewRequest(http.MethodGet, "/v1/admin/top", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("auth %q: %d", auth, rec.Code)
		}
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/admin/top", nil)
	req.Header.Set("Authorization", "Bearer root-token")
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("admin token: %d %s", rec.Code, rec.Body)
	}
}
