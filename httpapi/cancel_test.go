package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
)

// hangUpSource stands for a source that is still working when the client
// hangs up: each call cancels the request (hangUp) and blocks until its
// context is done, as a Redis call does. With timeout set, it fails as a
// source that ran out of its own deadline instead.
type hangUpSource struct {
	hangUp  func()
	timeout bool
}

func (s hangUpSource) wait(ctx context.Context) error {
	if s.timeout {
		return fmt.Errorf("read: %w", context.DeadlineExceeded)
	}
	s.hangUp()
	<-ctx.Done()
	return ctx.Err()
}
func (s hangUpSource) Spend(ctx context.Context, _ int64, _ []bucket.Op, _ []bucket.Outcome) error {
	return s.wait(ctx)
}
func (s hangUpSource) Refund(ctx context.Context, _ int64, _ []bucket.Op, _ []bucket.Outcome) error {
	return s.wait(ctx)
}
func (s hangUpSource) SpendOnce(ctx context.Context, _ int64, _ once.Record, _ []bucket.Op, _ []bucket.Outcome) (bool, error) {
	return false, s.wait(ctx)
}
func (s hangUpSource) RefundOnce(ctx context.Context, _ int64, _ once.Record, _ []bucket.Op, _ []bucket.Outcome) (bool, error) {
	return false, s.wait(ctx)
}
func (s hangUpSource) Reset(ctx context.Context, _ int64, _ []bucket.Op) (int, error) {
	return 0, s.wait(ctx)
}
func (s hangUpSource) Ping(ctx context.Context) error { return s.wait(ctx) }
func (s hangUpSource) Call(ctx context.Context, _ int64, _ *bucket.Call, _ *bucket.CallResult) error {
	return s.wait(ctx)
}
func (s hangUpSource) Close() error { return nil }

// A client that hangs up while the source works is counted as such, not
// as a source failure, and is logged at debug level only; a source that
// times out is still a source failure.
func TestClientHangUpIsNotASourceFailure(t *testing.T) {
	requests := []struct{ method, path, body string }{
		{"POST", "/v1/spend", `{"limit":"Logins","id":"a"}`},
		{"POST", "/v1/check", `{"limit":"Logins","id":"a"}`},
		{"POST", "/v1/refund", `{"limit":"Logins","id":"a"}`},
		{"POST", "/v1/reset", `{"limit":"Logins","id":"a"}`},
		{"GET", "/v1/limits/Logins/a", ``},
	}
	tests := []struct {
		name                    string
		timeout, failOpen       bool
		cancelled, sourceErrors int
		degraded                int // always 0: a hang-up is not a degraded answer
		status                  int
		wantLogAbove, wantDebug bool
	}{
		{name: "client hangs up", cancelled: 5, status: 499, wantDebug: true},
		// The subscriber view (the fifth request) does not say whether its
		// answer was degraded, so it is left out with fail-open.
		{name: "client hangs up, fail-open", failOpen: true, cancelled: 4, status: 499, wantDebug: true},
		{name: "source times out", timeout: true, sourceErrors: 5, status: 503, wantLogAbove: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, hangUp := context.WithCancel(context.Background())
			var opts []ratelimits.Option
			if tt.failOpen {
				opts = append(opts, ratelimits.WithFailOpen())
			}
			l, _ := newLimiter(t, hangUpSource{hangUp: func() { hangUp() }, timeout: tt.timeout}, opts...)
			var logs bytes.Buffer
			reg := prometheus.NewRegistry()
			h := httpapi.New(httpapi.Options{Limiter: l, Registry: reg,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			sent := requests
			if tt.failOpen {
				sent = requests[:4]
			}
			for _, rq := range sent {
				ctx, hangUp = context.WithCancel(context.Background())
				req := httptest.NewRequestWithContext(ctx, rq.method, rq.path, strings.NewReader(rq.body))
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != tt.status {
					t.Errorf("%s %s: status %d, want %d: %s", rq.method, rq.path, rec.Code, tt.status, rec.Body)
				}
				hangUp()
			}
			for _, c := range []struct {
				name string
				got  float64
				want int
			}{
				{"limiter_source_errors_total", counter(t, reg, "limiter_source_errors_total"), tt.sourceErrors},
				{"limiter_degraded_answers_total", counter(t, reg, "limiter_degraded_answers_total"), tt.degraded},
				{"limiter_client_cancelled_requests_total", counter(t, reg, "limiter_client_cancelled_requests_total"), tt.cancelled},
			} {
				if c.got != float64(c.want) {
					t.Errorf("%s = %v, want %d", c.name, c.got, c.want)
				}
			}
			above := strings.Contains(logs.String(), "level=INFO") || strings.Contains(logs.String(), "level=WARN") || strings.Contains(logs.String(), "level=ERROR")
			debug := strings.Contains(logs.String(), "level=DEBUG")
			if above != tt.wantLogAbove || debug != tt.wantDebug {
				t.Errorf("logged above debug: %v, at debug: %v; want %v, %v:\n%s", above, debug, tt.wantLogAbove, tt.wantDebug, logs.String())
			}
		})
	}
}

// counter reads one unlabelled counter from reg; -1 when there is none.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Errorf("no counter %s", name)
	return -1
}
