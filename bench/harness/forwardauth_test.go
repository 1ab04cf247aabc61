package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/forwardauth"
)

// The limiter's files for the forward-auth rows load with the limiter's
// own loader, and say what the rows assume: one rule asked by nginx
// (deny status 403), its ids from the header the load sends, nginx on
// loopback trusted, and a limit no id of the load comes near.
func TestForwardAuthFilesLoad(t *testing.T) {
	cfg, err := configfile.Parse("forward-auth-defaults.yaml", []byte(faDefaults), "", nil)
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	rules, err := configfile.ParseForwardAuth("forward-auth-rules.yaml", []byte(faRules), cfg)
	if err != nil {
		t.Fatalf("rules: %v", err)
	}
	rule, ok := rules.Rule(faRule)
	if !ok {
		t.Fatalf("no rule %q", faRule)
	}
	want := []forwardauth.Entry{{Limit: faLimit, Source: forwardauth.Source{Kind: forwardauth.Header, Arg: faHeader}}}
	if len(rule.Limits) != 1 || rule.Limits[0] != want[0] {
		t.Errorf("rule limits = %+v, want %+v", rule.Limits, want)
	}
	if rule.DenyStatus != http.StatusForbidden || rule.Missing != forwardauth.MissingDeny {
		t.Errorf("deny status %d, missing %v: want 403 (what auth_request passes on) and deny", rule.DenyStatus, rule.Missing)
	}
	if !rules.Trusts(netip.MustParseAddr("127.0.0.1")) {
		t.Error("nginx on 127.0.0.1 is not trusted")
	}
	info, ok := cfg.Lookup(faLimit)
	if !ok {
		t.Fatalf("no limit %s", faLimit)
	}
	l, ok := cfg.Default(info.Name)
	if !ok {
		t.Fatalf("limit %s has no default", faLimit)
	}
	// 10,000 ids share the load: even at 200,000 req/s each id is asked
	// 20 times a second.
	if perSecond := float64(l.Count) / l.Period.Seconds(); l.Burst < 10_000 || perSecond < 10_000 {
		t.Errorf("limit %s allows a burst of %d and %.0f per second: not far above what the load asks of an id", faLimit, l.Burst, perSecond)
	}
}

// The open loop's request is a well-formed GET carrying the id in the
// header the rule reads, and the wrk script sends the same header.
func TestForwardAuthRequest(t *testing.T) {
	raw := forwardAuthRequest(41, "127.0.0.1:8080")
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		t.Fatalf("ReadRequest(%q): %v", raw, err)
	}
	if req.Method != http.MethodGet || req.URL.Path != "/" || req.Host != "127.0.0.1:8080" || req.Header.Get(faHeader) != "key-42" || req.ContentLength != 0 {
		t.Errorf("request %q: %s %s host %q, %s %q, length %d", raw, req.Method, req.URL.Path, req.Host, faHeader, req.Header.Get(faHeader), req.ContentLength)
	}
	script, err := os.ReadFile("forward_auth.lua")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), `["`+faHeader+`"] = "key-"`) || !strings.Contains(string(script), `wrk.format("GET", "/"`) {
		t.Errorf("forward_auth.lua does not send GET / with %s: key-N:\n%s", faHeader, script)
	}
}

