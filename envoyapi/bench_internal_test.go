package envoyapi

import (
	"context"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/envoyapi/descriptors"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

// BenchmarkDecide is ShouldRateLimit's own work for one descriptor, with
// neither gRPC nor the network: matching, the Limiter's spend on the
// memory source, metrics and the answer's messages.
func BenchmarkDecide(b *testing.B) {
	cfg, err := configfile.Parse("defaults.yaml", []byte("Requests:\n  enum: 101\n  id: string\n  burst: 1000000000000\n  count: 1000000000\n  period: 1s\n"), "overrides.yaml", nil)
	if err != nil {
		b.Fatal(err)
	}
	l, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.NewFake())
	if err != nil {
		b.Fatal(err)
	}
	rules, err := descriptors.New([]descriptors.Domain{{Name: "edge", Rules: []descriptors.Rule{{Keys: []string{"client"}, Limit: "Requests"}}}})
	if err != nil {
		b.Fatal(err)
	}
	s := New(Options{Limiter: l, Rules: rules})
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "client", Value: "alice"}},
	}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := s.shouldRateLimit(ctx, req)
		if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			b.Fatalf("%v, %v", resp, err)
		}
	}
}
