package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	apiclient "github.com/limiter-dev/limiter/client"
)

// envoyDefaults are the limits of the Envoy tests: one per id kind and
// unit the answers speak of, and a shadow limit.
const envoyDefaults = `
EnvoyByIP:
  enum: 401
  id: ip
  burst: 5
  count: 5
  period: 1m
EnvoyByKeyPath:
  enum: 402
  id: string
  burst: 3
  count: 3
  period: 1h
EnvoyByKey:
  enum: 403
  id: string
  burst: 10
  count: 10
  period: 1s
EnvoyDaily:
  enum: 404
  id: string
  burst: 7
  count: 7
  period: 24h
EnvoyOddPeriod:
  enum: 405
  id: string
  burst: 3
  count: 3
  period: 90s
EnvoyLongPeriod:
  enum: 406
  id: string
  burst: 2
  count: 2
  period: 72h
EnvoyShadow:
  enum: 407
  id: string
  burst: 1
  count: 1
  period: 1h
  shadow: true
`

// envoyRules map the descriptors of two domains to those limits.
const envoyRules = `- domain: edge
  descriptors:
    - keys: [remote_address]
      limit: EnvoyByIP
    - keys: [api_key, path]
      limit: EnvoyByKeyPath
    - keys: [api_key]
      limit: EnvoyByKey
    - keys: [odd]
      limit: EnvoyOddPeriod
    - keys: [long]
      limit: EnvoyLongPeriod
    - keys: [shadow]
      limit: EnvoyShadow
- domain: internal
  descriptors:
    - keys: [api_key]
      limit: EnvoyDaily
`

// envoyConfig writes the Envoy tests' limits and rules (rules when not
// empty) and returns the env of a limiter on them with a fake clock.
func envoyConfig(t *testing.T, rules string) (map[string]string, string) {
	t.Helper()
	dir := t.TempDir()
	rulesPath := writeFile(t, dir, "descriptors.yaml", rules)
	return map[string]string{
		"LIMITER_DEFAULTS":        writeFile(t, dir, "defaults.yaml", envoyDefaults),
		"LIMITER_OVERRIDES":       writeFile(t, dir, "overrides.yaml", "[]\n"),
		"LIMITER_DESCRIPTORS":     rulesPath,
		"LIMITER_FAKECLOCK":       fakeClockStart,
		"LIMITER_RELOAD_INTERVAL": "0",
	}, rulesPath
}

// One limiter on the memory source with a fake clock serves every subtest
// of the service's behaviour; each subtest has ids of its own, so none
// sees another's spends, and they run one after another.
func TestEnvoyService(t *testing.T) {
	env, _ := envoyConfig(t, envoyRules)
	e := startEnvoy(t, procOptions{Env: env})

	t.Run("mapping", func(t *testing.T) { envoyMapping(t, e) })
	t.Run("batch", func(t *testing.T) { envoyBatch(t, e) })
	t.Run("hits", func(t *testing.T) { envoyHits(t, e) })
	t.Run("fake clock", func(t *testing.T) { envoyFakeClock(t, e) })
	t.Run("shadow", func(t *testing.T) { envoyShadow(t, e) })
	t.Run("health and reflection", func(t *testing.T) { envoyHealthAndReflection(t, e) })
	t.Run("bad input", func(t *testing.T) { envoyBadInput(t, e) })
}