// The preflight lets the rows measure only when both servers reach the
// application with an id and the forward-auth one refuses a request
// without one, which only a limiter that is asked can do.
func TestPreflightForwardAuth(t *testing.T) {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(faUpstreamBody)) })
	limited := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(faHeader) == "" {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		app(w, r)
	})
	broken := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	wrongBody := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("welcome")) })
	for _, c := range []struct {
		name   string
		direct http.Handler
		via    []http.Handler
		ok     bool
	}{
		{"the limiter asked", app, []http.Handler{limited}, true},
		{"the limiter and the bare handler asked", app, []http.Handler{limited, limited}, true},
		{"the limiter not asked: requests without an id pass", app, []http.Handler{app}, false},
		{"the bare handler not asked", app, []http.Handler{limited, app}, false},
		{"the application unreachable through the limiter", app, []http.Handler{broken}, false},
		{"the direct server refuses requests without an id", limited, []http.Handler{limited}, false},
		{"the direct server answers something else", wrongBody, []http.Handler{limited}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			direct := httptest.NewServer(c.direct)
			defer direct.Close()
			var via []string
			for _, h := range c.via {
				srv := httptest.NewServer(h)
				defer srv.Close()
				via = append(via, srv.URL)
			}
			err := preflightForwardAuth(context.Background(), direct.URL, via...)
			if c.ok && err != nil {
				t.Errorf("refused: %v", err)
			}
			if !c.ok && !errors.Is(err, errPreflight) {
				t.Errorf("error %v, want one wrapping errPreflight", err)
			}
		})
	}
}

