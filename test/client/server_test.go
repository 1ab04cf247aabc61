package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmhodges/clock"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/client"
	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/decisionmetrics"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/source/memory"
	"github.com/limiter-dev/limiter/topdenied"
)

// testDefaults are the limits the tests' service knows: a GCRA limit of
// string ids, one of accounts with an override, one of IPv6 ranges, one
// with a penalty box, two rate counters, a shadow limit and a sliding
// window.
const testDefaults = `
Logins:
  enum: 101
  id: string
  burst: 3
  count: 3
  period: 1m
Orders:
  enum: 102
  id: account
  burst: 10
  count: 10
  period: 1h
Ranges:
  enum: 103
  id: ipv6-range
  burst: 2
  count: 2
  period: 1s
Lockout:
  enum: 104
  id: string
  burst: 2
  count: 2
  period: 1h
  penalty: 10m
Hits:
  enum: 105
  id: ip
  algorithm: rate-counter
  window: 60s
  rate: 10
  penalty: 5m
Trial:
  enum: 106
  id: string
  burst: 1
  count: 1
  period: 1h
  shadow: true
Hourly:
  enum: 107
  id: string
  algorithm: sliding-window
  count: 5
  period: 1h
Spikes:
  enum: 108
  id: ip
  algorithm: rate-counter
  window: 10s
  rate: 10
  penalty: 1m
Exports:
  enum: 109
  id: string
  algorithm: concurrency
  count: 2
  period: 1s
`

const testOverrides = `
- Orders:
    burst: 20
    count: 20
    period: 1h
    ids:
      - id: "7"
- Ranges:
    burst: 4
    count: 4
    period: 1s
    ids:
      - id: "2001:db8:1::/48"
`

// testReloadStatus is what the test service answers GET
// /v1/admin/reload with: a failed attempt after the load in use.
var testReloadStatus = wire.ReloadStatusResponse{
	LastAttempt: wire.ReloadAttempt{At: "2026-11-22T00:05:00Z", Trigger: "SIGHUP", Problems: []string{"overrides.yaml:3: no such limit"}},
	InUse: wire.ReloadAttempt{At: "2026-11-22T00:00:00Z", Trigger: "startup", OK: true, Files: []wire.ReloadFile{
		{File: "defaults", Path: "defaults.yaml", Entries: "9"},
		{File: "overrides", Path: "overrides.yaml", Entries: "2"},
	}},
}

// start is the fake clock's time when a test server starts.
var start = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// serverOptions say how to build a test service.
type serverOptions struct {
	apiTokens, adminTokens []string
	failOpen               bool
	// reload, when set, serves POST /v1/admin/reload; GET then answers
	// testReloadStatus.
	reload func() error
	// wrap, when set, stands between the listener and the API handler.
	wrap func(http.Handler) http.Handler
}

// testServer is the real API handler on a memory source and a fake
// clock, served by httptest over loopback TCP.
type testServer struct {
	*httptest.Server
	clock  clock.FakeClock
	source *faultySource
	// conns counts the TCP connections the server accepted.
	conns atomic.Int64
}

// newServer starts a test service; it stops when the test ends.
func newServer(t *testing.T, o serverOptions) *testServer {
	t.Helper()
	cfg, err := configfile.Parse("defaults.yaml", []byte(testDefaults), "overrides.yaml", []byte(testOverrides))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(start)
	src := &faultySource{Source: memory.New(0)}
	var opts []ratelimits.Option
	if o.failOpen {
		opts = append(opts, ratelimits.WithFailOpen())
	}
	l, err := ratelimits.NewLimiter(cfg, src, clk, opts...)
	if err != nil {
		t.Fatal(err)
	}
	top := topdenied.New(clk)
	reg := prometheus.NewRegistry()
	apiOpts := httpapi.Options{
		Limiter: l, APITokens: bytesOf(o.apiTokens), AdminTokens: bytesOf(o.adminTokens), Reload: o.reload,
		Registry: reg, Decisions: decisionmetrics.New(reg, decisionmetrics.WithDenials(top)), TopDenied: top,
	}
	if o.reload != nil {
		apiOpts.ReloadStatus = func() wire.ReloadStatusResponse { return testReloadStatus }
	}
	var h http.Handler = httpapi.New(apiOpts)
	if o.wrap != nil {
		h = o.wrap(h)
	}
	s := &testServer{clock: clk, source: src}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func bytesOf(ss []string) [][]byte {
	var out [][]byte
	for _, s := range ss {
		out = append(out, []byte(s))
	}
	return out
}

// newClient is a Client of s with opts (BaseURL filled in) and its own
// default transport; its idle connections close when the test ends.
func newClient(t *testing.T, s *testServer, opts client.Options) *client.Client {
	t.Helper()
	opts.BaseURL = s.URL
	c, err := client.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// fastRetries retry at once, so that tests of retries take no time.
var fastRetries = client.RetryPolicy{MaxRetries: 3, BaseDelay: time.Microsecond, MaxDelay: time.Millisecond}

// fault is how the source fails one spend.
type fault int

const (
	// applyThenFail writes the spend, then reports a failure: the service
	// answers source_outcome_unknown although the spend happened.
	applyThenFail fault = iota + 1
	// failUnapplied writes nothing and reports a failure that certainly
	// changed nothing: source_unavailable.
	failUnapplied
)

var errFault = errors.New("the test's source failed on purpose")

// faultySource is the memory source with failures queued for its next
// spends (keyed or not).
type faultySource struct {
	*memory.Source
	mu     sync.Mutex
	faults []fault
}

// failNext queues faults for the next spends, in order.
func (f *faultySource) failNext(faults ...fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, faults...)
}

func (f *faultySource) next() fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.faults) == 0 {
		return 0
	}
	x := f.faults[0]
	f.faults = f.faults[1:]
	return x
}

func (f *faultySource) Spend(ctx context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome) error {
	switch f.next() {
	case failUnapplied:
		return errors.Join(errFault, once.ErrNotApplied)
	case applyThenFail:
		if err := f.Source.Spend(ctx, now, ops, outcomes); err != nil {
			return err
		}
		return errFault
	}
	return f.Source.Spend(ctx, now, ops, outcomes)
}

func (f *faultySource) SpendOnce(ctx context.Context, now int64, rec once.Record, ops []bucket.Op, outcomes []bucket.Outcome) (bool, error) {
	switch f.next() {
	case failUnapplied:
		return false, errors.Join(errFault, once.ErrNotApplied)
	case applyThenFail:
		if _, err := f.Source.SpendOnce(ctx, now, rec, ops, outcomes); err != nil {
			return false, err
		}
		return false, errFault
	}
	return f.Source.SpendOnce(ctx, now, rec, ops, outcomes)
}

// seen is what a recording handler saw of one request.
type seen struct {
	method, path, auth, key string
}

// recorder records requests, in order, and passes them on to the API,
// but for those it has an answer of its own for.
type recorder struct {
	// answers replace the API's answer to the request of their index
	// (0 for the first the recorder sees).
	answers map[int]http.HandlerFunc
	mu      sync.Mutex
	reqs    []seen
}

func (rc *recorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		n := len(rc.reqs)
		rc.reqs = append(rc.reqs, seen{r.Method, r.URL.EscapedPath(), r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key")})
		rc.mu.Unlock()
		if answer, ok := rc.answers[n]; ok {
			answer(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (rc *recorder) all() []seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]seen(nil), rc.reqs...)
}

func (rc *recorder) reset() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.reqs = nil
}
