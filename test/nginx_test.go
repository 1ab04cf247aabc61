package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/httpapi/wire"
)

// nginxDefaults are the limits the nginx tests count with: the bundled
// names with small bursts, so that a few requests reach a denial, and
// four generous limits that record what nginx tells the limiter about a
// request (its path, method, host and the client's Authorization).
const nginxDefaults = `APIRequestsPerKey:
  enum: 102
  id: string
  burst: 2
  count: 2
  period: 1m
RequestsPerClientIP:
  enum: 106
  id: ip
  burst: 3
  count: 3
  period: 1m
PasswordResetsPerIP:
  enum: 103
  id: ip
  burst: 1
  count: 1
  period: 1h
SeenPath:
  enum: 120
  id: string
  burst: 1000
  count: 1000
  period: 1h
SeenMethod:
  enum: 121
  id: string
  burst: 1000
  count: 1000
  period: 1h
SeenHost:
  enum: 122
  id: string
  burst: 1000
  count: 1000
  period: 1h
SeenAuthorization:
  enum: 123
  id: string
  burst: 1000
  count: 1000
  period: 1h
`

// nginxRules are the rules the shipped nginx configuration asks, as the
// bundled forward-auth file has them (deny_status 403, for nginx;
// password-reset shows no RateLimit headers, expose: none), with %s the
// trusted proxies. site also records, without ever denying, what nginx
// says about each request; a request without an Authorization header
// leaves that limit out (missing: allow).
const nginxRules = `trusted_proxies: [%s]
rules:
  api-nginx:
    limits:
      - limit: APIRequestsPerKey
        id: header:X-Api-Key
    deny_status: 403
  site:
    limits:
      - limit: RequestsPerClientIP
        id: client_ip
      - limit: SeenPath
        id: path
      - limit: SeenMethod
        id: method
      - limit: SeenHost
        id: host
      - limit: SeenAuthorization
        id: header:Authorization
    missing: allow
    deny_status: 403
  password-reset:
    limits:
      - limit: PasswordResetsPerIP
        id: client_ip
    deny_status: 403
    expose: none
`

// nginxStack is a limiter, the application and nginx in front of both,
// with the shipped configuration.
type nginxStack struct {
	limiter *limiterProc
	app     *appServer
	nginx   *nginxProc
	env     map[string]string
	args    []string
}

// startNginxStack starts the three on nginxDefaults and rules, the limiter
// on the fake clock and requiring token.
func startNginxStack(t *testing.T, rules, token string, extraEnv map[string]string) *nginxStack {
	t.Helper()
	dir := t.TempDir()
	s := &nginxStack{
		env: map[string]string{
			"LIMITER_DEFAULTS":     writeFile(t, dir, "defaults.yaml", nginxDefaults),
			"LIMITER_OVERRIDES":    writeFile(t, dir, "no-overrides.yaml", "[]\n"),
			"LIMITER_FORWARD_AUTH": writeFile(t, dir, "forward-auth.yaml", rules),
			"LIMITER_FAKECLOCK":    fakeClockStart,
		},
		args: []string{"--api-token-file", writeFile(t, dir, "api.tokens", token+"\n")},
	}
	for k, v := range extraEnv {
		s.env[k] = v
	}
	s.limiter = startLimiter(t, procOptions{Env: s.env, Args: s.args})
	s.app = newAppServer(t)
	s.nginx = startNginx(t, s.limiter.URL, s.app.URL)
	return s
}

// remaining reads a bucket from the limiter directly: a cost-0 check,
// which spends nothing.
func (s *nginxStack) remaining(t *testing.T, limit, id string) int64 {
	t.Helper()
	return checkRemaining(t, s.limiter, nginxToken, limit, id)
}

// passes asserts that a request went through nginx to the application,
// with the limiter's RateLimit headers when want names them.
func (s *nginxStack) passes(t *testing.T, r response, wantRateLimit string) {
	t.Helper()
	if r.Status != 200 || string(r.Body) != appBody {
		t.Fatalf("answer %d %q, want the application's 200\n%s", r.Status, r.Body, s.nginx.logs())
	}
	if got := r.Header.Get("RateLimit"); got != wantRateLimit {
		t.Errorf("RateLimit %q, want %q", got, wantRateLimit)
	}
	if r.Header.Get("Retry-After") != "" {
		t.Errorf("an allowed request has Retry-After %q", r.Header.Get("Retry-After"))
	}
}

