package envoyapi_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/limiter-dev/limiter/envoyapi"
	"github.com/limiter-dev/limiter/envoyapi/descriptors"
	"github.com/limiter-dev/limiter/source/memory"
)

// benchDefaults is a limit no benchmark runs out of.
const benchDefaults = `
Requests:
  enum: 101
  id: string
  burst: 1000000000000
  count: 1000000000
  period: 1s
`

// BenchmarkShouldRateLimit is Envoy's call with one descriptor, on the
// memory source, over a real loopback TCP connection shared by many
// concurrent callers, as Envoy multiplexes its calls on few connections.
// Each caller spends on ids of its own.
func BenchmarkShouldRateLimit(b *testing.B) {
	l, _ := newLimiter(b, benchDefaults, memory.New(0))
	rules := mustRules(b, []descriptors.Domain{{Name: "edge", Rules: []descriptors.Rule{{Keys: []string{"client"}, Limit: "Requests"}}}})
	client := serveForTest(b, envoyapi.New(envoyapi.Options{Limiter: l, Rules: rules}))
	var callers atomic.Int64
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		caller := strconv.FormatInt(callers.Add(1), 10)
		reqs := make([]*rlsv3.RateLimitRequest, 64)
		for i := range reqs {
			reqs[i] = &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
				desc("client", caller+"-"+strconv.Itoa(i)),
			}}
		}
		for i := 0; pb.Next(); i++ {
			resp, err := client.ShouldRateLimit(context.Background(), reqs[i%len(reqs)])
			if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
				b.Errorf("ShouldRateLimit: %v, %v", resp, err)
				return
			}
		}
	})
}
