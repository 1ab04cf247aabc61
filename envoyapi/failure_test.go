package envoyapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/limiter-dev/limiter/envoyapi/descriptors"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/source/memory"
)

// logLines is a slog handler that sends each record's level and message
// down a channel, so a test can wait for a line instead of for time.
type logLines chan string

func (l logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l logLines) Handle(_ context.Context, r slog.Record) error {
	l <- r.Level.String() + " " + r.Message
	return nil
}
func (l logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logLines) WithGroup(string) slog.Handler      { return l }

// next returns the next line, failing the test when none comes in time.
func (l logLines) next(t *testing.T) string {
	t.Helper()
	select {
	case line := <-l:
		return line
	case <-time.After(10 * time.Second):
		t.Fatal("no log line")
		return ""
	}
}

// A source that fails makes ShouldRateLimit UNAVAILABLE at once (Envoy's
// failure_mode_deny decides then), logged and counted; the message says
// whether anything may have been spent.
func TestSourceFailureIsUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"outcome unknown", errStoreDown, "the bucket source did not answer in time; the hits may or may not have been counted"},
		{"certainly not applied", fmt.Errorf("connection refused: %w", once.ErrNotApplied), "the bucket source could not be reached; nothing was decided or spent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := make(logLines, 16)
			h := start(t, func(s *setup) {
				s.src = failingSource{Source: memory.New(0), err: tc.err}
				s.opts.Logger = slog.New(logs)
			})
			began := time.Now()
			msg := h.refused(request("edge", desc("user", "bob")), codes.Unavailable)
			if msg != tc.want {
				t.Errorf("message %q, want %q", msg, tc.want)
			}
			if took := time.Since(began); took > 5*time.Second {
				t.Errorf("the failure took %v to answer", took)
			}
			if line := logs.next(t); line != "INFO source answers; health SERVING" {
				t.Errorf("first log line %q", line)
			}
			if line := logs.next(t); line != "ERROR source failed" {
				t.Errorf("log line %q, want the source failure", line)
			}
			if got := metricValue(t, h.reg, "limiter_source_errors_total", nil); got != 1 {
				t.Errorf("limiter_source_errors_total = %v, want 1", got)
			}
			// A request nothing limits never asks the source.
			h.call(request("edge", desc("unknown", "x")))
		})
	}
}

// Under fail-open a source failure answers OK: every status OK with its
// limit but without remaining or reset, which nothing decided, and no
// headers. It is counted and logged as a warning.
func TestFailOpenAnswersOK(t *testing.T) {
	logs := make(logLines, 16)
	h := start(t, func(s *setup) {
		s.src = failingSource{Source: memory.New(0), err: errStoreDown}
		s.limiterOps = []ratelimits.Option{ratelimits.WithFailOpen()}
		s.opts.Logger = slog.New(logs)
	})
	resp := h.call(request("edge", desc("user", "bob"), desc("unknown", "x"), desc("orders", "42")))
	checkResponse(t, resp, &rlsv3.RateLimitResponse{OverallCode: ok, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
		{Code: ok, CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{Name: "Logins", RequestsPerUnit: 3, Unit: minute}},
		unlimited(),
		unlimited(),
	}})
	for name, want := range map[string]float64{"limiter_degraded_answers_total": 1, "limiter_source_errors_total": 0} {
		if got := metricValue(t, h.reg, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := metricValue(t, h.reg, "limiter_decisions_total", map[string]string{"op": "spend", "limit": "Logins", "outcome": "degraded"}); got != 1 {
		t.Errorf("degraded decisions of Logins = %v, want 1", got)
	}
	logs.next(t) // the health line
	if line := logs.next(t); line != "WARN source failed; answering OK (fail-open)" {
		t.Errorf("log line %q, want the fail-open warning", line)
	}
}

// A client that cancels while the source is asked gets CANCELED; it is
// counted as such, not as a source failure.
func TestClientCancelWhileTheSourceIsAsked(t *testing.T) {
	logs := make(logLines, 16)
	src := &blockingSource{Source: memory.New(0), entered: make(chan struct{})}
	h := start(t, func(s *setup) {
		s.src = src
		s.opts.Logger = slog.New(logs)
	})
	logs.next(t) // the health line
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-src.entered
		cancel()
	}()
	_, err := h.client.ShouldRateLimit(ctx, request("edge", desc("user", "bob")))
	if status.Code(err) != codes.Canceled {
		t.Fatalf("a cancelled call: %v, want Canceled", err)
	}
	if line := logs.next(t); line != "DEBUG client went away before the answer" {
		t.Errorf("log line %q, want the client's cancellation", line)
	}
	for name, want := range map[string]float64{"limiter_client_cancelled_requests_total": 1, "limiter_source_errors_total": 0} {
		if got := metricValue(t, h.reg, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// A panic while deciding is INTERNAL and a log line with its stack; the
// server keeps serving.
func TestPanicIsInternal(t *testing.T) {
	logs := make(logLines, 16)
	h := start(t, func(s *setup) {
		s.src = panickingSource{Source: memory.New(0)}
		s.opts.Logger = slog.New(logs)
	})
	logs.next(t) // the health line
	if msg := h.refused(request("edge", desc("user", "bob")), codes.Internal); msg != "internal error" {
		t.Errorf("message %q", msg)
	}
	if line := logs.next(t); !strings.HasPrefix(line, "ERROR panic in handler") {
		t.Errorf("log line %q, want the panic", line)
	}
	if _, err := healthpb.NewHealthClient(h.conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health after a panic: %v", err)
	}
}

// blockingSource's Spend waits until its call is cancelled.
type blockingSource struct {
	ratelimits.Source
	entered chan struct{}
}

func (s *blockingSource) Spend(ctx context.Context, _ int64, _ []bucket.Op, _ []bucket.Outcome) error {
	close(s.entered)
	<-ctx.Done()
	return ctx.Err()
}

// panickingSource's Spend panics, as a bug would.
type panickingSource struct{ ratelimits.Source }

func (panickingSource) Spend(context.Context, int64, []bucket.Op, []bucket.Outcome) error {
	panic("a bug")
}

// Rules that name a limit the limit files do not have are the operator's
// mistake, not the client's: INTERNAL, and an error line.
func TestRuleOfAnUnknownLimitIsInternal(t *testing.T) {
	logs := make(logLines, 16)
	h := start(t, func(s *setup) {
		s.opts.Rules = mustRules(t, []descriptors.Domain{{Name: "edge", Rules: []descriptors.Rule{{Keys: []string{"user"}, Limit: "Nope"}}}})
		s.opts.Logger = slog.New(logs)
	})
	logs.next(t) // the health line
	if msg := h.refused(request("edge", desc("user", "bob")), codes.Internal); msg != "internal error" {
		t.Errorf("message %q", msg)
	}
	if line := logs.next(t); line != "ERROR a descriptor rule names a limit the configuration does not have" {
		t.Errorf("log line %q", line)
	}
}