// refused asserts nginx's JSON answer of status with code, and that the
// application was not asked.
func (s *nginxStack) refused(t *testing.T, r response, hitsBefore, status int, code string) {
	t.Helper()
	var e wire.ErrorResponse
	if r.Status != status || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(r.Body, &e) != nil || e.Error.Code != code {
		t.Fatalf("answer %d %s %q, want %d with a JSON error %s\n%s", r.Status, r.Header.Get("Content-Type"), r.Body, status, code, s.nginx.logs())
	}
	if got := s.app.count(); got != hitsBefore {
		t.Errorf("the application got %d requests, want %d: a refused request reached it", got, hitsBefore)
	}
}

// rateLimited asserts nginx's 429 for a denial: the limiter's headers,
// Retry-After among them, and a JSON body with the same retry_after.
func (s *nginxStack) rateLimited(t *testing.T, r response, hitsBefore int, wantRateLimit, wantPolicy string, wantRetry int) {
	t.Helper()
	var body struct {
		Error struct {
			Code       string `json:"code"`
			Message    string `json:"message"`
			RetryAfter int    `json:"retry_after"`
		} `json:"error"`
	}
	if r.Status != 429 || json.Unmarshal(r.Body, &body) != nil || body.Error.Code != "rate_limited" || body.Error.RetryAfter != wantRetry {
		t.Fatalf("answer %d %q, want 429 rate_limited with retry_after %d\n%s", r.Status, r.Body, wantRetry, s.nginx.logs())
	}
	for name, want := range map[string]string{
		"Retry-After":      fmt.Sprint(wantRetry),
		"RateLimit":        wantRateLimit,
		"RateLimit-Policy": wantPolicy,
		"Content-Type":     "application/json",
	} {
		if got := r.Header.Get(name); got != want {
			t.Errorf("429: %s %q, want %q", name, got, want)
		}
	}
	if got := s.app.count(); got != hitsBefore {
		t.Errorf("the application got %d requests, want %d: a denied request reached it", got, hitsBefore)
	}
}