// Every rule of the mapping: exact keys in order, ids joined with ':' and
// canonicalised by the limit's id kind,
// domains apart, and whatever no rule matches unlimited and unspent. The
// answer states the limit in Envoy's units and agrees with the bucket as
// the HTTP API reads it.
func envoyMapping(t *testing.T, e *envoyProc) {
	type unit = rlsv3.RateLimitResponse_RateLimit_Unit
	for _, tc := range []struct {
		name      string
		domain    string
		desc      *ratelimitv3.RateLimitDescriptor
		limit, id string // "" for unlimited
		perUnit   uint32
		unit      unit
		untouched [][2]string // buckets a wrong mapping would have spent
	}{
		{name: "one key", domain: "edge", desc: desc("remote_address", "192.0.2.1"),
			limit: "EnvoyByIP", id: "192.0.2.1", perUnit: 5, unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
		{name: "an IPv6 id canonicalised", domain: "edge", desc: desc("remote_address", "2001:DB8:0::1"),
			limit: "EnvoyByIP", id: "2001:db8::1", perUnit: 5, unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
		{name: "two keys joined", domain: "edge", desc: desc("api_key", "k1", "path", "login"),
			limit: "EnvoyByKeyPath", id: "k1:login", perUnit: 3, unit: rlsv3.RateLimitResponse_RateLimit_HOUR,
			untouched: [][2]string{{"EnvoyByKey", "k1"}}},
		// Values are joined as they are, ':' and all.
		{name: "a ':' in a value", domain: "edge", desc: desc("api_key", "k8:a", "path", "b"),
			limit: "EnvoyByKeyPath", id: "k8:a:b", perUnit: 3, unit: rlsv3.RateLimitResponse_RateLimit_HOUR},
		{name: "the same keys in another order", domain: "edge", desc: desc("path", "login2", "api_key", "k2"),
			untouched: [][2]string{{"EnvoyByKeyPath", "k2:login2"}, {"EnvoyByKeyPath", "login2:k2"}, {"EnvoyByKey", "k2"}}},
		{name: "a prefix of the keys is another rule", domain: "edge", desc: desc("api_key", "k3"),
			limit: "EnvoyByKey", id: "k3", perUnit: 10, unit: rlsv3.RateLimitResponse_RateLimit_SECOND,
			untouched: [][2]string{{"EnvoyDaily", "k3"}}},
		{name: "more keys than any rule", domain: "edge", desc: desc("api_key", "k4", "path", "login", "method", "GET"),
			untouched: [][2]string{{"EnvoyByKeyPath", "k4:login"}, {"EnvoyByKey", "k4"}}},
		{name: "keys are case-sensitive", domain: "edge", desc: desc("API_KEY", "k5"),
			untouched: [][2]string{{"EnvoyByKey", "k5"}}},
		{name: "the same keys in another domain", domain: "internal", desc: desc("api_key", "k6"),
			limit: "EnvoyDaily", id: "k6", perUnit: 7, unit: rlsv3.RateLimitResponse_RateLimit_DAY,
			untouched: [][2]string{{"EnvoyByKey", "k6"}}},
		{name: "a domain without rules", domain: "nosuch", desc: desc("api_key", "k7"),
			untouched: [][2]string{{"EnvoyByKey", "k7"}, {"EnvoyDaily", "k7"}}},
		{name: "a period between units: per hour", domain: "edge", desc: desc("odd", "o1"),
			limit: "EnvoyOddPeriod", id: "o1", perUnit: 120, unit: rlsv3.RateLimitResponse_RateLimit_HOUR}, // 3 per 90 s
		{name: "a period over a day: at least one per day", domain: "edge", desc: desc("long", "l1"),
			limit: "EnvoyLongPeriod", id: "l1", perUnit: 1, unit: rlsv3.RateLimitResponse_RateLimit_DAY}, // 2 per 72 h
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.mustShould(t, rlRequest(tc.domain, tc.desc))
			if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || len(resp.GetStatuses()) != 1 {
				t.Fatalf("answer %v, want OK with one status", resp)
			}
			st := resp.GetStatuses()[0]
			if st.GetCode() != rlsv3.RateLimitResponse_OK {
				t.Errorf("status code %s, want OK", st.GetCode())
			}
			for _, b := range tc.untouched {
				if d := bucket(t, e.limiterProc, b[0], b[1]); d.Remaining != d.Burst {
					t.Errorf("%s/%s was spent: remaining %d of %d", b[0], b[1], d.Remaining, d.Burst)
				}
			}
			if tc.limit == "" {
				if st.GetCurrentLimit() != nil {
					t.Errorf("unlimited descriptor answered %v, want no current_limit", resp)
				}
				return
			}
			cl := st.GetCurrentLimit()
			if cl.GetName() != tc.limit || cl.GetRequestsPerUnit() != tc.perUnit || cl.GetUnit() != tc.unit {
				t.Errorf("current_limit %v, want %s, %d per %s", cl, tc.limit, tc.perUnit, tc.unit)
			}
			d := bucket(t, e.limiterProc, tc.limit, tc.id)
			if d.Remaining != d.Burst-1 {
				t.Errorf("%s/%s: remaining %d, want %d: one spent", tc.limit, tc.id, d.Remaining, d.Burst-1)
			}
			if int64(st.GetLimitRemaining()) != d.Remaining || st.GetDurationUntilReset().AsDuration().Milliseconds() != d.ResetIn.Milliseconds() {
				t.Errorf("status remaining %d, reset %v; the bucket says %d and %v", st.GetLimitRemaining(), st.GetDurationUntilReset().AsDuration(), d.Remaining, d.ResetIn)
			}
		})
	}
}

