package test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apiclient "github.com/limiter-dev/limiter/client"
)

const opsDefaults = `APIRequestsPerKey:
  enum: 102
  id: string
  burst: 100
  count: 100
  period: 1s
`

func overridesWithBurst(burst int) string {
	return fmt.Sprintf("- APIRequestsPerKey:\n    burst: %d\n    count: %d\n    period: 1s\n    ids:\n      - id: partner\n", burst, burst)
}

// replaceFile writes content next to path and renames it over path, the
// way editors and deploy tools replace files atomically.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// burstOf reads the effective burst for the partner key.
func burstOf(p *limiterProc) int64 {
	p.t.Helper()
	d, err := p.api().Subscriber(context.Background(), "APIRequestsPerKey", "partner")
	if err != nil {
		p.t.Fatalf("no burst: %v", err)
	}
	return d.Burst
}

// pollUntil polls cond until it holds or within passes; it fails the test
// with what on timeout.
func pollUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metricValue reads one sample from /metrics (0 when absent).
func metricValue(p *limiterProc, url, name string) float64 {
	p.t.Helper()
	r := p.send(mustRequest(p.t, "GET", url+"/metrics"))
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(r.Body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func mustRequestBody(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

func TestReloadOnFileChange(t *testing.T) {
	dir := t.TempDir()
	defaults := writeFile(t, dir, "defaults.yaml", opsDefaults)
	overrides := writeFile(t, dir, "overrides.yaml", overridesWithBurst(200))
	p := startLimiter(t, procOptions{Env: map[string]string{
		"LIMITER_DEFAULTS": defaults, "LIMITER_OVERRIDES": overrides, "LIMITER_FAKECLOCK": fakeClockStart,
		"LIMITER_DESCRIPTORS": filepath.Join(dir, "descriptors.yaml"), // none: the bundled rules name limits these files lack
	}})
	if b := burstOf(p); b != 200 {
		t.Fatalf("burst %d at start, want 200", b)
	}
	// Spend some, so we can see buckets survive the reload.
	if _, err := p.api().Spend(context.Background(), apiclient.Transaction{Limit: "APIRequestsPerKey", ID: "partner"}.WithCost(50)); err != nil {
		t.Fatal(err)
	}

	replaceFile(t, overrides, overridesWithBurst(300))
	pollUntil(t, 2*time.Second, "the renamed overrides file is in use", func() bool { return burstOf(p) == 300 })
	// The bucket survived: on the fake clock the 50 tokens spent at 200/s
	// (TAT 250ms ahead) leave (999999900-250000000)/3333333 = 224 of 300.
	if d, err := p.api().Subscriber(context.Background(), "APIRequestsPerKey", "partner"); err != nil || d.Remaining != 224 {
		t.Errorf("the bucket did not survive the reload as expected: %+v %v", d, err)
	}

	// A broken file changes nothing and counts a failure.
	failuresBefore := metricValue(p, p.URL, "limiter_config_reload_failures_total")
	replaceFile(t, overrides, "- APIRequestsPerKey:\n    burst: -1\n")
	pollUntil(t, 2*time.Second, "the failure is counted", func() bool {
		return metricValue(p, p.URL, "limiter_config_reload_failures_total") > failuresBefore
	})
	if b := burstOf(p); b != 300 {
		t.Fatalf("a broken file changed the burst to %d", b)
	}
	if !strings.Contains(p.logs(), "overrides.yaml:2") {
		t.Errorf("the failure's file:line is not in the log:\n%s", p.logs())
	}
}

// Kubernetes mounts a ConfigMap as symlinks into a ..data directory and
// swaps ..data atomically; the watcher follows the links.
func TestReloadOnSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		if err := os.Mkdir(filepath.Join(dir, v), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, v), "defaults.yaml", opsDefaults)
	}
	writeFile(t, filepath.Join(dir, "v1"), "overrides.yaml", overridesWithBurst(200))
	writeFile(t, filepath.Join(dir, "v2"), "overrides.yaml", overridesWithBurst(400))
	data := filepath.Join(dir, "..data")
	if err := os.Symlink("v1", data); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"defaults.yaml", "overrides.yaml"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	p := startLimiter(t, procOptions{Env: map[string]string{
		"LIMITER_DEFAULTS": filepath.Join(dir, "defaults.yaml"), "LIMITER_OVERRIDES": filepath.Join(dir, "overrides.yaml"),
		"LIMITER_DESCRIPTORS": filepath.Join(dir, "descriptors.yaml"),
	}})
	if b := burstOf(p); b != 200 {
		t.Fatalf("burst %d at start, want 200", b)
	}
	tmpLink := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink("v2", tmpLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmpLink, data); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 2*time.Second, "the swapped ConfigMap is in use", func() bool { return burstOf(p) == 400 })
}

