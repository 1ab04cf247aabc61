package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// The forward-auth rows (-sources forwardauth): the same GET requests
// through nginx, proxied straight to an application, after nginx has
// asked the limiter's /v1/forward-auth/{rule} with auth_request, and
// after it has asked a bare net/http handler the same way, in the same
// run, alternating.
const (
	faDirectRow = "nginx → app (direct)"
	faViaRow    = "nginx → limiter forward-auth → app"
	faBareRow   = "nginx → bare net/http forward-auth → app"

	// faRule is the rule nginx asks, faLimit its one limit, faHeader the
	// request header its ids come from.
	faRule   = "bench"
	faLimit  = "BenchForwardAuth"
	faHeader = "X-Api-Key"

	// faDefaults is the limiter's whole defaults file for these rows: one
	// GCRA limit far above what any id is asked for (10,000 ids share
	// the load, so each sees a few requests a second), so that every
	// request is allowed and both rows answer the same.
	faDefaults = `# The harness's forward-auth rows: one generous limit, nothing denied.
` + faLimit + `:
  enum: 2000000010
  id: string
  burst: 1000000
  count: 1000000
  period: 1s
`

	// faRules is the limiter's forward-auth rules file: the limit counted
	// per faHeader, nginx on loopback (or on the Unix socket, with
	// -forward-auth-unix) trusted as the proxy, and the denial status
	// nginx's auth_request can pass on.
	faRules = `trusted_proxies: [127.0.0.1/32, unix]
rules:
  ` + faRule + `:
    limits:
      - limit: ` + faLimit + `
        id: header:` + faHeader + `
    missing: deny
    deny_status: 403
`

	// faScript is the wrk script of the rows, under the module's root.
	faScript = "bench/harness/forward_auth.lua"

	// faUpstreamBody is what the application answers.
	faUpstreamBody = "ok\n"
)

// forwardAuthRequest is the open loop's request of the rows, the one
// forward_auth.lua sends: GET / with one of 10,000 ids in faHeader.
func forwardAuthRequest(i int, host string) []byte {
	return fmt.Appendf(nil, "GET / HTTP/1.1\r\nHost: %s\r\n%s: key-%d\r\n\r\n", host, faHeader, i+1)
}

// forwardAuthSetup is what the rows share: one application, one limiter,
// one bare forward-auth handler, one nginx serving them all.
type forwardAuthSetup struct {
	limiter *server
	bare    *server
	nginx   *nginxProcess
	workers int
	// The ports of the application, the limiter and the bare handler,
	// whose closed connections tell whether nginx keeps its connections
	// to them.
	appPort, limiterPort, barePort int
	// unix: the limiter and the bare handler listen on Unix sockets (no
	// port, no TIME_WAIT) in sockDir.
	unix    bool
	sockDir string
}

// authPort is the port of the server row's nginx asks, 0 for none (the
// direct row) or a Unix socket.
func (fa *forwardAuthSetup) authPort(row *server) int {
	switch row.auth {
	case fa.limiter:
		return fa.limiterPort
	case fa.bare:
		return fa.barePort
	}
	return 0
}

// faFigures are what a forward-auth row measures besides the other rows'
// figures.
type faFigures struct {
	// authCPUPerReq is the part of cpuPerReq (µs) of the server nginx
	// asks: the limiter, or the bare handler; 0 in the direct row.
	authCPUPerReq float64
	// TIME_WAIT sockets to the application's port and to that of the
	// server nginx asks, right after the closed loop: connections closed
	// in the last minute. Where nginx keeps its connections, a handful;
	// where it does not, nearly one per request.
	timeWaitApp, timeWaitAuth int
	// otherCores and openOtherCores are the CPU time the rest of the
	// machine used while the closed loop and the open loop ran, in cores:
	// everything but nginx, the limiter, the bare handler, wrk and the
	// harness, the
	// kernel's own network work outside their time included. The same
	// small figure in every round is the kernel's; more in one round is
	// another process competing. The machine's figure is counted in
	// clock ticks, the processes' more finely, so on cores that are
	// mostly idle (the open loop) it comes out low, even below 0.
	otherCores, openOtherCores float64
}