// A request's matched descriptors are one batch: when one is over its
// limit, none is spent, the others say OK on their own, and the headers
// are the HTTP API's for the same batch, decided at the same instant.
func envoyBatch(t *testing.T, e *envoyProc) {
	ctx := context.Background()
	if _, err := e.api().Spend(ctx, apiclient.Transaction{Limit: "EnvoyByKey", ID: "b-full"}.WithCost(10)); err != nil {
		t.Fatalf("emptying b-full: %v", err)
	}
	req := rlRequest("edge",
		desc("remote_address", "192.0.2.50"),
		desc("api_key", "b-full"),
		desc("unmatched", "x"),
		desc("api_key", "b-free", "path", "x"))
	resp := e.mustShould(t, req)
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("overall %s, want OVER_LIMIT", resp.GetOverallCode())
	}
	want := []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK}
	if len(resp.GetStatuses()) != len(want) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.GetStatuses()), len(want))
	}
	for i, st := range resp.GetStatuses() {
		if st.GetCode() != want[i] {
			t.Errorf("status %d: %s, want %s", i, st.GetCode(), want[i])
		}
	}
	if full := resp.GetStatuses()[1]; full.GetLimitRemaining() != 0 || full.GetDurationUntilReset().AsDuration() != time.Second {
		t.Errorf("the empty bucket: remaining %d, reset %v; want 0 and 1s", full.GetLimitRemaining(), full.GetDurationUntilReset().AsDuration())
	}
	for _, b := range [][2]string{{"EnvoyByIP", "192.0.2.50"}, {"EnvoyByKeyPath", "b-free:x"}} {
		if d := bucket(t, e.limiterProc, b[0], b[1]); d.Remaining != d.Burst {
			t.Errorf("%s/%s was spent by a denied batch: remaining %d of %d", b[0], b[1], d.Remaining, d.Burst)
		}
	}
	// The same batch over HTTP, at the same fake instant: denied too, and
	// nothing spent, so its headers are those the gRPC answer must carry.
	a, err := e.api().SpendBatch(ctx, []apiclient.Transaction{
		{Limit: "EnvoyByIP", ID: "192.0.2.50"}, {Limit: "EnvoyByKey", ID: "b-full"}, {Limit: "EnvoyByKeyPath", ID: "b-free:x"}})
	if err != nil || a.Allowed {
		t.Fatalf("the same batch over HTTP: %+v %v", a, err)
	}
	for _, h := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
		if got, want := header(resp, h), a.Header.Get(h); got == "" || got != want {
			t.Errorf("header %s: gRPC %q, HTTP %q", h, got, want)
		}
	}

	// Allowed: every matched descriptor spent, no Retry-After.
	resp = e.mustShould(t, rlRequest("edge", desc("remote_address", "192.0.2.51"), desc("api_key", "b-free2")))
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("allowed batch: %v", resp)
	}
	if a, b := bucket(t, e.limiterProc, "EnvoyByIP", "192.0.2.51"), bucket(t, e.limiterProc, "EnvoyByKey", "b-free2"); a.Remaining != 4 || b.Remaining != 9 {
		t.Errorf("allowed batch spent to %d and %d, want 4 and 9", a.Remaining, b.Remaining)
	}
	if header(resp, "RateLimit-Policy") == "" || header(resp, "RateLimit") == "" || header(resp, "Retry-After") != "" {
		t.Errorf("allowed batch headers %v, want RateLimit-Policy and RateLimit without Retry-After", resp.GetResponseHeadersToAdd())
	}
}

