package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apiclient "github.com/limiter-dev/limiter/client"
	"github.com/limiter-dev/limiter/httpapi/wire"
)

// Every public vector, through HTTP, against the built binary on the
// memory source and a fake clock.
func TestVectorsOverHTTPMemory(t *testing.T) {
	f, env := vectorsConfig(t)
	p := startLimiter(t, procOptions{Env: env})
	runVectorsOverHTTP(t, f, p)
}

// `limiter serve` with no flags serves the bundled config on the memory
// source; a spend on a bundled limit answers as the spec says.
func TestServeWithBundledConfig(t *testing.T) {
	p := startLimiter(t, procOptions{})
	if !strings.Contains(p.logs(), "source=memory") || !strings.Contains(p.logs(), "defaults=config/defaults.yaml") {
		t.Fatalf("not serving the bundled config on memory:\n%s", p.logs())
	}
	a, err := p.api().Spend(context.Background(), apiclient.Transaction{Limit: "NewOrdersPerAccount", ID: "12345678"})
	if err != nil || len(a.Decisions) != 1 {
		t.Fatalf("spend: %+v %v", a, err)
	}
	d := a.Decisions[0]
	if !a.Allowed || d.Remaining != d.Burst-1 || d.Limit != "NewOrdersPerAccount" || d.ID != "12345678" {
		t.Fatalf("spend on a bundled limit: %+v", a)
	}
	if got := a.Header.Get("RateLimit-Policy"); got != fmt.Sprintf(`"NewOrdersPerAccount";q=%d;w=10800`, d.Count) {
		t.Errorf("RateLimit-Policy %q", got)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := p.do("GET", path, ""); r.Status != 200 {
			t.Errorf("GET %s: %d", path, r.Status)
		}
	}
	if _, err := p.api().Limits(context.Background()); err != nil {
		t.Errorf("GET /v1/limits: %v", err)
	}
	// Without LIMITER_FAKECLOCK the debug path does not exist.
	if r := p.post("/debug/clock", `{"advance":"1s"}`); r.Status != 404 {
		t.Errorf("/debug/clock without a fake clock: %d, want 404", r.Status)
	}
}

// Flags beat the environment; a bad flag or config stops the start with a
// message instead of serving something else.
func TestServeRefusesBadStart(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "defaults.yaml", "Nope:\n  burst: 1\n  count: 1\n  period: 1s\n")
	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"bad defaults", []string{"--defaults", bad}, nil, bad + ":1"},
		{"bad source", []string{"--source", "carrier-pigeon://x"}, nil, "--source"},
		{"bad fake clock", nil, []string{"LIMITER_FAKECLOCK=yesterday"}, "LIMITER_FAKECLOCK"},
		{"bad env number", nil, []string{"LIMITER_MAX_BUCKETS=many"}, "LIMITER_MAX_BUCKETS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binary, append([]string{"serve", "--listen", "127.0.0.1:0"}, tt.args...)...)
			cmd.Dir = repoRoot
			cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, tt.env...)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Fatalf("serve %v: err %v, output:\n%s\nwant a failure mentioning %q", tt.args, err, out, tt.want)
			}
		})
	}
}