// nginx with the shipped configuration in front of the limiter (which
// requires the token the configuration sends) and an application, every
// answer through nginx. The test client and nginx are both on 127.0.0.1,
// which the limiter trusts as a proxy: the address a client puts in
// X-Forwarded-For stands for the client address a trusted proxy in front
// of nginx would have written there, and nginx appends its own peer.
func TestNginxForwardAuth(t *testing.T) {
	t.Parallel()
	s := startNginxStack(t, fmt.Sprintf(nginxRules, "127.0.0.1/32"), nginxToken, nil)
	const ipPolicy = `"RequestsPerClientIP";q=3;w=60`
	n := s.nginx

	t.Run("allowed requests reach the application", func(t *testing.T) {
		s.passes(t, n.get("GET", "/shop/cart?page=2", "X-Forwarded-For: 198.51.100.1"), `"RequestsPerClientIP";r=2;t=20`)
		hit := s.app.last(t)
		if hit.Method != "GET" || hit.URI != "/shop/cart?page=2" {
			t.Errorf("the application got %s %s", hit.Method, hit.URI)
		}
		if got := hit.Header.Get("X-Forwarded-For"); got != "198.51.100.1, 127.0.0.1" {
			t.Errorf("the application got X-Forwarded-For %q", got)
		}
		// The body goes to the application; the limiter is asked without it.
		r := n.send("POST", "/shop/cart", `{"item":42}`, "X-Forwarded-For: 198.51.100.1", "Content-Type: application/json")
		s.passes(t, r, `"RequestsPerClientIP";r=1;t=40`)
		if hit := s.app.last(t); hit.Method != "POST" || hit.Body != `{"item":42}` {
			t.Errorf("the application got %s with body %q", hit.Method, hit.Body)
		}
		if got := r.Header.Get("RateLimit-Policy"); got != ipPolicy {
			t.Errorf("RateLimit-Policy %q, want %q", got, ipPolicy)
		}
		if got := s.app.count(); got != 2 {
			t.Errorf("the application got %d requests, want 2", got)
		}
	})

	t.Run("denied requests get 429 and never reach the application", func(t *testing.T) {
		s.passes(t, n.get("GET", "/", "X-Forwarded-For: 198.51.100.1"), `"RequestsPerClientIP";r=0;t=60`)
		hits := s.app.count()
		for range 2 {
			s.rateLimited(t, n.get("GET", "/", "X-Forwarded-For: 198.51.100.1"), hits, `"RequestsPerClientIP";r=0;t=60`, ipPolicy, 20)
		}
		// A POST is refused the same way; its body never reaches the application.
		s.rateLimited(t, n.send("POST", "/orders", `{"item":42}`, "X-Forwarded-For: 198.51.100.1"), hits, `"RequestsPerClientIP";r=0;t=60`, ipPolicy, 20)
		if got := s.remaining(t, "RequestsPerClientIP", "198.51.100.1"); got != 0 {
			t.Errorf("198.51.100.1 has %d left, want 0", got)
		}
		// Retry-After is right: once it has passed, one more request is allowed.
		advanceWithToken(t, s.limiter, nginxToken, 20*time.Second)
		s.passes(t, n.get("GET", "/", "X-Forwarded-For: 198.51.100.1"), `"RequestsPerClientIP";r=0;t=60`)
	})

	t.Run("each forwarded client address is counted apart", func(t *testing.T) {
		s.passes(t, n.get("GET", "/", "X-Forwarded-For: 198.51.100.2"), `"RequestsPerClientIP";r=2;t=20`)
		s.passes(t, n.get("GET", "/", "X-Forwarded-For: 2001:db8::1"), `"RequestsPerClientIP";r=2;t=20`)
		if got := s.remaining(t, "RequestsPerClientIP", "2001:db8::1"); got != 2 {
			t.Errorf("2001:db8::1 has %d left, want 2", got)
		}
		// nginx's own address, a trusted proxy, is never the client.
		if got := s.remaining(t, "RequestsPerClientIP", "127.0.0.1"); got != 3 {
			t.Errorf("127.0.0.1 (nginx) has %d left, want 3: the proxy was counted", got)
		}
	})

	t.Run("API keys are counted per key", func(t *testing.T) {
		const keyPolicy = `"APIRequestsPerKey";q=2;w=60`
		s.passes(t, n.get("GET", "/api/items", "X-Api-Key: key-a"), `"APIRequestsPerKey";r=1;t=30`)
		s.passes(t, n.get("GET", "/api/items", "X-Api-Key: key-a"), `"APIRequestsPerKey";r=0;t=60`)
		hits := s.app.count()
		s.rateLimited(t, n.get("GET", "/api/items", "X-Api-Key: key-a"), hits, `"APIRequestsPerKey";r=0;t=60`, keyPolicy, 30)
		s.passes(t, n.get("GET", "/api/items", "X-Api-Key: key-b"), `"APIRequestsPerKey";r=1;t=30`)
		if a, b := s.remaining(t, "APIRequestsPerKey", "key-a"), s.remaining(t, "APIRequestsPerKey", "key-b"); a != 0 || b != 1 {
			t.Errorf("key-a has %d left, key-b %d; want 0 and 1", a, b)
		}
	})

	t.Run("a request without its id is refused with 403", func(t *testing.T) {
		hits := s.app.count()
		r := n.get("GET", "/api/items")
		s.refused(t, r, hits, 403, "missing_id")
		if r.Header.Get("Retry-After") != "" || r.Header.Get("RateLimit") != "" {
			t.Errorf("a refusal for a missing id has rate-limit headers: %v", r.Header)
		}
	})

	t.Run("an id the limiter cannot use is the client's 400", func(t *testing.T) {
		hits := s.app.count()
		s.refused(t, n.get("GET", "/api/items", "X-Api-Key: "+strings.Repeat("k", 300)), hits, 400, "invalid_id")
	})

	t.Run("nginx tells the limiter the original request, not what the client claims", func(t *testing.T) {
		seen := func() [6]int64 {
			return [6]int64{
				s.remaining(t, "SeenPath", "/account/settings"), s.remaining(t, "SeenPath", "/forged"),
				s.remaining(t, "SeenMethod", "PUT"), s.remaining(t, "SeenMethod", "DELETE"),
				s.remaining(t, "SeenHost", "shop.example"), s.remaining(t, "SeenHost", "forged.example"),
			}
		}
		before := seen()
		s.passes(t, n.get("PUT", "/account/settings?tab=mail", "X-Forwarded-For: 198.51.100.3", "Host: Shop.Example:8443",
			"X-Forwarded-Uri: /forged", "X-Forwarded-Method: DELETE", "X-Forwarded-Host: forged.example"), `"RequestsPerClientIP";r=2;t=20`)
		after := seen()
		// The path without its query, the method and the host without its
		// port, each spent once; the forged ones not at all.
		want := [6]int64{before[0] - 1, before[1], before[2] - 1, before[3], before[4] - 1, before[5]}
		if after != want {
			t.Errorf("path, forged path, method, forged method, host, forged host: %v left, want %v (from %v)", after, want, before)
		}
		if hit := s.app.last(t); hit.Method != "PUT" || hit.URI != "/account/settings?tab=mail" {
			t.Errorf("the application got %s %s", hit.Method, hit.URI)
		}
	})

	t.Run("nginx sends the token; the client's Authorization is counted, not sent as nginx's", func(t *testing.T) {
		before := s.remaining(t, "SeenAuthorization", "Bearer user-7")
		s.passes(t, n.get("GET", "/profile", "X-Forwarded-For: 198.51.100.4", "Authorization: Bearer user-7"), `"RequestsPerClientIP";r=2;t=20`)
		if got := s.remaining(t, "SeenAuthorization", "Bearer user-7"); got != before-1 {
			t.Errorf("the client's Authorization has %d left, want %d", got, before-1)
		}
		// The application gets the client's own Authorization, never the
		// limiter's token.
		if got := s.app.last(t).Header.Get("Authorization"); got != "Bearer user-7" {
			t.Errorf("the application got Authorization %q, want the client's", got)
		}
		// A client cannot pass its own X-Forwarded-Authorization off as
		// its Authorization: nginx replaces it.
		s.passes(t, n.get("GET", "/profile", "X-Forwarded-For: 198.51.100.4", "X-Forwarded-Authorization: Bearer forged"), `"RequestsPerClientIP";r=1;t=40`)
		if got := s.remaining(t, "SeenAuthorization", "Bearer forged"); got != 1000 {
			t.Errorf("a forged X-Forwarded-Authorization was counted: %d left", got)
		}
		for _, hit := range s.app.all() {
			if strings.Contains(fmt.Sprint(hit.Header), nginxToken) {
				t.Errorf("the application got the limiter's token: %v", hit.Header)
			}
		}
	})

	t.Run("clients cannot call the limiter's location", func(t *testing.T) {
		hits := s.app.count()
		if r := n.get("GET", "/_limiter/site"); r.Status != 404 || s.app.count() != hits {
			t.Errorf("GET /_limiter/site: %d, the application got %d requests (want 404 and none)", r.Status, s.app.count()-hits)
		}
	})

	// The last step: the limiter is killed. nginx goes on: the rules that fail
	// open (the default) let requests pass uncounted, password-reset
	// fails closed with a 503. When a limiter listens again on the same
	// address, nginx counts with it again. password-reset's answers show
	// no RateLimit headers (expose: none); its denial is still a 429 with
	// Retry-After.
	t.Run("the limiter killed", func(t *testing.T) {
		const resetIP = "X-Forwarded-For: 198.51.100.5"
		s.passes(t, n.get("POST", "/password-reset", resetIP), "")
		killLimiter(t, s.limiter)
		hits := s.app.count()
		s.passes(t, n.get("GET", "/", "X-Forwarded-For: 198.51.100.1"), "")
		s.passes(t, n.get("GET", "/api/items", "X-Api-Key: key-a"), "")
		s.passes(t, n.get("GET", "/api/items"), "")
		if got := s.app.count(); got != hits+3 {
			t.Errorf("the application got %d requests while the limiter was down, want 3", got-hits)
		}
		s.refused(t, n.get("POST", "/password-reset", "X-Forwarded-For: 198.51.100.6"), hits+3, 503, "rate_limiter_unavailable")

		s.limiter = startLimiter(t, procOptions{Env: s.env, Args: append([]string{"--listen", hostPort(t, s.limiter.URL)}, s.args...)})
		s.passes(t, n.get("POST", "/password-reset", resetIP), "")
		s.rateLimited(t, n.get("POST", "/password-reset", resetIP), hits+4, "", "", 3600)
	})
}

