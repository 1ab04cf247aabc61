package envoyapi_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/jmhodges/clock"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/envoyapi"
	"github.com/limiter-dev/limiter/envoyapi/descriptors"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/source/memory"
)

// defaults are the limits of most tests: one of each shape a descriptor
// can map to.
const defaults = `
Logins:
  enum: 101
  id: string
  burst: 3
  count: 3
  period: 1m
Clients:
  enum: 102
  id: ip
  burst: 5
  count: 5
  period: 1s
Keys:
  enum: 103
  id: string
  burst: 10
  count: 10
  period: 1h
Daily:
  enum: 104
  id: account
  burst: 100
  count: 100
  period: 24h
Odd:
  enum: 105
  id: string
  burst: 2
  count: 2
  period: 90s
Thirds:
  enum: 107
  id: string
  burst: 3
  count: 3
  period: 1s
Watched:
  enum: 106
  id: string
  burst: 1
  count: 1
  period: 1m
  shadow: true
`

// Rules of most tests. NewOrdersPerAccount is built in and has no default
// in defaults, so it is unlimited.
var testDomains = []descriptors.Domain{
	{Name: "edge", Rules: []descriptors.Rule{
		{Keys: []string{"remote_address"}, Limit: "Clients"},
		{Keys: []string{"api_key", "path"}, Limit: "Keys"},
		{Keys: []string{"user"}, Limit: "Logins"},
		{Keys: []string{"account"}, Limit: "Daily"},
		{Keys: []string{"odd"}, Limit: "Odd"},
		{Keys: []string{"thirds"}, Limit: "Thirds"},
		{Keys: []string{"watched"}, Limit: "Watched"},
		{Keys: []string{"orders"}, Limit: "NewOrdersPerAccount"},
	}},
	{Name: "internal", Rules: []descriptors.Rule{
		{Keys: []string{"user"}, Limit: "Keys"},
	}},
}

var startTime = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// harness is a Server on a loopback listener, its Limiter on a fake clock
// and a client connected to it.
type harness struct {
	t       testing.TB
	limiter *ratelimits.Limiter
	clock   clock.FakeClock
	server  *envoyapi.Server
	conn    *grpc.ClientConn
	client  rlsv3.RateLimitServiceClient
	reg     *prometheus.Registry
}

// setup configures a harness before it starts.
type setup struct {
	src        ratelimits.Source
	limiterOps []ratelimits.Option
	opts       envoyapi.Options
	defaults   string
}

// newLimiter is a Limiter of defaultsYAML on src, on a fake clock set to
// start.
func newLimiter(t testing.TB, defaultsYAML string, src ratelimits.Source, opts ...ratelimits.Option) (*ratelimits.Limiter, clock.FakeClock) {
	t.Helper()
	cfg, err := configfile.Parse("defaults.yaml", []byte(defaultsYAML), "overrides.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(startTime)
	l, err := ratelimits.NewLimiter(cfg, src, clk, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

func mustRules(t testing.TB, domains []descriptors.Domain) *descriptors.Rules {
	t.Helper()
	r, err := descriptors.New(domains)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// start runs a Server of the test limits and rules, changed by each
// configure, and connects a client to it. Cleanup shuts it down and
// checks that Serve then returned nil.
func start(t testing.TB, configure ...func(*setup)) *harness {
	t.Helper()
	su := setup{src: memory.New(0), defaults: defaults}
	su.opts.Rules = mustRules(t, testDomains)
	for _, c := range configure {
		c(&su)
	}
	l, clk := newLimiter(t, su.defaults, su.src, su.limiterOps...)
	su.opts.Limiter = l
	reg := prometheus.NewRegistry()
	if su.opts.Registry == nil {
		su.opts.Registry = reg
	}
	srv := envoyapi.New(su.opts)
	conn := serveConn(t, srv)
	return &harness{t: t, limiter: l, clock: clk, server: srv, conn: conn, client: rlsv3.NewRateLimitServiceClient(conn), reg: reg}
}

// desc is a descriptor of key, value pairs.
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

// negative marks a descriptor's hits as given back.
func negative(d *ratelimitv3.RateLimitDescriptor) *ratelimitv3.RateLimitDescriptor {
	d.IsNegativeHits = true
	return d
}

func request(domain string, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds}
}

// call sends req and returns the answer, failing the test on an error.
func (h *harness) call(req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	h.t.Helper()
	resp, err := h.client.ShouldRateLimit(context.Background(), req)
	if err != nil {
		h.t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	return resp
}

// refused sends req, which must fail with code; it returns the message.
func (h *harness) refused(req *rlsv3.RateLimitRequest, code codes.Code) string {
	h.t.Helper()
	resp, err := h.client.ShouldRateLimit(context.Background(), req)
	if status.Code(err) != code {
		h.t.Fatalf("ShouldRateLimit(%v) = %v, %v; want code %v", req, resp, err, code)
	}
	return status.Convert(err).Message()
}

// remaining is the tokens left in a bucket, read without spending.
func (h *harness) remaining(limit, id string) int64 {
	h.t.Helper()
	d, err := h.limiter.Inspect(context.Background(), limit, id)
	if err != nil {
		h.t.Fatalf("Inspect(%s, %s): %v", limit, id, err)
	}
	return d.Remaining
}

// failingSource is a source whose spends fail with err, as a source that
// cannot reach its store does; the rest is the wrapped source's.
type failingSource struct {
	ratelimits.Source
	err error
}

var errStoreDown = errors.New("store down")

func (s failingSource) Spend(context.Context, int64, []bucket.Op, []bucket.Outcome) error {
	return s.err
}

const (
	ok        = rlsv3.RateLimitResponse_OK
	overLimit = rlsv3.RateLimitResponse_OVER_LIMIT
	second    = rlsv3.RateLimitResponse_RateLimit_SECOND
	minute    = rlsv3.RateLimitResponse_RateLimit_MINUTE
	hour      = rlsv3.RateLimitResponse_RateLimit_HOUR
	day       = rlsv3.RateLimitResponse_RateLimit_DAY
)

// limited is the status of a descriptor that maps to a limit: its own
// code, the limit as Envoy sees it, what is left and when it is full.
func limited(code rlsv3.RateLimitResponse_Code, name string, perUnit uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit,
	remaining uint32, reset time.Duration) *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{
		Code:               code,
		CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: perUnit, Unit: unit},
		LimitRemaining:     remaining,
		DurationUntilReset: durationpb.New(reset),
	}
}

// unlimited is the status of a descriptor no limit counts.
func unlimited() *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{Code: ok}
}

// header is one header Envoy is asked to add.
func header(key, value string) *corev3.HeaderValue {
	return &corev3.HeaderValue{Key: key, Value: value}
}

// checkResponse fails the test unless got is exactly want.
func checkResponse(t testing.TB, got, want *rlsv3.RateLimitResponse) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("response:\n got %v\nwant %v", prototext.Format(got), prototext.Format(want))
	}
}

// checkStatuses fails the test unless the answer's overall code and
// statuses are exactly these.
func checkStatuses(t testing.TB, got *rlsv3.RateLimitResponse, overall rlsv3.RateLimitResponse_Code, want ...*rlsv3.RateLimitResponse_DescriptorStatus) {
	t.Helper()
	checkResponse(t, &rlsv3.RateLimitResponse{OverallCode: got.GetOverallCode(), Statuses: got.GetStatuses()},
		&rlsv3.RateLimitResponse{OverallCode: overall, Statuses: want})
}

// netListen listens on a free loopback port.
func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