// A descriptor's cost is its own hits_addend when it has one, else the
// request's, where 0 means 1; negative hits give tokens back.
func envoyHits(t *testing.T, e *envoyProc) {
	for _, tc := range []struct {
		name      string
		req       *rlsv3.RateLimitRequest
		ids       []string // of EnvoyByKey
		remaining []int64
	}{
		{"the request's hits", &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 3, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("api_key", "h1")}},
			[]string{"h1"}, []int64{7}},
		{"a descriptor's own hits beat the request's", &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 5, Descriptors: []*ratelimitv3.RateLimitDescriptor{
			withHits(desc("api_key", "h2"), 2), desc("api_key", "h3")}},
			[]string{"h2", "h3"}, []int64{8, 5}},
		{"0 hits are one", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("api_key", "h4")}},
			[]string{"h4"}, []int64{9}},
		{"negative hits refund", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: desc("api_key", "h1").Entries, IsNegativeHits: true}}, HitsAddend: 2},
			[]string{"h1"}, []int64{9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.mustShould(t, tc.req)
			if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
				t.Fatalf("answer %v", resp)
			}
			for i, id := range tc.ids {
				if got := resp.GetStatuses()[i].GetLimitRemaining(); int64(got) != tc.remaining[i] {
					t.Errorf("%s: status remaining %d, want %d", id, got, tc.remaining[i])
				}
				if got := bucket(t, e.limiterProc, "EnvoyByKey", id).Remaining; got != tc.remaining[i] {
					t.Errorf("%s: bucket remaining %d, want %d", id, got, tc.remaining[i])
				}
			}
		})
	}
}

// The fake clock drives gRPC decisions: an empty bucket refills as the
// clock moves, and the answer's reset counts down with it.
func envoyFakeClock(t *testing.T, e *envoyProc) {
	req := func(hits uint32) *rlsv3.RateLimitRequest {
		return &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: hits, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("api_key", "clock")}}
	}
	if resp := e.mustShould(t, req(10)); resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetLimitRemaining() != 0 {
		t.Fatalf("emptying the bucket: %v", resp)
	}
	resp := e.mustShould(t, req(1))
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || resp.GetStatuses()[0].GetDurationUntilReset().AsDuration() != time.Second {
		t.Fatalf("an empty bucket: %v, want OVER_LIMIT, full in 1s", resp)
	}
	if got := header(resp, "Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1: a token comes back in 100 ms, rounded up to a second", got)
	}
	advanceClock(t, e.limiterProc, 500*time.Millisecond)
	resp = e.mustShould(t, req(1))
	st := resp.GetStatuses()[0]
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || st.GetLimitRemaining() != 4 || st.GetDurationUntilReset().AsDuration() != 600*time.Millisecond {
		t.Fatalf("half a second later: %v, want OK with 4 left, full in 600ms", resp)
	}
}

// A shadow limit decides and counts but never denies, on both front ends.
func envoyShadow(t *testing.T, e *envoyProc) {
	before := metricSum(t, e.limiterProc, "limiter_shadow_denials_total", `limit="EnvoyShadow"`)
	batch := []apiclient.Transaction{{Limit: "EnvoyShadow", ID: "s1"}, {Limit: "EnvoyByKey", ID: "s1"}}
	if _, err := e.api().SpendBatch(context.Background(), batch); err != nil {
		t.Fatalf("first spend over HTTP: %v", err)
	}
	a, err := e.api().SpendBatch(context.Background(), batch)
	if err != nil || len(a.Decisions) != 2 {
		t.Fatalf("second spend over HTTP: %+v %v", a, err)
	}
	if sh := a.Decisions[0]; !a.Allowed || !sh.Shadow || sh.Allowed || a.Decisions[1].Shadow || a.Decisions[1].Remaining != 8 {
		t.Errorf("over HTTP: %+v; want the batch allowed and spent, the shadow decision marked and not allowed", a)
	}

	req := rlRequest("edge", desc("shadow", "s2"), desc("api_key", "s2"))
	e.mustShould(t, req)
	resp := e.mustShould(t, req)
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("over gRPC: %v, want OK", resp)
	}
	sh := resp.GetStatuses()[0]
	if sh.GetCode() != rlsv3.RateLimitResponse_OK || sh.GetCurrentLimit().GetName() != "EnvoyShadow" || sh.GetLimitRemaining() != 0 {
		t.Errorf("the shadow status %v, want OK on EnvoyShadow with nothing left", sh)
	}
	if got := bucket(t, e.limiterProc, "EnvoyByKey", "s2").Remaining; got != 8 {
		t.Errorf("the other descriptor: remaining %d, want 8: both batches spent it", got)
	}
	if got := metricSum(t, e.limiterProc, "limiter_shadow_denials_total", `limit="EnvoyShadow"`); got != before+2 {
		t.Errorf("limiter_shadow_denials_total for EnvoyShadow: %v, want %v: one over HTTP, one over gRPC", got, before+2)
	}
}

