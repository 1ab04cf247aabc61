package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/limiter-dev/limiter/httpapi/wire"
)

// caddyDefaults are the limits of the bundled api rule with small bursts,
// so that a few requests reach a denial by either of them.
const caddyDefaults = `APIRequestsPerKey:
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
`

// caddyRules is the bundled api rule, which the shipped Caddyfile asks,
// with %s its expose. The limiter trusts Caddy, which connects from
// 127.0.0.1; the test's clients come from other loopback addresses.
const caddyRules = `trusted_proxies: [127.0.0.1/32]
rules:
  api:
    limits:
      - limit: APIRequestsPerKey
        id: header:X-Api-Key
      - limit: RequestsPerClientIP
        id: client_ip
    expose: %s
`

// caddyStack is a limiter, the application and Caddy in front of both,
// with the shipped Caddyfile.
type caddyStack struct {
	limiter *limiterProc
	app     *appServer
	caddy   *caddyProc
}

// startCaddyStack starts the three on caddyDefaults and rules, the limiter
// on the fake clock and requiring caddyToken, Caddy sending token.
func startCaddyStack(t *testing.T, rules, token string) *caddyStack {
	t.Helper()
	dir := t.TempDir()
	s := &caddyStack{}
	s.limiter = startLimiter(t, procOptions{
		Env: map[string]string{
			"LIMITER_DEFAULTS":     writeFile(t, dir, "defaults.yaml", caddyDefaults),
			"LIMITER_OVERRIDES":    writeFile(t, dir, "no-overrides.yaml", "[]\n"),
			"LIMITER_FORWARD_AUTH": writeFile(t, dir, "forward-auth.yaml", rules),
			"LIMITER_FAKECLOCK":    fakeClockStart,
		},
		Args: []string{"--api-token-file", writeFile(t, dir, "api.tokens", caddyToken+"\n")},
	})
	s.app = newAppServer(t)
	s.caddy = startCaddy(t, s.limiter.URL, s.app.URL, token)
	return s
}

// passes asserts that a request went through Caddy to the application,
// and that the application got the limiter's RateLimit and
// RateLimit-Policy, or neither when both wants are empty.
func (s *caddyStack) passes(t *testing.T, r response, wantRateLimit, wantPolicy string) {
	t.Helper()
	if r.Status != 200 || string(r.Body) != appBody {
		t.Fatalf("answer %d %q, want the application's 200\n%s", r.Status, r.Body, s.caddy.logs())
	}
	hit := s.app.last(t)
	for name, want := range map[string]string{"RateLimit": wantRateLimit, "RateLimit-Policy": wantPolicy} {
		if got := hit.Header.Values(name); want == "" && len(got) != 0 || want != "" && (len(got) != 1 || got[0] != want) {
			t.Errorf("the application got %s %q, want %q", name, got, want)
		}
	}
}

// refused asserts the status and JSON error code of an answer, and that
// the application was not asked.
func (s *caddyStack) refused(t *testing.T, r response, hitsBefore, status int, code string) {
	t.Helper()
	var e wire.ErrorResponse
	if r.Status != status || json.Unmarshal(r.Body, &e) != nil || e.Error.Code != code {
		t.Fatalf("answer %d %q, want %d with a JSON error %s\n%s", r.Status, r.Body, status, code, s.caddy.logs())
	}
	if got := s.app.count(); got != hitsBefore {
		t.Errorf("the application got %d requests, want %d: a refused request reached it", got, hitsBefore)
	}
}