// forwardAuthRows starts the limiter (memory source, the files above
// written into dir), the bare forward-auth handler (bareBin, bench/bare)
// and nginx, checks that every server answers as it should, and returns
// the three rows and what stops their processes.
//
// With unix, the limiter and the bare handler listen on Unix sockets in
// a directory of their own, and nginx asks them there: the deployment for
// a limiter on the proxy's host.
//
// With goApp, the application is a small Go net/http server in this
// process rather than the static answer inside nginx.
func forwardAuthRows(ctx context.Context, dir, limiterBin, bareBin string, env []string, workers int, unix, goApp bool) ([]*server, func(), error) {
	if _, err := os.Stat(nginxBinary); err != nil {
		return nil, nil, fmt.Errorf("the forward-auth rows need nginx at %s: apt-get install -y nginx", nginxBinary)
	}
	defaults := filepath.Join(dir, "forward-auth-defaults.yaml")
	rules := filepath.Join(dir, "forward-auth-rules.yaml")
	overrides := filepath.Join(dir, "forward-auth-overrides.yaml")
	for path, text := range map[string]string{defaults: faDefaults, rules: faRules, overrides: "[]\n"} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return nil, nil, err
		}
	}
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	fa := &forwardAuthSetup{workers: workers, unix: unix}
	listen, bareListen := "127.0.0.1:0", "127.0.0.1:0"
	if unix {
		// A directory of its own that nginx's workers, another user
		// when the harness runs as root, may pass through: dir and its
		// parents may not let them.
		sockDir, err := os.MkdirTemp("", "limiter-sock-")
		if err == nil {
			err = os.Chmod(sockDir, 0o711)
		}
		if err != nil {
			return nil, nil, err
		}
		defer func() {
			if fa.nginx == nil { // not started: nothing will use it
				os.RemoveAll(sockDir)
			}
		}()
		fa.sockDir = sockDir
		listen = "unix:" + filepath.Join(sockDir, "limiter.sock")
		bareListen = "unix:" + filepath.Join(sockDir, "bare.sock")
	}
	fa.limiter = &server{name: "limiter for forward-auth", cmd: []string{limiterBin, "serve"}, env: slices.Concat(env, []string{
		"LIMITER_LISTEN=" + listen, "LIMITER_DEFAULTS=" + defaults,
		"LIMITER_OVERRIDES=" + overrides,
		"LIMITER_FORWARD_AUTH=" + rules})}
	// The bare handler gets the garbage collector's policy the bare
	// spend handler gets, for the reason given there (run).
	fa.bare = &server{name: "bare forward-auth", cmd: []string{bareBin, "-forward-auth", faHeader, "-listen", bareListen},
		env: slices.Concat(env, []string{"GOGC=1600"})}
	stop := func() {
		if fa.nginx != nil {
			fa.nginx.stop()
		}
		fa.limiter.stop()
		fa.bare.stop()
		if fa.sockDir != "" {
			os.RemoveAll(fa.sockDir)
		}
	}
	for _, s := range []*server{fa.limiter, fa.bare} {
		if err := s.start(); err != nil {
			stop()
			return nil, nil, err
		}
	}
	if unix {
		// nginx's workers run as another user (nobody, when the
		// harness runs as root); the sockets are their owners' and
		// groups' alone.
		for _, l := range []string{listen, bareListen} {
			if err := os.Chmod(strings.TrimPrefix(l, "unix:"), 0o666); err != nil {
				stop()
				return nil, nil, err
			}
		}
	}
	ports, err := freeLoopbackAddrs(4)
	if err != nil {
		stop()
		return nil, nil, err
	}
	conf := nginxConf{
		Prefix: filepath.Join(dir, "nginx"), Workers: workers,
		Upstream: ports[0], App: ports[0], Direct: ports[1], ForwardAuth: ports[2], BareForwardAuth: ports[3],
		Limiter: strings.TrimPrefix(fa.limiter.url, "http://"), Bare: strings.TrimPrefix(fa.bare.url, "http://"), Rule: faRule,
	}
	if goApp {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stop()
			return nil, nil, err
		}
		app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, faUpstreamBody)
		})}
		go func() { _ = app.Serve(ln) }()
		stopNginxAndLimiter := stop
		stop = func() { stopNginxAndLimiter(); app.Close() }
		conf.App = ln.Addr().String()
	}
	if fa.appPort, err = portOf(conf.App); err != nil {
		stop()
		return nil, nil, err
	}
	if !unix {
		if fa.limiterPort, err = portOf(conf.Limiter); err != nil {
			stop()
			return nil, nil, err
		}
		if fa.barePort, err = portOf(conf.Bare); err != nil {
			stop()
			return nil, nil, err
		}
	}
	fa.nginx, err = startNginx(ctx, conf, ports...)
	if err != nil {
		stop()
		return nil, nil, err
	}
	rows := []*server{
		{name: faDirectRow, url: "http://" + conf.Direct, forwardAuth: fa},
		{name: faViaRow, url: "http://" + conf.ForwardAuth, forwardAuth: fa, auth: fa.limiter},
		{name: faBareRow, url: "http://" + conf.BareForwardAuth, forwardAuth: fa, auth: fa.bare},
	}
	if err := preflightForwardAuth(ctx, rows[0].url, rows[1].url, rows[2].url); err != nil {
		stop()
		return nil, nil, err
	}
	return rows, stop, nil
}