// The verdict compares the rows' medians with the targets: the added p50
// of the open loop against direct, the throughput ratio of the closed
// loop against the bare handler's row, and errors.
func TestJudgeForwardAuth(t *testing.T) {
	row := func(rps, p50, openP50 float64, errs int64) result {
		return result{rps: rps, p50: p50, errors: errs, open: openLoopResult{p50: openP50}}
	}
	direct := []result{row(20000, 2.0, 0.20, 0), row(21000, 1.9, 0.25, 0), row(19000, 2.1, 0.22, 0)}
	bare := []result{row(12000, 2.5, 0.30, 0), row(11000, 2.6, 0.32, 0), row(1000, 9.0, 4.00, 0)}
	for _, c := range []struct {
		name      string
		direct    []result
		via       []result
		bare      []result
		addedP50  float64
		ratio     float64
		errors    int64
		wantLines []string
	}{
		{
			name:     "both met: medians, not means, and the open loop's p50",
			direct:   direct,
			via:      []result{row(12000, 3.0, 0.40, 0), row(10000, 3.5, 0.45, 0), row(2000, 9.0, 5.00, 0)},
			bare:     bare,
			addedP50: 0.45 - 0.22, ratio: 10000.0 / 11000, errors: 0,
			wantLines: []string{"PASS: added p50", "PASS: throughput", "PASS: errors"},
		},
		{
			name:     "just under 0.9 of the bare handler's throughput",
			direct:   direct,
			via:      []result{row(9800, 3.0, 0.40, 0), row(9800, 3.0, 0.40, 0), row(9800, 3.0, 0.40, 0)},
			bare:     bare,
			addedP50: 0.40 - 0.22, ratio: 9800.0 / 11000, errors: 0,
			wantLines: []string{"PASS: added p50", "FAIL: throughput", "PASS: errors"},
		},
		{
			name:     "added p50 above 0.3 ms",
			direct:   direct,
			via:      []result{row(10000, 3.0, 0.60, 0), row(10000, 3.0, 0.55, 0), row(10000, 3.0, 0.58, 0)},
			bare:     bare,
			addedP50: 0.58 - 0.22, ratio: 10000.0 / 11000, errors: 0,
			wantLines: []string{"FAIL: added p50", "PASS: throughput", "PASS: errors"},
		},
		{
			name:     "below 0.9 of the bare handler's throughput, and errors",
			direct:   direct,
			via:      []result{row(8000, 3.0, 0.30, 2), row(8700, 3.0, 0.30, 0), row(7000, 3.0, 0.30, 0)},
			bare:     []result{row(12000, 2.5, 0.30, 1), row(11000, 2.6, 0.32, 0), row(1000, 9.0, 4.00, 0)},
			addedP50: 0.30 - 0.22, ratio: 8000.0 / 11000, errors: 3,
			wantLines: []string{"PASS: added p50", "FAIL: throughput", "FAIL: errors"},
		},
		{
			name:     "no closed loop: the throughput target is not met by default",
			direct:   []result{row(0, 0, 0.20, 0)},
			via:      []result{row(0, 0, 0.30, 0)},
			bare:     []result{row(0, 0, 0.25, 0)},
			addedP50: 0.10, ratio: 0, errors: 0,
			wantLines: []string{"PASS: added p50", "FAIL: throughput not measured", "PASS: errors"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := judgeForwardAuth(c.direct, c.via, c.bare)
			if !near(v.addedP50, c.addedP50) || !near(v.ratio, c.ratio) || v.errors != c.errors {
				t.Errorf("verdict %+v, want added p50 %.3f, ratio %.3f, errors %d", v, c.addedP50, c.ratio, c.errors)
			}
			lines := v.lines(2000)
			if len(lines) != len(c.wantLines) {
				t.Fatalf("lines %q, want %d", lines, len(c.wantLines))
			}
			for i, want := range c.wantLines {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("line %d = %q, want it to start with %q", i, lines[i], want)
				}
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// A row whose closed loop left more closed connections to the server
// nginx asks than one per hundred requests is flagged: nginx is opening a
// connection per subrequest.
func TestKeepaliveWarning(t *testing.T) {
	kept := result{rps: 10000, fa: faFigures{timeWaitAuth: 130}}
	closed := result{rps: 10000, fa: faFigures{timeWaitAuth: 60000}}
	if w := keepaliveWarning("the limiter", []result{kept, kept}, 10); w != "" {
		t.Errorf("warned of kept connections: %s", w)
	}
	if w := keepaliveWarning("the bare handler", []result{kept, closed}, 10); !strings.Contains(w, "round 2") || !strings.Contains(w, "the bare handler") {
		t.Errorf("warning %q, want one naming round 2 and the bare handler", w)
	}
}

// parseWrk counts both non-2xx answers and socket errors as errors: the
// forward-auth rows expect none of either.
func TestParseWrk(t *testing.T) {
	const out = `Running 10s test @ http://127.0.0.1:40123
  2 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     2.71ms    3.93ms  60.70ms   91.75%
    Req/Sec    10.23k     1.02k   12.71k    70.50%
  Latency Distribution
     50%    1.69ms
     75%    2.83ms
     90%    5.38ms
     99%   20.42ms
  203606 requests in 10.00s, 29.12MB read
  Socket errors: connect 0, read 3, write 0, timeout 2
  Non-2xx or 3xx responses: 7
Requests/sec:  20356.42
Transfer/sec:      2.91MB
`
	requests, rps, p50, p99, errs, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	if requests != 203606 || rps != 20356.42 || p50 != 1.69 || p99 != 20.42 || errs != 12 {
		t.Errorf("parseWrk = %d requests, %.2f req/s, p50 %.2f, p99 %.2f, %d errors; want 203606, 20356.42, 1.69, 20.42, 12",
			requests, rps, p50, p99, errs)
	}
	clean := strings.NewReplacer("  Socket errors: connect 0, read 3, write 0, timeout 2\n", "", "  Non-2xx or 3xx responses: 7\n", "", "1.69ms", "850.00us").Replace(out)
	if _, _, p50, _, errs, err := parseWrk(clean); err != nil || errs != 0 || p50 != 0.85 {
		t.Errorf("clean run: p50 %.2f, %d errors, %v; want 0.85 ms, 0, nil", p50, errs, err)
	}
	if _, _, _, _, _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused\n"); err == nil {
		t.Error("read figures from a failed run")
	}
}

// The whole setup, with nginx, and a limiter and bench/bare built from
// this tree: every row answers, the rows that ask are refused without an
// id, and nginx keeps its connections to the limiter and to the bare
// handler (a handful closed for hundreds of requests), which is what the
// auth location's settings are for.
func TestForwardAuthRowsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the limiter and starts nginx")
	}
	if _, err := os.Stat(nginxBinary); err != nil {
		t.Skipf("no nginx: %v", err)
	}
	// The builds come before the run's deadline: on a cold build cache
	// they alone can take most of it, and go test's own -timeout bounds
	// them.
	dir := t.TempDir()
	bin := buildLimiter(context.Background(), t, dir)
	bare := buildBare(context.Background(), t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rows, stop, err := forwardAuthRows(ctx, dir, bin, bare, nil, 1, false, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if len(rows) != 3 || rows[0].name != faDirectRow || rows[1].name != faViaRow || rows[2].name != faBareRow {
		t.Fatalf("rows %v %v %v", rows[0].name, rows[1].name, rows[2].name)
	}
	fa := rows[1].forwardAuth
	if rows[0].auth != nil || rows[1].auth != fa.limiter || rows[2].auth != fa.bare {
		t.Errorf("the rows ask %v, %v and %v; want nothing, the limiter and the bare handler", rows[0].auth, rows[1].auth, rows[2].auth)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	const requests = 300
	for _, row := range rows[1:] {
		port := fa.authPort(row)
		before, err := timeWaitCount(port)
		if err != nil {
			t.Fatal(err)
		}
		for i := range requests {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, row.url+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(faHeader, "key-"+strings.Repeat("7", i%5+1))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := new(bytes.Buffer)
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || body.String() != faUpstreamBody {
				t.Fatalf("%s, request %d: %d %q", row.name, i, resp.StatusCode, body)
			}
		}
		after, err := timeWaitCount(port)
		if err != nil {
			t.Fatal(err)
		}
		if closed := after - before; closed > 10 {
			t.Errorf("%s: %d connections to %s closed for %d requests: nginx does not keep them", row.name, closed, row.auth.name, requests)
		}
	}
	// nginx's CPU time is read from its master and every worker; 300
	// requests can take less than the clock tick /proc counts in, so the
	// check is that every process was found and read, not the amount.
	if len(fa.nginx.workers) != fa.workers {
		t.Errorf("found %d nginx workers, want %d", len(fa.nginx.workers), fa.workers)
	}
	if n, err := fa.nginx.cpuSeconds(); err != nil || n < 0 {
		t.Errorf("nginx CPU time %v, %v", n, err)
	}
	stop()

	// -forward-auth-unix: the same rows with the limiter on a Unix
	// socket. forwardAuthRows checks them before it returns: the direct
	// row answers without an id, the other asks the limiter, which
	// refuses it.
	unixRows, stopUnix, err := forwardAuthRows(ctx, t.TempDir(), bin, bare, nil, 1, true, true)
	if err != nil {
		t.Fatalf("over a Unix socket: %v", err)
	}
	defer stopUnix()
	ufa := unixRows[1].forwardAuth
	if !ufa.unix || !strings.HasPrefix(ufa.limiter.url, "http://unix:") || !strings.HasPrefix(ufa.bare.url, "http://unix:") {
		t.Errorf("the limiter is at %s, the bare handler at %s; want Unix sockets", ufa.limiter.url, ufa.bare.url)
	}
}

// buildArgs are go's arguments to build pkg into bin, under the race
// detector when the tests run under it.
func buildArgs(bin, pkg string) []string {
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	return append(args, pkg)
}

// buildBare builds this tree's bench/bare into dir.
func buildBare(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	bin := dir + "/bare"
	if out, err := exec.CommandContext(ctx, "go", buildArgs(bin, "github.com/limiter-dev/limiter/bench/bare")...).CombinedOutput(); err != nil {
		t.Fatalf("building bench/bare: %v\n%s", err, out)
	}
	return bin
}

// buildLimiter builds this tree's limiter into dir.
func buildLimiter(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	bin := dir + "/limiter"
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// Built in the service's own module, with its own go.sum.
	build := exec.CommandContext(ctx, "go", buildArgs(bin, "./cmd/limiter")...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the limiter: %v\n%s", err, out)
	}
	return bin
}