// With watching off, SIGHUP and the admin endpoint reload.
func TestReloadOnSIGHUPAndAdminEndpoint(t *testing.T) {
	dir := t.TempDir()
	defaults := writeFile(t, dir, "defaults.yaml", opsDefaults)
	overrides := writeFile(t, dir, "overrides.yaml", overridesWithBurst(200))
	adminTokens := writeFile(t, dir, "admin.tokens", "# operators\nadmin-secret-1\n")
	p := startLimiter(t, procOptions{Env: map[string]string{
		"LIMITER_DEFAULTS": defaults, "LIMITER_OVERRIDES": overrides,
		"LIMITER_RELOAD_INTERVAL": "0", "LIMITER_ADMIN_TOKEN_FILE": adminTokens,
		"LIMITER_DESCRIPTORS": filepath.Join(dir, "descriptors.yaml"),
	}})
	replaceFile(t, overrides, overridesWithBurst(250))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 2*time.Second, "SIGHUP reloaded", func() bool { return burstOf(p) == 250 })

	replaceFile(t, overrides, overridesWithBurst(260))
	ctx := context.Background()
	if err := p.api().Reload(ctx); !apiclient.IsCode(err, "unauthorized") {
		t.Fatalf("reload without the admin token: %v, want 401", err)
	}
	if b := burstOf(p); b != 250 {
		t.Fatalf("watching is off and nothing reloaded, yet burst is %d", b)
	}
	operator := p.apiWith(apiclient.Options{AdminToken: "admin-secret-1"})
	if err := operator.Reload(ctx); err != nil || burstOf(p) != 260 {
		t.Fatalf("admin reload: %v, burst %d", err, burstOf(p))
	}
	replaceFile(t, overrides, "- NoSuchLimit:\n    burst: 1\n    count: 1\n    period: 1s\n    ids: [{id: x}]\n")
	var e *apiclient.Error
	if err := operator.Reload(ctx); !errors.As(err, &e) || e.StatusCode != 422 || !strings.Contains(e.Message, "overrides.yaml:1") {
		t.Fatalf("admin reload of a broken file: %v", err)
	}
	if b := burstOf(p); b != 260 {
		t.Fatalf("a failed reload changed the burst to %d", b)
	}
	if strings.Contains(p.logs(), "admin-secret-1") {
		t.Errorf("a token appears in the log:\n%s", p.logs())
	}
}