// With nginx's address not among the limiter's trusted proxies, what nginx
// forwards is ignored: every client is counted as nginx itself, whatever
// X-Forwarded-For says.
func TestNginxUntrustedProxy(t *testing.T) {
	t.Parallel()
	s := startNginxStack(t, fmt.Sprintf(nginxRules, "10.0.0.0/8"), nginxToken, nil)
	n := s.nginx
	for i, want := range []string{`"RequestsPerClientIP";r=2;t=20`, `"RequestsPerClientIP";r=1;t=40`, `"RequestsPerClientIP";r=0;t=60`} {
		s.passes(t, n.get("GET", "/", fmt.Sprintf("X-Forwarded-For: 198.51.100.%d", i+1)), want)
	}
	hits := s.app.count()
	s.rateLimited(t, n.get("GET", "/", "X-Forwarded-For: 198.51.100.9"), hits, `"RequestsPerClientIP";r=0;t=60`, `"RequestsPerClientIP";q=3;w=60`, 20)
	if a, b := s.remaining(t, "RequestsPerClientIP", "127.0.0.1"), s.remaining(t, "RequestsPerClientIP", "198.51.100.1"); a != 0 || b != 3 {
		t.Errorf("127.0.0.1 has %d left, 198.51.100.1 %d; want 0 and 3", a, b)
	}
}