// rateLimited asserts the limiter's denial as Caddy hands it to the
// client: 429 with its headers (Retry-After, and the RateLimit headers
// when wanted) and, unless wantLimit is empty, a body with wantLimit's
// decision alone that never names other; the application was not asked.
func (s *caddyStack) rateLimited(t *testing.T, r response, hitsBefore int, wantRetry, wantRateLimit, wantPolicy, wantLimit, other string) {
	t.Helper()
	if r.Status != http.StatusTooManyRequests {
		t.Fatalf("answer %d %q, want 429\n%s", r.Status, r.Body, s.caddy.logs())
	}
	for name, want := range map[string]string{"Retry-After": wantRetry, "RateLimit": wantRateLimit, "RateLimit-Policy": wantPolicy} {
		if got := r.Header.Get(name); got != want {
			t.Errorf("429: %s %q, want %q", name, got, want)
		}
	}
	if wantLimit == "" {
		if len(r.Body) != 0 {
			t.Errorf("429: body %q, want none", r.Body)
		}
	} else {
		var a wire.BatchResponse
		if err := json.Unmarshal(r.Body, &a); err != nil || a.Allowed || len(a.Decisions) != 1 || a.Decisions[0].Limit != wantLimit {
			t.Errorf("429: body %q, want the denial with %s's decision alone", r.Body, wantLimit)
		}
	}
	if strings.Contains(string(r.Body), other) || strings.Contains(fmt.Sprint(r.Header), other) {
		t.Errorf("429: the answer names %s, which did not decide: %v %s", other, r.Header, r.Body)
	}
	if got := s.app.count(); got != hitsBefore {
		t.Errorf("the application got %d requests, want %d: a denied request reached it", got, hitsBefore)
	}
}

// Caddy 2.6 with the shipped Caddyfile in front of the limiter (which
// requires the token Caddy sends) and an application. Every client
// connects from a loopback address of its own, which Caddy puts in
// X-Forwarded-For in place of what the client wrote there, and which the
// limiter, trusting Caddy's 127.0.0.1 only, counts.
func TestCaddyForwardAuth(t *testing.T) {
	t.Parallel()
	s := startCaddyStack(t, fmt.Sprintf(caddyRules, "deciding"), caddyToken)
	const keyPolicy, ipPolicy = `"APIRequestsPerKey";q=2;w=60`, `"RequestsPerClientIP";q=3;w=60`

	t.Run("allowed requests reach the application with the RateLimit headers", func(t *testing.T) {
		c := s.caddy.from("127.0.0.2")
		s.passes(t, c.get("/items?page=2", "X-Api-Key: key-a", "RateLimit: forged", "Authorization: Basic dXNlcg=="),
			`"APIRequestsPerKey";r=1;t=30`, keyPolicy)
		hit := s.app.last(t)
		if hit.Method != "GET" || hit.URI != "/items?page=2" || hit.Header.Get("Authorization") != "Basic dXNlcg==" {
			t.Errorf("the application got %s %s, Authorization %q", hit.Method, hit.URI, hit.Header.Get("Authorization"))
		}
		// The body goes to the application.
		s.passes(t, c.send("POST", "/orders", `{"item":42}`, "X-Api-Key: key-a", "Content-Type: application/json"),
			`"APIRequestsPerKey";r=0;t=60`, keyPolicy)
		if hit := s.app.last(t); hit.Method != "POST" || hit.Body != `{"item":42}` {
			t.Errorf("the application got %s with body %q", hit.Method, hit.Body)
		}
		for _, hit := range s.app.all() {
			if strings.Contains(fmt.Sprint(hit.Header), caddyToken) {
				t.Errorf("the application got the limiter's token: %v", hit.Header)
			}
		}
	})

	t.Run("denied requests get the limiter's 429 with the deciding limit alone", func(t *testing.T) {
		// key-a is spent: its limit denies.
		c := s.caddy.from("127.0.0.2")
		hits := s.app.count()
		s.rateLimited(t, c.get("/items", "X-Api-Key: key-a"), hits, "30", `"APIRequestsPerKey";r=0;t=60`, keyPolicy, "APIRequestsPerKey", "RequestsPerClientIP")

		// Fresh keys from another address: its address limit decides the
		// third and denies the fourth.
		c = s.caddy.from("127.0.0.3")
		s.passes(t, c.get("/", "X-Api-Key: key-b1"), `"APIRequestsPerKey";r=1;t=30`, keyPolicy)
		s.passes(t, c.get("/", "X-Api-Key: key-b2"), `"APIRequestsPerKey";r=1;t=30`, keyPolicy)
		s.passes(t, c.get("/", "X-Api-Key: key-b3"), `"RequestsPerClientIP";r=0;t=60`, ipPolicy)
		hits = s.app.count()
		s.rateLimited(t, c.get("/", "X-Api-Key: key-b4"), hits, "20", `"RequestsPerClientIP";r=0;t=60`, ipPolicy, "RequestsPerClientIP", "APIRequestsPerKey")
		s.rateLimited(t, c.send("POST", "/orders", `{"item":1}`, "X-Api-Key: key-b5"), hits, "20", `"RequestsPerClientIP";r=0;t=60`, ipPolicy, "RequestsPerClientIP", "APIRequestsPerKey")
	})

	t.Run("the client's address is counted, not what it forwards", func(t *testing.T) {
		c := s.caddy.from("127.0.0.4")
		s.passes(t, c.get("/", "X-Api-Key: key-c", "X-Forwarded-For: 198.51.100.7", "X-Real-IP: 198.51.100.8"), `"APIRequestsPerKey";r=1;t=30`, keyPolicy)
		if got := s.app.last(t).Header.Get("X-Forwarded-For"); got != "127.0.0.4" {
			t.Errorf("the application got X-Forwarded-For %q, want 127.0.0.4", got)
		}
		for ip, want := range map[string]int64{"127.0.0.4": 2, "198.51.100.7": 3, "198.51.100.8": 3, "127.0.0.1": 3} {
			if got := checkRemaining(t, s.limiter, caddyToken, "RequestsPerClientIP", ip); got != want {
				t.Errorf("%s has %d left, want %d", ip, got, want)
			}
		}
	})

	t.Run("the limiter's refusals of the request itself pass", func(t *testing.T) {
		c := s.caddy.from("127.0.0.5")
		hits := s.app.count()
		s.refused(t, c.get("/items"), hits, 429, "missing_id")
		s.refused(t, c.get("/items", "X-Api-Key: "+strings.Repeat("k", 300)), hits, 400, "invalid_id")
	})

	// The last step: with the limiter down, Caddy fails closed.
	t.Run("the limiter killed", func(t *testing.T) {
		killLimiter(t, s.limiter)
		hits := s.app.count()
		if r := s.caddy.from("127.0.0.6").get("/", "X-Api-Key: key-d"); r.Status != http.StatusBadGateway || s.app.count() != hits {
			t.Errorf("%d %q, the application got %d requests; want 502 and none", r.Status, r.Body, s.app.count()-hits)
		}
	})
}

