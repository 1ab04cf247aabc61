package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/limiter-dev/limiter/internal/redistest"
)

// Two limiters on a private Redis, one failing closed and one open, while
// Redis hangs and while it is stopped: ShouldRateLimit answers within the
// source timeout, UNAVAILABLE (so that Envoy's failure_mode_deny decides)
// or, failing open, OK; health turns NOT_SERVING while Redis is down and
// SERVING again once it is back, and decisions are right again.
func TestEnvoyRedisFailure(t *testing.T) {
	const sourceTimeout = 200 * time.Millisecond
	const bound = sourceTimeout + 300*time.Millisecond // scheduling slack under the race detector
	srv := redistest.NewStandalone(t)
	env, _ := envoyConfig(t, envoyRules)
	delete(env, "LIMITER_FAKECLOCK")
	env["LIMITER_SOURCE"] = srv.URL()
	args := []string{"--source-timeout=" + sourceTimeout.String()}
	closed := startEnvoy(t, procOptions{Env: env, Args: args})
	open := startEnvoy(t, procOptions{Env: env, Args: append(args, "--fail-open")})

	n := 0
	call := func(e *envoyProc) (*rlsv3.RateLimitResponse, error, time.Duration) {
		n++
		start := time.Now()
		resp, err := e.should("", rlRequest("edge", desc("api_key", fmt.Sprintf("f%d", n))))
		return resp, err, time.Since(start)
	}
	decided := func(e *envoyProc) bool { // a real decision: one token of ten spent
		resp, err, _ := call(e)
		return err == nil && resp.GetOverallCode() == rlsv3.RateLimitResponse_OK && resp.GetStatuses()[0].GetLimitRemaining() == 9
	}
	health := func(e *envoyProc) healthpb.HealthCheckResponse_ServingStatus {
		ctx, cancel := context.WithTimeout(context.Background(), grpcTimeout)
		defer cancel()
		resp, err := healthpb.NewHealthClient(e.conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return healthpb.HealthCheckResponse_UNKNOWN
		}
		return resp.GetStatus()
	}
	for _, e := range []*envoyProc{closed, open} {
		pollUntil(t, 5*time.Second, "decisions from Redis", func() bool { return decided(e) })
	}

	for _, phase := range []struct {
		name        string
		fail, fix   func(testing.TB)
		checkHealth bool
	}{
		{"hanging", srv.Pause, srv.Resume, false},
		{"stopped", srv.Stop, srv.Start, true},
	} {
		t.Run(phase.name, func(t *testing.T) {
			phase.fail(t)
			var slowestClosed, slowestOpen time.Duration
			for range 3 {
				resp, err, took := call(closed)
				slowestClosed = max(slowestClosed, took)
				if status.Code(err) != codes.Unavailable || took > bound {
					t.Errorf("failing closed: %v %v after %v; want UNAVAILABLE within %v", resp, err, took, bound)
				}
				resp, err, took = call(open)
				slowestOpen = max(slowestOpen, took)
				if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetCode() != rlsv3.RateLimitResponse_OK || took > bound {
					t.Errorf("failing open: %v %v after %v; want OK within %v", resp, err, took, bound)
				}
			}
			t.Logf("Redis %s: the slowest answers took %v failing closed, %v failing open", phase.name, slowestClosed, slowestOpen)
			if phase.checkHealth {
				pollUntil(t, 8*time.Second, "health NOT_SERVING with Redis "+phase.name, func() bool {
					return health(closed) == healthpb.HealthCheckResponse_NOT_SERVING
				})
			}
			phase.fix(t)
			for _, e := range []*envoyProc{closed, open} {
				pollUntil(t, 5*time.Second, "decisions from Redis once it is back", func() bool { return decided(e) })
			}
			if phase.checkHealth {
				pollUntil(t, 8*time.Second, "health SERVING with Redis back", func() bool {
					return health(closed) == healthpb.HealthCheckResponse_SERVING
				})
			}
			for _, e := range []*envoyProc{closed, open} {
				if !e.alive() {
					t.Fatalf("a process exited:\n%s", e.logs())
				}
			}
		})
	}
}
