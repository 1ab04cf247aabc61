package envoyapi_test

import (
	"context"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Calls are timed by full method name and code; a method the server does
// not have is "unknown". Decisions go to the shared series by operation,
// limit and outcome. No label carries an id, a domain or anything else a
// client sent.
func TestMetricsLabels(t *testing.T) {
	h := start(t)
	const secret = "secret-subscriber"
	h.call(request("edge", desc("user", secret)))
	h.call(request("edge", negative(desc("user", secret))))
	h.refused(request("edge", desc("remote_address", secret)), codes.InvalidArgument)
	var out rlsv3.RateLimitResponse
	if err := h.conn.Invoke(context.Background(), "/"+secret+".Service/Method", &rlsv3.RateLimitRequest{}, &out); status.Code(err) != codes.Unimplemented {
		t.Errorf("an unknown method: %v, want Unimplemented", err)
	}
	if _, err := healthpb.NewHealthClient(h.conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}

	const rls = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"limiter_grpc_request_duration_seconds", map[string]string{"method": rls, "code": "OK"}, 2},
		{"limiter_grpc_request_duration_seconds", map[string]string{"method": rls, "code": "InvalidArgument"}, 1},
		{"limiter_grpc_request_duration_seconds", map[string]string{"method": "unknown", "code": "Unimplemented"}, 1},
		{"limiter_grpc_request_duration_seconds", map[string]string{"method": "/grpc.health.v1.Health/Check", "code": "OK"}, 1},
		{"limiter_decisions_total", map[string]string{"op": "spend", "limit": "Logins", "outcome": "allowed"}, 1},
		{"limiter_decisions_total", map[string]string{"op": "refund", "limit": "Logins", "outcome": "allowed"}, 1},
	} {
		if got := metricValue(t, h.reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	for name, values := range labelValues(t, h.reg) {
		for _, v := range values {
			if strings.Contains(v, secret) || strings.Contains(v, "edge") {
				t.Errorf("label %s=%q carries what a client sent", name, v)
			}
		}
	}
}