func TestCheckConfig(t *testing.T) {
	run := func(args ...string) (string, int) {
		cmd := exec.Command(binary, append([]string{"check-config"}, args...)...)
		cmd.Dir = repoRoot
		out, err := cmd.CombinedOutput()
		if exit, ok := err.(*exec.ExitError); ok {
			return string(out), exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, code := run(); code != 0 || !strings.HasPrefix(out, "ok:") {
		t.Fatalf("bundled config: exit %d\n%s", code, out)
	}
	dir := t.TempDir()
	good := writeFile(t, dir, "good.yaml", "Logins:\n  enum: 101\n  id: string\n  burst: 5\n  count: 5\n  period: 15m\n")
	tests := []struct {
		name, defaults, overrides string
		want                      []string // substrings: file:line and what is wrong
	}{
		{"bad period", "Logins:\n  enum: 101\n  id: string\n  burst: 5\n  count: 5\n  period: 15 minutes\n", "",
			[]string{"bad.yaml:6", "Logins", "period"}},
		{"unknown name", "NewOrdersPerAccount:\n  burst: 5\n  count: 5\n  period: 1h\nMystery:\n  burst: 5\n  count: 5\n  period: 1h\n", "",
			[]string{"bad.yaml:5", "Mystery"}},
		{"unknown field", "NewOrdersPerAccount:\n  burst: 5\n  count: 5\n  period: 1h\n  colour: blue\n", "",
			[]string{"bad.yaml:5", "colour"}},
		{"duplicate id", "", "- Logins:\n    burst: 9\n    count: 9\n    period: 1m\n    ids:\n      - id: alice\n      - id: bob\n      - id: alice\n",
			[]string{"over.yaml:8", "Logins", "alice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defaults, overrides := good, writeFile(t, dir, "none.yaml", "[]\n")
			if tt.defaults != "" {
				defaults = writeFile(t, dir, "bad.yaml", tt.defaults)
			}
			if tt.overrides != "" {
				overrides = writeFile(t, dir, "over.yaml", tt.overrides)
			}
			out, code := run("--defaults", defaults, "--overrides", overrides)
			if code == 0 {
				t.Fatalf("exit 0 for a bad file:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestVersion(t *testing.T) {
	out, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "limiter ") {
		t.Fatalf("version: %v %q", err, out)
	}
}

// SIGTERM lets an in-flight request finish, then the process exits 0.
// The request is held in flight by the 100-continue handshake: the server
// sends "100 Continue" only once the handler reads the body, so the test
// knows the handler is running before it signals, without any sleep.
func TestGracefulShutdownFinishesInFlight(t *testing.T) {
	p := startLimiter(t, procOptions{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"limit":"NewOrdersPerAccount","id":"777"}`
	fmt.Fprintf(conn, "POST /v1/spend HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", len(body))
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	if err != nil || !strings.Contains(line, "100 Continue") {
		t.Fatalf("want 100 Continue, got %q %v", line, err)
	}
	if _, err := rd.ReadString('\n'); err != nil { // the blank line after 100
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Shutdown has begun once the log says so; the request is still open.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.logs(), "shutting down") {
		if time.Now().After(deadline) {
			t.Fatalf("no shutdown log line:\n%s", p.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := conn.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	status, err := rd.ReadString('\n')
	if err != nil || !strings.Contains(status, "200 OK") {
		t.Fatalf("in-flight request during shutdown: %q %v", status, err)
	}
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		t.Fatal("process did not exit after the in-flight request finished")
	}
	if p.err != nil {
		t.Fatalf("exit: %v\n%s", p.err, p.logs())
	}
}

// Bad input through the real process: only 4xx answers with the JSON
// error shape, and no bucket changes.
func TestBadInputChangesNothing(t *testing.T) {
	p := startLimiter(t, procOptions{})
	bodies := []string{
		`{`, `{"limit":"LoginAttemptsPerUser","id":"alice","cost":1.5}`, `{"limit":"LoginAttemptsPerUser","id":"alice","cost":1e400}`,
		`{"limit":"LoginAttemptsPerUser","id":"` + strings.Repeat("a", 300) + `"}`, `{"limit":"LoginAttemptsPerUser","id":"alice","cost":6}`,
		`{"transactions":[{"limit":"LoginAttemptsPerUser","id":"alice"},{"limit":"LoginAttemptsPerUser","id":"alice"}]}`,
		`{"transactions":[{"limit":"LoginAttemptsPerUser","id":"alice"},{"limit":"NoSuch","id":"alice"}]}`,
		`{"limit":"LoginAttemptsPerUser","id":"alice"}garbage`, `null`, `"alice"`, "\xff\xfe",
		`{"limit":"LoginAttemptsPerUser","id":"alice","mode":"maybe"}`,
	}
	// Reset ignores cost and mode, so those two bodies are valid for it.
	ignoredByReset := map[string]bool{bodies[4]: true, bodies[11]: true}
	for _, path := range []string{"/v1/spend", "/v1/check", "/v1/refund", "/v1/reset"} {
		for _, b := range bodies {
			if path == "/v1/reset" && ignoredByReset[b] {
				continue
			}
			r := p.post(path, b)
			var e wire.ErrorResponse
			if r.Status < 400 || r.Status > 499 || json.Unmarshal(r.Body, &e) != nil || e.Error.Code == "" {
				t.Errorf("POST %s %.60q: %d %s, want a 4xx JSON error", path, b, r.Status, r.Body)
			}
		}
	}
	if d, err := p.api().Subscriber(context.Background(), "LoginAttemptsPerUser", "alice"); err != nil || d.Remaining != 5 {
		t.Fatalf("alice's bucket changed: %+v %v", d, err)
	}
}

// 64 concurrent HTTP clients on one bucket of burst 100 (an override of
// NewOrdersPerAccount written for this test): exactly 100 allowed.
func TestNoOvershootOverHTTP(t *testing.T) {
	dir := t.TempDir()
	defaults := writeFile(t, dir, "defaults.yaml", "NewOrdersPerAccount:\n  burst: 100\n  count: 100\n  period: 1h\n")
	p := startLimiter(t, procOptions{Env: map[string]string{"LIMITER_DEFAULTS": defaults, "LIMITER_OVERRIDES": writeFile(t, dir, "none.yaml", "[]\n")}})
	var allowed, denied atomic.Int64
	var wg sync.WaitGroup
	c := p.api()
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				a, err := c.Spend(context.Background(), apiclient.Transaction{Limit: "NewOrdersPerAccount", ID: "42"})
				if err != nil {
					t.Errorf("spend: %v", err)
					return
				}
				if a.Allowed {
					allowed.Add(1)
				} else {
					denied.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if allowed.Load() != 100 || denied.Load() != 156 {
		t.Fatalf("allowed %d, denied %d; want exactly 100 and 156", allowed.Load(), denied.Load())
	}
}
