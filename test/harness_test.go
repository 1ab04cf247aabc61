// Package test holds black-box tests: they build the limiter binary, run it
// as a real process on a loopback port, and talk to it over HTTP only.
package test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apiclient "github.com/limiter-dev/limiter/client"
	"github.com/limiter-dev/limiter/internal/vectors"
)

// binary is the limiter built once for the whole test run by TestMain.
var binary string

// repoRoot is the repository's top directory, where the bundled config is.
var repoRoot string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "limiter-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	repoRoot, err = filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binary = filepath.Join(dir, "limiter")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race") // the service runs under the race detector too
	}
	build := exec.Command("go", append(args, "./cmd/limiter")...)
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the limiter failed: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// limiterProc is one running `limiter serve`.
type limiterProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	URL    string
	mu     sync.Mutex
	stderr bytes.Buffer
	exited chan struct{}
	err    error // the process's exit, valid once exited is closed
	// shared is the Go client of the API without a token, made on first
	// use by api.
	sharedOnce sync.Once
	shared     *apiclient.Client
}

var listeningLine = regexp.MustCompile(`msg=listening addr=(\S+)`)

// procOptions say how to start a limiter. Env is added to a clean
// environment (PATH and HOME only), so the host's LIMITER_* never leak in.
type procOptions struct {
	Args []string
	Env  map[string]string
	Dir  string // working directory; the repository root when empty
}

// startLimiter starts `limiter serve` on a free loopback port (unless
// LIMITER_LISTEN or --listen says otherwise), waits until it listens, and
// stops it when the test ends.
func startLimiter(t *testing.T, opts procOptions) *limiterProc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve"}, opts.Args...)...)
	cmd.Dir = opts.Dir
	if cmd.Dir == "" {
		cmd.Dir = repoRoot
	}
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LIMITER_LISTEN=127.0.0.1:0"}
	for k, v := range opts.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &limiterProc{t: t, cmd: cmd, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listeningLine.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.stop)
	select {
	case a := <-addr:
		p.URL = "http://" + a
	case <-p.exited:
		t.Fatalf("limiter exited before listening (%v):\n%s", p.err, p.logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("limiter did not listen within 30s:\n%s", p.logs())
	}
	return p
}

func (p *limiterProc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// stop sends SIGTERM and waits for a clean exit; a crash or a race report
// fails the test.
func (p *limiterProc) stop() {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
			p.t.Errorf("limiter did not stop within 20s of SIGTERM:\n%s", p.logs())
			return
		}
	}
	if p.err != nil {
		p.t.Errorf("limiter exited with %v:\n%s", p.err, p.logs())
	}
	if logs := p.logs(); strings.Contains(logs, "WARNING: DATA RACE") || strings.Contains(logs, "panic") {
		p.t.Errorf("limiter logged a race or a panic:\n%s", logs)
	}
}

// api is the process's Go client of the API, without a token: the one
// the tests call the API through, unless what they test is the wire
// itself (bad input, exact headers or bodies).
func (p *limiterProc) api() *apiclient.Client {
	p.sharedOnce.Do(func() { p.shared = p.apiWith(apiclient.Options{}) })
	return p.shared
}

// apiWith is a new Go client of the process's API with opts (tokens, say).
// Unless opts says otherwise it sends every call once: the tests count
// what the service answers, so no retry may hide an answer.
func (p *limiterProc) apiWith(opts apiclient.Options) *apiclient.Client {
	p.t.Helper()
	opts.BaseURL = p.URL
	if opts.Retry == (apiclient.RetryPolicy{}) {
		opts.Retry.MaxRetries = apiclient.NoRetries
	}
	c, err := apiclient.New(opts)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(c.Close)
	return c
}

// statusOf is the HTTP status a call's error stands for: 200 for none,
// the refusal's status for an *Error, and 0 (with ok false) for an error
// that got no answer.
func statusOf(err error) (status int, ok bool) {
	var e *apiclient.Error
	switch {
	case err == nil:
		return http.StatusOK, true
	case errors.As(err, &e):
		return e.StatusCode, true
	}
	return 0, false
}

// response is an HTTP answer read whole.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

var client = &http.Client{Timeout: 10 * time.Second}