func TestTokensThroughTheBinary(t *testing.T) {
	dir := t.TempDir()
	api := writeFile(t, dir, "api.tokens", "api-secret-1\napi-secret-2\n")
	admin := writeFile(t, dir, "admin.tokens", "admin-secret-1\n")
	p := startLimiter(t, procOptions{Args: []string{"--api-token-file", api, "--admin-token-file", admin, "--access-log"}})
	ctx := context.Background()
	alice := apiclient.Transaction{Limit: "LoginAttemptsPerUser", ID: "alice"}
	spend := func(c *apiclient.Client) error { _, err := c.Spend(ctx, alice); return err }
	reset := func(c *apiclient.Client) error { _, err := c.Reset(ctx, alice); return err }
	for _, c := range []struct {
		path, token string
		call        func(*apiclient.Client) error
		want        int
	}{
		{"/v1/spend", "", spend, 401}, {"/v1/spend", "nope", spend, 401}, {"/v1/spend", "api-secret-2", spend, 200},
		{"/v1/spend", "admin-secret-1", spend, 200}, {"/v1/reset", "api-secret-1", reset, 401}, {"/v1/reset", "admin-secret-1", reset, 200},
	} {
		// The client sends its API token on every call, resets included,
		// when it has no admin token: each call presents c.token.
		err := c.call(p.apiWith(apiclient.Options{APIToken: c.token}))
		if status, _ := statusOf(err); status != c.want {
			t.Errorf("POST %s with %q: %d, want %d: %v", c.path, c.token, status, c.want, err)
		}
	}
	if _, err := p.api().Limits(ctx); !apiclient.IsCode(err, "unauthorized") {
		t.Errorf("GET /v1/limits without a token: %v, want 401", err)
	}
	if r := p.do("GET", "/healthz", ""); r.Status != 200 {
		t.Errorf("healthz needs no token: %d", r.Status)
	}
	logs := p.logs()
	for _, secret := range []string{"api-secret", "admin-secret", "nope"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log contains %q:\n%s", secret, logs)
		}
	}
	if !strings.Contains(logs, `msg=request method=POST route=/v1/spend status=401`) {
		t.Errorf("no access log line for a refused spend:\n%s", logs)
	}
}

