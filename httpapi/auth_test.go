package httpapi_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/source/memory"
)

func newAuthServer(t *testing.T, api, admin []string, reload func() error) http.Handler {
	t.Helper()
	return newAuthServerClock(t, api, admin, reload, nil)
}

// newAuthServerClock is newAuthServer with /debug/clock on clk, when set.
func newAuthServerClock(t *testing.T, api, admin []string, reload func() error, clk clock.FakeClock) http.Handler {
	t.Helper()
	l, _ := newLimiter(t, memory.New(0))
	toBytes := func(ss []string) (out [][]byte) {
		for _, s := range ss {
			out = append(out, []byte(s))
		}
		return out
	}
	tokens := bearer.NewTokens(toBytes(api), toBytes(admin))
	h := httpapi.New(httpapi.Options{Limiter: l, Tokens: tokens, Reload: reload})
	if clk != nil {
		h = httpapi.WithDebugClock(h, clk, tokens)
	}
	return h
}

func call(h http.Handler, method, path, token, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Who may do what, for each way the two token files can be set.
func TestTokens(t *testing.T) {
	const spend, reset, reload = "/v1/spend", "/v1/reset", "/v1/admin/reload"
	const body = `{"limit":"Logins","id":"a"}`
	ok := func() error { return nil }
	tests := []struct {
		name       string
		api, admin []string
		path       string
		token      string
		want       int
	}{
		{"no tokens configured: open", nil, nil, spend, "", 200},
		{"no tokens configured: reset open", nil, nil, reset, "", 200},
		{"api tokens: missing token", []string{"t1", "t2"}, nil, spend, "", 401},
		{"api tokens: wrong token", []string{"t1", "t2"}, nil, spend, "t3", 401},
		{"api tokens: prefix of a token", []string{"t1", "t2"}, nil, spend, "t", 401},
		{"api tokens: second token", []string{"t1", "t2"}, nil, spend, "t2", 200},
		{"api tokens only: reset takes an api token", []string{"t1"}, nil, reset, "t1", 200},
		{"admin tokens: reset refuses an api token", []string{"t1"}, []string{"boss"}, reset, "t1", 401},
		{"admin tokens: reset takes an admin token", []string{"t1"}, []string{"boss"}, reset, "boss", 200},
		{"admin tokens: reload refuses an api token", []string{"t1"}, []string{"boss"}, reload, "t1", 401},
		{"admin tokens: reload takes an admin token", []string{"t1"}, []string{"boss"}, reload, "boss", 200},
		{"admin tokens: an admin token may spend", []string{"t1"}, []string{"boss"}, spend, "boss", 200},
		{"admin tokens only: spend stays open", nil, []string{"boss"}, spend, "", 200},
		{"admin tokens only: reset needs one", nil, []string{"boss"}, reset, "", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newAuthServer(t, tt.api, tt.admin, ok)
			b := body
			if tt.path == reload {
				b = ""
			}
			rec := call(h, "POST", tt.path, tt.token, b)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
			}
			if tt.want == 401 {
				if !strings.Contains(rec.Body.String(), `"code":"unauthorized"`) || rec.Header().Get("WWW-Authenticate") == "" {
					t.Errorf("401 without the JSON error or WWW-Authenticate: %v %s", rec.Header(), rec.Body)
				}
			}
		})
	}
}

// The 401 says how to send a token in the words a person would type:
// JSON answers are not escaped for HTML, so "<token>" stays "<token>" on
// the wire instead of "\u003ctoken\u003e".
func TestUnauthorizedMessageIsNotHTMLEscaped(t *testing.T) {
	h := newAuthServer(t, []string{"t1"}, nil, nil)
	rec := call(h, "POST", "/v1/spend", "", `{"limit":"Logins","id":"a"}`)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401: %s", rec.Code, rec.Body)
	}
	const want = `"message":"a valid bearer token is required (Authorization: Bearer <token>)"`
	if !strings.Contains(rec.Body.String(), want) {
		t.Errorf("body %s does not contain %s", rec.Body, want)
	}
}

// A refused call changes nothing, and health and metrics need no token.
func TestRefusedCallChangesNothing(t *testing.T) {
	h := newAuthServer(t, []string{"t1"}, nil, nil)
	for range 5 {
		call(h, "POST", "/v1/spend", "wrong", `{"limit":"Logins","id":"a"}`)
	}
	rec := call(h, "GET", "/v1/limits/Logins/a", "t1", "")
	if !strings.Contains(rec.Body.String(), `"remaining":3`) {
		t.Fatalf("refused spends changed the bucket: %s", rec.Body)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if rec := call(h, "GET", path, "", ""); rec.Code != 200 {
			t.Errorf("%s without a token: %d", path, rec.Code)
		}
	}
	// Without a Reload function the admin route does not exist.
	if rec := call(h, "POST", "/v1/admin/reload", "t1", ""); rec.Code != 404 {
		t.Errorf("reload without a reloader: %d, want 404", rec.Code)
	}
}

func TestReloadEndpointReportsFailure(t *testing.T) {
	h := newAuthServer(t, nil, nil, func() error { return errors.New("bad.yaml:3: Logins: burst must be positive") })
	rec := call(h, "POST", "/v1/admin/reload", "", "")
	if rec.Code != 422 || !strings.Contains(rec.Body.String(), "bad.yaml:3") || !strings.Contains(rec.Body.String(), "reload_failed") {
		t.Fatalf("failed reload: %d %s", rec.Code, rec.Body)
	}
}

// /debug/clock needs what reset needs: an admin token when admin tokens
// are set, an API token when only those are, nothing when neither is. A
// refused call leaves the clock where it was.
func TestDebugClockTokens(t *testing.T) {
	const move = `{"advance":"1h"}`
	tests := []struct {
		name, method string
		api, admin   []string
		token        string
		want         int
	}{
		{"no tokens configured: open", "POST", nil, nil, "", 200},
		{"no tokens configured: read open", "GET", nil, nil, "", 200},
		{"admin tokens: no token", "POST", []string{"t1"}, []string{"boss"}, "", 401},
		{"admin tokens: an api token is not enough", "POST", []string{"t1"}, []string{"boss"}, "t1", 401},
		{"admin tokens: reading needs one too", "GET", []string{"t1"}, []string{"boss"}, "t1", 401},
		{"admin tokens: head needs one too", "HEAD", []string{"t1"}, []string{"boss"}, "", 401},
		{"admin tokens: an admin token moves it", "POST", []string{"t1"}, []string{"boss"}, "boss", 200},
		{"admin tokens: an admin token reads it", "GET", []string{"t1"}, []string{"boss"}, "boss", 200},
		{"admin tokens only: no token", "POST", nil, []string{"boss"}, "", 401},
		{"admin tokens only: an admin token", "POST", nil, []string{"boss"}, "boss", 200},
		{"api tokens only: no token", "POST", []string{"t1"}, nil, "", 401},
		{"api tokens only: an api token", "POST", []string{"t1"}, nil, "t1", 200},
		{"api tokens only: reading takes an api token", "GET", []string{"t1"}, nil, "t1", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake()
			before := clk.Now()
			h := newAuthServerClock(t, tt.api, tt.admin, nil, clk)
			body := ""
			if tt.method == "POST" {
				body = move
			}
			rec := call(h, tt.method, "/debug/clock", tt.token, body)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
			}
			moved := !clk.Now().Equal(before)
			if wantMoved := tt.method == "POST" && tt.want == 200; moved != wantMoved {
				t.Errorf("clock moved: %v, want %v", moved, wantMoved)
			}
		})
	}
}
