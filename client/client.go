package client

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Options configures a Client. Only BaseURL is required.
type Options struct {
	// BaseURL is where the service answers: "http://127.0.0.1:8080", or
	// with a path prefix when a proxy serves it under one
	// ("https://gateway.internal/limiter"). The API's paths (/v1/spend,
	// ...) are added to it.
	BaseURL string
	// APIToken, when set, is sent as "Authorization: Bearer <token>" on
	// every call: needed when the service runs with --api-token-file.
	APIToken string
	// AdminToken, when set, is sent instead of APIToken on the admin
	// calls (Reset, ResetBatch, Reload, ReloadStatus, Sync, TopDenied,
	// Boxes, PenaltyBoxRemove), which need an admin token when the
	// service runs with --admin-token-file.
	// Unset, those calls send APIToken.
	AdminToken string
	// HTTPClient sends the requests. Nil makes one of the client's own
	// with a Transport sized for a service that calls the limiter often
	// (see NewHTTPClient). A Client given one uses it as it is, timeouts
	// and all.
	HTTPClient *http.Client
	// Retry says how failed calls are tried again; the zero value is the
	// defaults (DefaultMaxRetries retries).
	Retry RetryPolicy
	// AttemptTimeout bounds each attempt of a call, the answer's body
	// included, apart from the caller's context (which bounds the call
	// with all its retries): DefaultAttemptTimeout when 0, none when
	// negative. An attempt that runs out may have reached the service,
	// so it is retried only where a repeat is safe.
	AttemptTimeout time.Duration
	// UserAgent is sent as User-Agent; DefaultUserAgent when empty.
	UserAgent string
}

// Defaults of Options.
const (
	DefaultAttemptTimeout = 2 * time.Second
	DefaultUserAgent      = "limiter-go-client"
)

// Client calls the limiter's HTTP API. It is safe for concurrent use, and
// meant to be made once and shared: it keeps connections open between
// calls.
type Client struct {
	base           string // scheme://host[/prefix], without a trailing slash
	apiToken       string
	adminToken     string
	hc             *http.Client
	ownsHC         bool
	retry          RetryPolicy
	attemptTimeout time.Duration
	userAgent      string
	// now, unit and newKey are the clock (for Retry-After dates), the
	// jitter's randomness and the idempotency key source; tests replace
	// them.
	now    func() time.Time
	unit   func() float64
	newKey func() string
}

// New returns a Client for the service at opts.BaseURL.
func New(opts Options) (*Client, error) {
	base, err := parseBaseURL(opts.BaseURL)
	if err != nil {
		return nil, err
	}
	for name, tok := range map[string]string{"APIToken": opts.APIToken, "AdminToken": opts.AdminToken} {
		if !validToken(tok) {
			return nil, fmt.Errorf("limiter: %s: a bearer token is visible ASCII characters without spaces", name)
		}
	}
	c := &Client{
		base:           base,
		apiToken:       opts.APIToken,
		adminToken:     opts.AdminToken,
		hc:             opts.HTTPClient,
		retry:          opts.Retry.withDefaults(),
		attemptTimeout: opts.AttemptTimeout,
		userAgent:      opts.UserAgent,
		now:            time.Now,
		unit:           randomUnit,
		newKey:         newIdempotencyKey,
	}
	if c.hc == nil {
		c.hc, c.ownsHC = NewHTTPClient(), true
	}
	if c.attemptTimeout == 0 {
		c.attemptTimeout = DefaultAttemptTimeout
	}
	if c.userAgent == "" {
		c.userAgent = DefaultUserAgent
	}
	return c, nil
}

// Close closes the idle connections of the HTTP client the Client made
// for itself; one given in Options is left alone. The Client remains
// usable, and opens connections again if called.
func (c *Client) Close() {
	if c.ownsHC {
		c.hc.CloseIdleConnections()
	}
}

// parseBaseURL checks BaseURL and returns it without a trailing slash.
func parseBaseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("limiter: BaseURL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("limiter: BaseURL %q: want an http:// or https:// URL", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("limiter: BaseURL %q: no host", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", fmt.Errorf("limiter: BaseURL %q: a query or fragment has no place in it", raw)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// validToken reports whether tok can go in an Authorization header as a
// bearer token: empty (none sent), or visible ASCII without spaces.
func validToken(tok string) bool {
	for i := 0; i < len(tok); i++ {
		if tok[i] < 0x21 || tok[i] > 0x7e {
			return false
		}
	}
	return true
}

// NewHTTPClient returns the HTTP client a Client makes when Options gives
// none: keep-alive connections, up to 64 kept idle per host (Go's default
// of 2 would make a busy caller open and close connections all the time),
// bounded dial and TLS handshake times, and proxies from the environment
// as Go's default transport has them. It sets no overall timeout: the
// Client bounds each attempt itself (Options.AttemptTimeout).
func NewHTTPClient() *http.Client {
	var t *http.Transport
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t = dt.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	}
	t.DialContext = (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	// Below the service's own idle timeout (120 s), so that the client
	// drops a connection before the server closes it under a request.
	t.IdleConnTimeout = 90 * time.Second
	t.TLSHandshakeTimeout = 5 * time.Second
	t.ExpectContinueTimeout = time.Second
	return &http.Client{Transport: t}
}

// errControlInKey refuses a caller's idempotency key that no HTTP header
// can carry.
var errControlInKey = errors.New("limiter: an idempotency key cannot hold control characters")
