package test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	apiclient "github.com/limiter-dev/limiter/client"
)

// envoyProc is a limiter serving Envoy's rate-limit service next to its
// HTTP API, with a gRPC client connected to it over loopback TCP.
type envoyProc struct {
	*limiterProc
	GRPCAddr string
	conn     *grpc.ClientConn
	rls      rlsv3.RateLimitServiceClient
}

var grpcListeningLine = regexp.MustCompile(`msg=listening server=grpc addr=(\S+)`)

// startEnvoy starts `limiter serve` as startLimiter does, with the gRPC
// listener on a free loopback port, and connects a client to it.
func startEnvoy(t *testing.T, opts procOptions) *envoyProc {
	t.Helper()
	env := map[string]string{"LIMITER_GRPC_LISTEN": "127.0.0.1:0"}
	for k, v := range opts.Env {
		env[k] = v
	}
	opts.Env = env
	p := startLimiter(t, opts)
	// The gRPC listener is announced before the HTTP one, which
	// startLimiter has waited for.
	m := grpcListeningLine.FindStringSubmatch(p.logs())
	if m == nil {
		t.Fatalf("no gRPC listener in the log:\n%s", p.logs())
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &envoyProc{limiterProc: p, GRPCAddr: m[1], conn: conn, rls: rlsv3.NewRateLimitServiceClient(conn)}
}

// grpcTimeout bounds every call of the tests: generous, for a service
// under the race detector on shared cores.
const grpcTimeout = 10 * time.Second

// should calls ShouldRateLimit, with the API token as metadata when token
// is not empty.
func (e *envoyProc) should(token string, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), grpcTimeout)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	return e.rls.ShouldRateLimit(ctx, req)
}

// mustShould is should without a token, failing the test on an error.
func (e *envoyProc) mustShould(t *testing.T, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := e.should("", req)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	return resp
}

// rlRequest is a request of domain for descs, with hits_addend 0 (one
// hit each, as Envoy means it).
func rlRequest(domain string, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: descs}
}

// desc is a descriptor of key/value pairs, in order.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// withHits sets a descriptor's own hits_addend.
func withHits(d *ratelimitv3.RateLimitDescriptor, hits uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(hits)
	return d
}

// header is the value of name among an answer's response_headers_to_add
// ("" when absent).
func header(resp *rlsv3.RateLimitResponse, name string) string {
	for _, h := range resp.GetResponseHeadersToAdd() {
		if strings.EqualFold(h.GetKey(), name) {
			return h.GetValue()
		}
	}
	return ""
}

// httpDo sends a request to p's HTTP API, failing t (not the test that
// started p) when it cannot, so subtests can share one process.
func httpDo(t *testing.T, p *limiterProc, method, path, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, p.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// bucket reads one bucket through GET /v1/limits/{limit}/{id}.
func bucket(t *testing.T, p *limiterProc, limit, id string) *apiclient.TransactionDecision {
	t.Helper()
	d, err := p.api().Subscriber(context.Background(), limit, id)
	if err != nil {
		t.Fatalf("GET /v1/limits/%s/%s: %v", limit, id, err)
	}
	return d
}

// advanceClock moves p's fake clock through POST /debug/clock.
func advanceClock(t *testing.T, p *limiterProc, d time.Duration) {
	t.Helper()
	if r := httpDo(t, p, "POST", "/debug/clock", fmt.Sprintf(`{"advance":%q}`, d.String())); r.Status != 200 {
		t.Fatalf("advance the clock: %d %s", r.Status, r.Body)
	}
}

// metricSum adds up the samples of family on p's /metrics whose labels
// include every one of labels (`name="value"`).
func metricSum(t *testing.T, p *limiterProc, family string, labels ...string) float64 {
	t.Helper()
	r := httpDo(t, p, "GET", "/metrics", "")
	line := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(family) + `\{([^}]*)\} (\S+)$`)
	var sum float64
	for _, m := range line.FindAllStringSubmatch(string(r.Body), -1) {
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(","+m[1]+",", ","+l+",")
		}
		if ok {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatalf("%s: %v", m[0], err)
			}
			sum += v
		}
	}
	return sum
}