// freeLoopbackAddrs returns n distinct loopback addresses free a moment
// ago, held open together so that no two are the same.
func freeLoopbackAddrs(n int) ([]string, error) {
	var addrs []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// errPreflight wraps every way the forward-auth servers answer otherwise
// than the rows assume.
var errPreflight = errors.New("forward-auth preflight")

// preflightForwardAuth checks, before anything is measured, that every
// server passes a request with an id to the application, and that each
// forward-auth server (via) really asks its handler: a request without an
// id is refused (the rule's missing: deny, 403; the bare handler's 403),
// which nginx answers as 429, where the direct server lets it through.
func preflightForwardAuth(ctx context.Context, direct string, via ...string) error {
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	get := func(url string, withID bool) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/", nil)
		if err != nil {
			return 0, "", err
		}
		if withID {
			req.Header.Set(faHeader, "key-preflight")
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	type check struct {
		url    string
		withID bool
		status int
		body   string // "" for any
	}
	checks := []check{{direct, true, http.StatusOK, faUpstreamBody}, {direct, false, http.StatusOK, faUpstreamBody}}
	for _, v := range via {
		checks = append(checks, check{v, true, http.StatusOK, faUpstreamBody}, check{v, false, http.StatusTooManyRequests, ""})
	}
	for _, c := range checks {
		status, body, err := get(c.url, c.withID)
		if err != nil {
			return fmt.Errorf("%w: GET %s/: %w", errPreflight, c.url, err)
		}
		if status != c.status || (c.body != "" && body != c.body) {
			return fmt.Errorf("%w: GET %s/ (id sent: %v) answered %d %q, want %d", errPreflight, c.url, c.withID, status, body, c.status)
		}
	}
	return nil
}

// measureForwardAuth is measure for a forward-auth row: wrk's warm-up and
// measured run with the CPU time of nginx, the server nginx asks and wrk
// itself read around it, then the open loop at its own, moderate rate. Around
// both, what the rest of the machine used is read too, to tell a
// disturbed round.
func measureForwardAuth(s *server, script string, o options) (result, error) {
	var r result
	fa := s.forwardAuth
	if o.duration > 0 {
		if _, _, err := wrk(s, script, o.warmup, o); err != nil {
			return r, err
		}
		before, err := fa.snapshot()
		if err != nil {
			return r, err
		}
		out, wrkCPU, err := wrk(s, script, o.duration, o)
		if err != nil {
			return r, err
		}
		after, err := fa.snapshot()
		if err != nil {
			return r, err
		}
		requests, rps, p50, p99, errs, err := parseWrk(out)
		if err != nil {
			return r, err
		}
		if requests == 0 {
			return r, fmt.Errorf("wrk made no request:\n%s", out)
		}
		perReq := func(seconds float64) float64 { return seconds / float64(requests) * 1e6 }
		r.rps, r.p50, r.p99, r.errors = rps, p50, p99, errs
		switch s.auth {
		case fa.limiter:
			r.fa.authCPUPerReq = perReq(after.limiter - before.limiter)
		case fa.bare:
			r.fa.authCPUPerReq = perReq(after.bare - before.bare)
		}
		r.cpuPerReq = perReq(after.nginx-before.nginx) + r.fa.authCPUPerReq
		r.clientCPUPerReq = perReq(wrkCPU.Seconds())
		r.fa.otherCores = otherCores(before, after, wrkCPU.Seconds())
		if r.fa.timeWaitApp, err = timeWaitCount(fa.appPort); err != nil {
			return r, err
		}
		if port := fa.authPort(s); port != 0 {
			if r.fa.timeWaitAuth, err = timeWaitCount(port); err != nil {
				return r, err
			}
		}
	}
	before, err := fa.snapshot()
	if err != nil {
		return r, err
	}
	if r.open, err = openLoop(s.url, forwardAuthRequest, o.faRate, o.openFor); err != nil {
		return r, err
	}
	if r.open.failed > 0 { // every row must reach the application
		return r, fmt.Errorf("open loop: %d requests failed", r.open.failed)
	}
	after, err := fa.snapshot()
	if err != nil {
		return r, err
	}
	r.fa.openOtherCores = otherCores(before, after, 0)
	return r, nil
}

// cpuSnapshot is the CPU time, in seconds, that nginx, the limiter, the
// bare handler, the harness itself and the whole machine had used at one
// moment.
type cpuSnapshot struct {
	at                               time.Time
	nginx, limiter, bare, own, total float64
}

func (fa *forwardAuthSetup) snapshot() (cpuSnapshot, error) {
	var s cpuSnapshot
	var err error
	if s.nginx, err = fa.nginx.cpuSeconds(); err != nil {
		return s, err
	}
	if s.limiter, err = cpuSeconds(fa.limiter.proc.Process.Pid); err != nil {
		return s, err
	}
	if s.bare, err = cpuSeconds(fa.bare.proc.Process.Pid); err != nil {
		return s, err
	}
	if s.own, err = ownCPUSeconds(); err != nil {
		return s, err
	}
	if s.total, err = busySeconds(); err != nil {
		return s, err
	}
	s.at = time.Now()
	return s, nil
}

// otherCores is what the rest of the machine used between two snapshots,
// in cores: the machine's busy time less nginx's, the limiter's, the
// bare handler's, the harness's and load's (wrk's CPU time, 0 for the
// harness's own open loop).
func otherCores(before, after cpuSnapshot, load float64) float64 {
	ours := (after.nginx - before.nginx) + (after.limiter - before.limiter) + (after.bare - before.bare) + (after.own - before.own) + load
	return ((after.total - before.total) - ours) / after.at.Sub(before.at).Seconds()
}