// A mistake in nginx's configuration is a 500 for the client, never passed
// on and never shown as the client's fault: a token the limiter refuses
// (the limiter's 401 and its WWW-Authenticate stay inside nginx), and a
// rule the limiter does not have (its 404), even for a rule that fails
// open.
func TestNginxMisconfigured(t *testing.T) {
	t.Parallel()
	t.Run("a refused token", func(t *testing.T) {
		t.Parallel()
		s := startNginxStack(t, fmt.Sprintf(nginxRules, "127.0.0.1/32"), "another-token", nil)
		for _, path := range []string{"/", "/api/items", "/password-reset"} {
			r := s.nginx.get("GET", path, "X-Api-Key: key-a")
			s.refused(t, r, 0, 500, "internal")
			if r.Header.Get("WWW-Authenticate") != "" {
				t.Errorf("%s: the limiter's WWW-Authenticate reached the client: %q", path, r.Header.Get("WWW-Authenticate"))
			}
		}
	})
	t.Run("an unknown rule", func(t *testing.T) {
		t.Parallel()
		rules := strings.Replace(fmt.Sprintf(nginxRules, "127.0.0.1/32"), "  site:", "  other-site:", 1)
		s := startNginxStack(t, rules, nginxToken, nil)
		s.refused(t, s.nginx.get("GET", "/"), 0, 500, "internal")
		s.passes(t, s.nginx.get("GET", "/api/items", "X-Api-Key: key-a"), `"APIRequestsPerKey";r=1;t=30`)
	})
}

// A limiter whose bucket store cannot be reached answers 503: nginx fails
// open for the rules that do and closed for password-reset, as when the
// limiter itself is down.
func TestNginxLimiterSourceUnavailable(t *testing.T) {
	t.Parallel()
	closed := freeLoopbackAddr(t) // nothing listens there: every Redis call is refused at once
	s := startNginxStack(t, fmt.Sprintf(nginxRules, "127.0.0.1/32"), nginxToken, map[string]string{"LIMITER_SOURCE": "redis://" + closed})
	direct := forwardAuth(t, s.limiter, "GET", "site", nginxToken)
	if direct.Status != http.StatusServiceUnavailable {
		t.Fatalf("the limiter answers %d %s, want 503", direct.Status, direct.Body)
	}
	s.passes(t, s.nginx.get("GET", "/", "X-Forwarded-For: 198.51.100.1"), "")
	s.passes(t, s.nginx.get("GET", "/api/items", "X-Api-Key: key-a"), "")
	s.refused(t, s.nginx.get("POST", "/password-reset"), 2, 503, "rate_limiter_unavailable")
}

// killLimiter kills p with SIGKILL, as a crash would: no connection is
// closed cleanly. The exit is the test's doing, so p's clean-up does not
// report it.
func killLimiter(t *testing.T, p *limiterProc) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	if status, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || status.Signal() != syscall.SIGKILL {
		t.Fatalf("the limiter exited with %v, not by the SIGKILL:\n%s", p.err, p.logs())
	}
	p.err = nil
}

// docs/forward-auth.md shows each shipped proxy configuration whole: the
// block after its marker is the file, byte for byte, so that the
// documentation shows what the tests run.
func TestDocShowsShippedProxyConfigs(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs/forward-auth.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, shipped := range []struct{ path, lang string }{
		{nginxConfigPath, "nginx"},
		{caddyConfigPath, "caddyfile"},
	} {
		file, err := os.ReadFile(filepath.Join(repoRoot, shipped.path))
		if err != nil {
			t.Fatal(err)
		}
		marker := "<!-- The block below is " + shipped.path + ", byte for byte: a test compares them. -->\n```" + shipped.lang + "\n"
		_, rest, found := strings.Cut(string(doc), marker)
		block, _, closed := strings.Cut(rest, "\n```\n")
		if !found || !closed {
			t.Errorf("docs/forward-auth.md has no block after the marker %q", marker)
			continue
		}
		if block+"\n" != string(file) {
			t.Errorf("the block of %s in docs/forward-auth.md differs from the file: copy the file into the block", shipped.path)
		}
	}
}