// Health says SERVING while the source answers, and reflection lists the
// services, neither needing a token.
func envoyHealthAndReflection(t *testing.T, e *envoyProc) {
	ctx, cancel := context.WithTimeout(context.Background(), grpcTimeout)
	defer cancel()
	health := healthpb.NewHealthClient(e.conn)
	for _, service := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: %v %v, want SERVING", service, resp, err)
		}
	}
	stream, err := reflectionpb.NewServerReflectionClient(e.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("reflection lists %v, without %s", names, want)
		}
	}
	_ = stream.CloseSend()
}

// Bad input is INVALID_ARGUMENT and spends nothing, not even the valid
// descriptors beside it; what no rule counts is never bad input for its
// size.
func envoyBadInput(t *testing.T, e *envoyProc) {
	many := make([]*ratelimitv3.RateLimitDescriptor, 101)
	for i := range many {
		many[i] = desc("api_key", "bad-many")
		if i > 0 {
			many[i] = desc("unmatched", fmt.Sprint(i))
		}
	}
	long := strings.Repeat("v", 1025)
	for _, tc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
	}{
		{"empty domain", rlRequest("", desc("api_key", "bad-1"))},
		{"no descriptors", rlRequest("edge")},
		{"101 descriptors", rlRequest("edge", many...)},
		{"an empty key", rlRequest("edge", desc("api_key", "bad-2"), desc("", "x"))},
		{"a value over 1024 bytes in a descriptor a rule counts", rlRequest("edge", desc("api_key", "bad-3"), desc("remote_address", long))},
		{"an id the limit's kind refuses", rlRequest("edge", desc("api_key", "bad-4"), desc("remote_address", "not-an-address"))},
		{"an id too long for its kind", rlRequest("edge", desc("remote_address", "192.0.2.60"), desc("api_key", strings.Repeat("k", 300)))},
		{"two descriptors on one bucket", rlRequest("edge", desc("api_key", "bad-5"), desc("api_key", "bad-5"))},
		{"a cost above the burst", rlRequest("edge", desc("remote_address", "192.0.2.60"), withHits(desc("api_key", "bad-6"), 11))},
		{"negative and positive hits mixed", rlRequest("edge", desc("api_key", "bad-7"),
			&ratelimitv3.RateLimitDescriptor{Entries: desc("remote_address", "192.0.2.60").Entries, IsNegativeHits: true})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := e.should("", tc.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("answer %v, error %v; want INVALID_ARGUMENT", resp, err)
			}
		})
	}
	for _, id := range []string{"bad-many", "bad-1", "bad-2", "bad-3", "bad-4", "bad-5", "bad-6", "bad-7"} {
		if d := bucket(t, e.limiterProc, "EnvoyByKey", id); d.Remaining != d.Burst {
			t.Errorf("EnvoyByKey/%s spent by a refused request: remaining %d", id, d.Remaining)
		}
	}
	if d := bucket(t, e.limiterProc, "EnvoyByIP", "192.0.2.60"); d.Remaining != d.Burst {
		t.Errorf("EnvoyByIP/192.0.2.60 spent by a refused request: remaining %d", d.Remaining)
	}

	// The size bound is on what a rule counts: a long key or value in a
	// descriptor no rule counts leaves it unlimited, and the request's
	// other descriptors are decided.
	resp := e.mustShould(t, rlRequest("edge", desc("unmatched", long), desc(long, "x"), desc("api_key", "long-elsewhere")))
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || len(resp.GetStatuses()) != 3 ||
		resp.GetStatuses()[0].GetCurrentLimit() != nil || resp.GetStatuses()[1].GetCurrentLimit() != nil {
		t.Errorf("long keys and values no rule counts: %v, want OK, both unlimited", resp)
	}
	if got := bucket(t, e.limiterProc, "EnvoyByKey", "long-elsewhere").Remaining; got != 9 {
		t.Errorf("the counted descriptor beside long unlimited ones: remaining %d, want 9", got)
	}
	if !e.alive() {
		t.Fatalf("the process exited:\n%s", e.logs())
	}
}