// do sends a request with a JSON body (when body is not empty).
func (p *limiterProc) do(method, path, body string) response {
	p.t.Helper()
	req, err := http.NewRequest(method, p.URL+path, strings.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return p.send(req)
}

func (p *limiterProc) send(req *http.Request) response {
	p.t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v\n%s", req.Method, req.URL.Path, err, p.logs())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func (p *limiterProc) post(path, body string) response { return p.do(http.MethodPost, path, body) }

// advance moves the service's fake clock.
func (p *limiterProc) advance(d time.Duration) error {
	r := p.post("/debug/clock", fmt.Sprintf(`{"advance":%q}`, d.String()))
	if r.Status != 200 {
		return fmt.Errorf("advance: %d %s", r.Status, r.Body)
	}
	return nil
}

// httpDriver runs vector steps through the HTTP API of one or more
// processes, round-robin, all on the same fake clock time.
type httpDriver struct {
	procs []*limiterProc
	next  int
}

func (d *httpDriver) Advance(dur time.Duration) error {
	for _, p := range d.procs {
		if err := p.advance(dur); err != nil {
			return err
		}
	}
	return nil
}

// Do sends one operation through the Go client as a batch (the
// transactions form), whatever its length. A refusal below 500 is a
// result with its status; a 5xx or no answer is an error.
func (d *httpDriver) Do(op string, txns []vectors.Txn) (vectors.Result, error) {
	p := d.procs[d.next%len(d.procs)]
	d.next++
	c, ctx := p.api(), context.Background()
	batch := make([]apiclient.Transaction, len(txns))
	for i, t := range txns {
		batch[i] = apiclient.Transaction{Limit: t.Limit, ID: t.ID, Mode: apiclient.Mode(t.Mode)}
		if t.Cost != nil {
			batch[i] = batch[i].WithCost(*t.Cost)
		}
	}
	var a *apiclient.Decision
	var err error
	switch op {
	case "spend":
		a, err = c.SpendBatch(ctx, batch)
	case "check":
		a, err = c.CheckBatch(ctx, batch)
	case "refund":
		a, err = c.RefundBatch(ctx, batch)
	case "reset":
		_, err = c.ResetBatch(ctx, batch)
		a = &apiclient.Decision{}
	default:
		return vectors.Result{}, fmt.Errorf("unknown op %q", op)
	}
	if err != nil {
		if status, ok := statusOf(err); ok && status < 500 {
			return vectors.Result{Status: status}, nil
		}
		return vectors.Result{}, err
	}
	res := vectors.Result{Status: http.StatusOK, Allowed: a.Allowed, Remaining: a.Remaining,
		RetryIn: a.RetryIn.Milliseconds(), ResetIn: a.ResetIn.Milliseconds()}
	for _, dd := range a.Decisions {
		res.Decisions = append(res.Decisions, vectors.ResultDecision{
			Limit: dd.Limit, ID: dd.ID, Allowed: dd.Allowed, Remaining: dd.Remaining,
			RetryIn: dd.RetryIn.Milliseconds(), ResetIn: dd.ResetIn.Milliseconds(), Algorithm: string(dd.Algorithm),
			HasPenalized: dd.HasPenaltyBox, Penalized: dd.Penalized,
		})
	}
	return res, nil
}

// ERL makes an ERL call through the next process, round-robin with Do.
func (d *httpDriver) ERL(step *vectors.ERLStep) (vectors.ERLResult, error) {
	p := d.procs[d.next%len(d.procs)]
	d.next++
	method, path, body, err := step.HTTPRequest()
	if err != nil {
		return vectors.ERLResult{}, err
	}
	r := p.do(method, path, string(body))
	return vectors.ParseERLAnswer(r.Status, r.Body)
}

// fakeClockStart is where every fake-clock test starts.
const fakeClockStart = "2026-11-22T00:00:00Z"

// vectorsConfig writes the public vectors' config into a temp dir and
// returns the env that points a limiter at it with a fake clock.
func vectorsConfig(t *testing.T) (*vectors.File, map[string]string) {
	t.Helper()
	return configOf(t, vectors.Public)
}

// windowVectorsConfig is vectorsConfig for the window vectors
// (vectors.Windows), whose clock starts where the file says.
func windowVectorsConfig(t *testing.T) (*vectors.File, map[string]string) {
	t.Helper()
	return configOf(t, vectors.Windows)
}

// configOf writes the config of the vectors load returns, and returns the
// env of a limiter on it, its fake clock at the file's start.
func configOf(t *testing.T, load func() (*vectors.File, error)) (*vectors.File, map[string]string) {
	t.Helper()
	f, err := load()
	if err != nil {
		t.Fatal(err)
	}
	defaults, overrides, err := f.WriteConfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	start := f.Start
	if start == "" {
		start = fakeClockStart
	}
	return f, map[string]string{
		"LIMITER_DEFAULTS":  defaults,
		"LIMITER_OVERRIDES": overrides,
		"LIMITER_FAKECLOCK": start,
	}
}

// runVectorsOverHTTP runs the public vectors against procs, which must
// share one bucket store and have been started with vectorsConfig's env.
func runVectorsOverHTTP(t *testing.T, f *vectors.File, procs ...*limiterProc) {
	t.Helper()
	vectors.Run(t, f, &httpDriver{procs: procs}, time.Millisecond)
}

// The window vectors through the binary on the memory source: decisions
// to the millisecond, and every decision's algorithm.
func TestWindowVectorsOverHTTPMemory(t *testing.T) {
	f, env := windowVectorsConfig(t)
	p := startLimiter(t, procOptions{Env: env})
	runVectorsOverHTTP(t, f, p)
}

// writeFile writes content to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