// With expose: none, Caddy's client gets a denial's 429 with Retry-After
// and nothing else, and the application no RateLimit headers at all: not
// the placeholder text Caddy 2.6 would put there, nor the client's own.
func TestCaddyExposeNone(t *testing.T) {
	t.Parallel()
	s := startCaddyStack(t, fmt.Sprintf(caddyRules, "none"), caddyToken)
	c := s.caddy.from("127.0.0.2")
	s.passes(t, c.get("/", "X-Api-Key: key-a", "RateLimit: forged", "RateLimit-Policy: forged"), "", "")
	s.passes(t, c.get("/", "X-Api-Key: key-a"), "", "")
	hits := s.app.count()
	r := c.get("/", "X-Api-Key: key-a")
	s.rateLimited(t, r, hits, "30", "", "", "", "APIRequestsPerKey")
	if ct := r.Header.Get("Content-Type"); ct != "" {
		t.Errorf("429 without a body has Content-Type %q", ct)
	}
}

// A mistake in Caddy's configuration is a 500 for the client, never shown
// as the client's fault: a token the limiter refuses (its 401 and
// WWW-Authenticate stay inside Caddy), and a rule it does not have.
func TestCaddyMisconfigured(t *testing.T) {
	t.Parallel()
	t.Run("a refused token", func(t *testing.T) {
		t.Parallel()
		s := startCaddyStack(t, fmt.Sprintf(caddyRules, "deciding"), "another-token")
		r := s.caddy.from("127.0.0.2").get("/", "X-Api-Key: key-a")
		s.refused(t, r, 0, 500, "internal")
		if r.Header.Get("WWW-Authenticate") != "" {
			t.Errorf("the limiter's WWW-Authenticate reached the client: %q", r.Header.Get("WWW-Authenticate"))
		}
	})
	t.Run("an unknown rule", func(t *testing.T) {
		t.Parallel()
		rules := strings.Replace(fmt.Sprintf(caddyRules, "deciding"), "  api:", "  other-api:", 1)
		s := startCaddyStack(t, rules, caddyToken)
		s.refused(t, s.caddy.from("127.0.0.2").get("/", "X-Api-Key: key-a"), 0, 500, "internal")
	})
}