// alive says whether the process is still running.
func (p *limiterProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// With API tokens configured, a call needs one as bearer metadata; health
// does not.
func TestEnvoyTokens(t *testing.T) {
	env, _ := envoyConfig(t, envoyRules)
	api := writeFile(t, t.TempDir(), "api.tokens", "grpc-secret\n")
	e := startEnvoy(t, procOptions{Env: env, Args: []string{"--api-token-file", api}})
	req := rlRequest("edge", desc("api_key", "tok"))
	for _, tc := range []struct {
		token string
		want  codes.Code
	}{{"", codes.Unauthenticated}, {"wrong-secret", codes.Unauthenticated}, {"grpc-secret", codes.OK}} {
		if _, err := e.should(tc.token, req); status.Code(err) != tc.want {
			t.Errorf("token %q: %v, want %s", tc.token, err, tc.want)
		}
	}
	if got := remainingWithToken(t, e, "grpc-secret"); got != 9 {
		t.Errorf("remaining %d, want 9: only the call with the right token spent", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), grpcTimeout)
	defer cancel()
	if resp, err := healthpb.NewHealthClient(e.conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health without a token: %v %v", resp, err)
	}
	if strings.Contains(e.logs(), "grpc-secret") || strings.Contains(e.logs(), "wrong-secret") {
		t.Errorf("a token appears in the log:\n%s", e.logs())
	}
}

// remainingWithToken reads EnvoyByKey/tok over HTTP with token.
func remainingWithToken(t *testing.T, e *envoyProc, token string) int64 {
	t.Helper()
	d, err := e.apiWith(apiclient.Options{APIToken: token}).Subscriber(context.Background(), "EnvoyByKey", "tok")
	if err != nil {
		t.Fatalf("GET /v1/limits/EnvoyByKey/tok: %v", err)
	}
	return d.Remaining
}

// LIMITER_GRPC_LIMIT_NAME_HEADER=true has a denied request's answer ask
// Envoy to add x-ratelimit-limit-name with the limit that denied it; an
// allowed one's never does, and without the setting no answer does.
func TestEnvoyLimitNameHeader(t *testing.T) {
	env, _ := envoyConfig(t, envoyRules)
	env["LIMITER_GRPC_LIMIT_NAME_HEADER"] = "true"
	e := startEnvoy(t, procOptions{Env: env})
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		desc("remote_address", "192.0.2.77"), desc("api_key", "named", "path", "/x")}}
	for i := range 3 { // EnvoyByKeyPath allows 3 an hour, EnvoyByIP 5 a minute
		if resp := e.mustShould(t, req); resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || header(resp, "x-ratelimit-limit-name") != "" {
			t.Fatalf("request %d: %v", i+1, resp)
		}
	}
	resp := e.mustShould(t, req)
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || header(resp, "x-ratelimit-limit-name") != "EnvoyByKeyPath" ||
		resp.GetStatuses()[1].GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT || resp.GetStatuses()[1].GetCurrentLimit().GetName() != "EnvoyByKeyPath" {
		t.Fatalf("the denial: %v, want OVER_LIMIT naming EnvoyByKeyPath in the header and the second status", resp)
	}

	plainEnv, _ := envoyConfig(t, envoyRules)
	plain := startEnvoy(t, procOptions{Env: plainEnv})
	for range 4 {
		if resp := plain.mustShould(t, req); header(resp, "x-ratelimit-limit-name") != "" {
			t.Fatalf("the header without the setting: %v", resp)
		}
	}
}