// After traffic /metrics shows every documented family, and no label holds
// an id. --metrics-listen moves /metrics to a listener of its own.
func TestMetricsFamilies(t *testing.T) {
	p := startLimiter(t, procOptions{Args: []string{"--metrics-listen", "127.0.0.1:0"}})
	ctx := context.Background()
	if _, err := p.api().Spend(ctx, apiclient.Transaction{Limit: "LoginAttemptsPerUser", ID: "secret-subscriber-id"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.api().Spend(ctx, apiclient.Transaction{Limit: "NoSuchLimit", ID: "another-secret-id"}); !apiclient.IsCode(err, "unknown_limit") {
		t.Fatalf("a spend on an unknown limit: %v", err)
	}
	if r := p.do("GET", "/metrics", ""); r.Status != 404 {
		t.Errorf("/metrics on the API listener with --metrics-listen: %d, want 404", r.Status)
	}
	m := regexp.MustCompile(`server=metrics addr=(\S+)`).FindStringSubmatch(p.logs())
	if m == nil {
		t.Fatalf("no metrics listener in the log:\n%s", p.logs())
	}
	r := p.send(mustRequest(t, "GET", "http://"+m[1]+"/metrics"))
	body := string(r.Body)
	for _, family := range []string{
		"limiter_decisions_total", "limiter_http_request_duration_seconds", "limiter_source_operation_duration_seconds",
		"limiter_source_operation_errors_total", "limiter_source_errors_total", "limiter_degraded_answers_total",
		"limiter_memory_buckets", "limiter_memory_evictions_total", "limiter_memory_evictions_not_full_total", "limiter_overrides_loaded",
		"limiter_config_reloads_total", "limiter_config_reload_failures_total", "limiter_config_last_success_timestamp_seconds",
		"go_goroutines", "process_resident_memory_bytes",
	} {
		if !strings.Contains(body, "# TYPE "+family+" ") {
			t.Errorf("/metrics lacks the family %s", family)
		}
	}
	if strings.Contains(body, "secret-subscriber-id") || strings.Contains(body, "another-secret-id") || strings.Contains(body, "NoSuchLimit") {
		t.Error("/metrics carries an id or a client-chosen name in a label")
	}
}

// The bad-input suite against a binary with tokens on: every request gets
// a 4xx with the JSON error shape, and afterwards no bucket has changed.
func TestBadInputSuiteWithTokens(t *testing.T) {
	dir := t.TempDir()
	api := writeFile(t, dir, "api.tokens", "good-token\n")
	p := startLimiter(t, procOptions{Args: []string{"--api-token-file", api}})
	const token = "good-token"
	var manyTxns strings.Builder
	manyTxns.WriteString(`{"transactions":[`)
	for i := range 10_000 {
		if i > 0 {
			manyTxns.WriteByte(',')
		}
		fmt.Fprintf(&manyTxns, `{"limit":"LoginAttemptsPerUser","id":"u%d"}`, i)
	}
	manyTxns.WriteString(`]}`)
	cases := []struct {
		name, method, path, ctype, token, body string
		want                                   int
	}{
		{"missing token", "POST", "/v1/spend", "application/json", "", `{"limit":"LoginAttemptsPerUser","id":"alice"}`, 401},
		{"wrong token", "POST", "/v1/spend", "application/json", "bad-token", `{"limit":"LoginAttemptsPerUser","id":"alice"}`, 401},
		{"2 MiB body", "POST", "/v1/spend", "application/json", token, `{"limit":"LoginAttemptsPerUser","id":"` + strings.Repeat("a", 2<<20) + `"}`, 413},
		{"10,000 transactions", "POST", "/v1/spend", "application/json", token, manyTxns.String(), 400},
		{"truncated JSON", "POST", "/v1/spend", "application/json", token, `{"limit":"LoginAttemptsPerUser","id":"al`, 400},
		{"wrong type", "POST", "/v1/spend", "application/json", token, `{"limit":["LoginAttemptsPerUser"],"id":"alice"}`, 400},
		{"huge cost", "POST", "/v1/spend", "application/json", token, `{"limit":"LoginAttemptsPerUser","id":"alice","cost":18446744073709551616}`, 400},
		{"negative cost", "POST", "/v1/spend", "application/json", token, `{"limit":"LoginAttemptsPerUser","id":"alice","cost":-3}`, 400},
		{"long id", "POST", "/v1/spend", "application/json", token, `{"limit":"LoginAttemptsPerUser","id":"` + strings.Repeat("x", 257) + `"}`, 400},
		{"control characters in id", "POST", "/v1/spend", "application/json", token, `{"limit":"LoginAttemptsPerUser","id":"al\u0000ice"}`, 400},
		{"binary body", "POST", "/v1/spend", "application/json", token, "\x00\x01\x02\xff", 400},
		{"invalid UTF-8 id", "POST", "/v1/spend", "application/json", token, "{\"limit\":\"LoginAttemptsPerUser\",\"id\":\"\xff\xfe\"}", 400},
		{"wrong method", "PUT", "/v1/spend", "application/json", token, `{"limit":"LoginAttemptsPerUser","id":"alice"}`, 405},
		{"wrong method on limits", "DELETE", "/v1/limits", "", token, ``, 405},
		{"wrong content type", "POST", "/v1/spend", "text/xml", token, `{"limit":"LoginAttemptsPerUser","id":"alice"}`, 415},
	}
	for _, c := range cases {
		req := mustRequest(t, c.method, p.URL+c.path)
		if c.body != "" {
			req = mustRequestBody(t, c.method, p.URL+c.path, c.body)
		}
		req.Header.Set("Content-Type", c.ctype)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		r := p.send(req)
		if r.Status != c.want || !strings.Contains(string(r.Body), `"error":{"code":"`) {
			t.Errorf("%s: %d %.200s, want %d with the JSON error shape", c.name, r.Status, r.Body, c.want)
		}
	}
	d, err := p.apiWith(apiclient.Options{APIToken: token}).Subscriber(context.Background(), "LoginAttemptsPerUser", "alice")
	if err != nil || d.Remaining != 5 {
		t.Fatalf("a refused request changed alice's bucket: %+v %v", d, err)
	}
}
