package envoyapi_test

import (
	"math"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"

	"github.com/limiter-dev/limiter/envoyapi/descriptors"
)

// bucketState is what a bucket must hold after a request.
type bucketState struct {
	limit, id string
	remaining int64
}

// A descriptor maps to a limit when its keys are exactly a rule's keys, in
// order, in the request's domain; its values joined with ':' are the id.
// Anything else is unlimited: OK, without current_limit, and nothing is
// spent anywhere.
func TestDescriptorsMapToLimitsByExactKeys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		req     *rlsv3.RateLimitRequest
		want    *rlsv3.RateLimitResponse_DescriptorStatus
		buckets []bucketState
	}{
		{"one key: its value is the id",
			request("edge", desc("remote_address", "192.0.2.1")),
			limited(ok, "Clients", 5, second, 4, 200*time.Millisecond),
			[]bucketState{{"Clients", "192.0.2.1", 4}}},
		{"two keys in the rule's order: the values joined with ':'",
			request("edge", desc("api_key", "k1", "path", "/login")),
			limited(ok, "Keys", 10, hour, 9, 6*time.Minute),
			[]bucketState{{"Keys", "k1:/login", 9}}},
		{"the same keys in another order match nothing",
			request("edge", desc("path", "/login", "api_key", "k1")),
			unlimited(),
			[]bucketState{{"Keys", "k1:/login", 10}, {"Keys", "/login:k1", 10}}},
		{"fewer keys than the rule match nothing",
			request("edge", desc("api_key", "k1")),
			unlimited(),
			[]bucketState{{"Keys", "k1", 10}}},
		{"more keys than the rule match nothing",
			request("edge", desc("api_key", "k1", "path", "/login", "method", "GET")),
			unlimited(),
			[]bucketState{{"Keys", "k1:/login", 10}, {"Keys", "k1:/login:GET", 10}}},
		{"keys are case-sensitive",
			request("edge", desc("Remote_Address", "192.0.2.1")),
			unlimited(),
			[]bucketState{{"Clients", "192.0.2.1", 5}}},
		{"the request's domain picks the rules",
			request("internal", desc("user", "bob")),
			limited(ok, "Keys", 10, hour, 9, 6*time.Minute),
			[]bucketState{{"Keys", "bob", 9}, {"Logins", "bob", 3}}},
		{"a domain without rules is unlimited",
			request("nowhere", desc("remote_address", "192.0.2.1")),
			unlimited(),
			[]bucketState{{"Clients", "192.0.2.1", 5}}},
		{"a descriptor without entries is unlimited",
			request("edge", desc()),
			unlimited(),
			nil},
		{"a limit without a default or an override is unlimited",
			request("edge", desc("orders", "42")),
			unlimited(),
			[]bucketState{{"NewOrdersPerAccount", "42", math.MaxInt64}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t)
			checkStatuses(t, h.call(tc.req), ok, tc.want)
			for _, b := range tc.buckets {
				if got := h.remaining(b.limit, b.id); got != b.remaining {
					t.Errorf("%s %q: %d remaining, want %d", b.limit, b.id, got, b.remaining)
				}
			}
		})
	}
}

// The id is validated and canonicalised by the limit's id kind: two
// spellings of one address are one bucket, and a value the kind refuses
// is the client's mistake.
func TestIDsAreValidatedByTheLimitsKind(t *testing.T) {
	h := start(t)
	h.call(request("edge", desc("remote_address", "2001:DB8::1")))
	h.call(request("edge", desc("remote_address", "2001:db8:0::1")))
	if got := h.remaining("Clients", "2001:db8::1"); got != 3 {
		t.Errorf("2001:db8::1 has %d remaining after two spends under two spellings, want 3", got)
	}
	for _, tc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
	}{
		{"not an IP address", request("edge", desc("remote_address", "192.0.2.1"), desc("remote_address", "not-an-ip"))},
		{"an account with a leading zero", request("edge", desc("remote_address", "192.0.2.1"), desc("account", "0042"))},
		{"an empty value", request("edge", desc("remote_address", "192.0.2.1"), desc("user", ""))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := h.refused(tc.req, codes.InvalidArgument)
			if !strings.HasPrefix(msg, "descriptor 1: invalid id") {
				t.Errorf("message %q does not name descriptor 1 and the invalid id", msg)
			}
			if got := h.remaining("Clients", "192.0.2.1"); got != 5 {
				t.Errorf("descriptor 0's bucket has %d remaining after a refused request, want 5 (nothing spent)", got)
			}
		})
	}
}

// The limited descriptors of a request are one batch: when one is over
// its limit, none is spent. Statuses follow the request's order, unlimited
// descriptors included.
func TestOneRequestIsOneAtomicBatch(t *testing.T) {
	h := start(t)
	h.call(request("edge", withHits(desc("user", "bob"), 3)))
	resp := h.call(request("edge",
		desc("remote_address", "192.0.2.9"),
		desc("unknown", "x"),
		desc("user", "bob"),
		desc("api_key", "k1", "path", "/login"),
	))
	checkStatuses(t, resp, overLimit,
		limited(ok, "Clients", 5, second, 4, 200*time.Millisecond),
		unlimited(),
		limited(overLimit, "Logins", 3, minute, 0, time.Minute),
		limited(ok, "Keys", 10, hour, 9, 6*time.Minute),
	)
	for _, b := range []bucketState{{"Clients", "192.0.2.9", 5}, {"Keys", "k1:/login", 10}, {"Logins", "bob", 0}} {
		if got := h.remaining(b.limit, b.id); got != b.remaining {
			t.Errorf("%s %q: %d remaining after a denied batch, want %d", b.limit, b.id, got, b.remaining)
		}
	}
	// Without the denied descriptor, the same batch is spent whole.
	resp = h.call(request("edge", desc("remote_address", "192.0.2.9"), desc("api_key", "k1", "path", "/login")))
	checkStatuses(t, resp, ok,
		limited(ok, "Clients", 5, second, 4, 200*time.Millisecond),
		limited(ok, "Keys", 10, hour, 9, 6*time.Minute),
	)
}

// A descriptor costs its own hits_addend when it sets one, otherwise the
// request's; 0 means 1 in both.
func TestHitsAddend(t *testing.T) {
	const unset = -1
	for _, tc := range []struct {
		name        string
		requestHits uint32
		own         int64 // the descriptor's hits_addend, or unset
		want        int64 // Keys remaining, of 10
	}{
		{"no hits anywhere: 1", 0, unset, 9},
		{"the request's hits", 4, unset, 6},
		{"the descriptor's hits win over the request's", 4, 2, 8},
		{"the descriptor's hits without the request's", 0, 7, 3},
		{"a descriptor's 0 means 1", 4, 0, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t)
			d := desc("api_key", "k1", "path", "/p")
			if tc.own != unset {
				withHits(d, uint64(tc.own))
			}
			req := request("edge", d)
			req.HitsAddend = tc.requestHits
			h.call(req)
			if got := h.remaining("Keys", "k1:/p"); got != tc.want {
				t.Errorf("Keys: %d remaining, want %d", got, tc.want)
			}
		})
	}
}

// When every limited descriptor has is_negative_hits, their hits are
// given back: the answer is OK, and each status shows its bucket after
// the refund.
func TestNegativeHitsAreRefunded(t *testing.T) {
	h := start(t)
	h.call(request("edge", withHits(desc("user", "bob"), 3), desc("remote_address", "192.0.2.1")))
	resp := h.call(request("edge",
		negative(withHits(desc("user", "bob"), 2)),
		desc("unknown", "x"),
		negative(desc("remote_address", "192.0.2.1")),
	))
	checkResponse(t, resp, &rlsv3.RateLimitResponse{OverallCode: ok, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
		limited(ok, "Logins", 3, minute, 2, 20*time.Second),
		unlimited(),
		limited(ok, "Clients", 5, second, 5, 0),
	}})
	if got := h.remaining("Logins", "bob"); got != 2 {
		t.Errorf("Logins bob: %d remaining after giving 2 back, want 2", got)
	}
	// A refund of a full bucket gives nothing back and is still OK.
	resp = h.call(request("edge", negative(desc("remote_address", "192.0.2.1"))))
	checkStatuses(t, resp, ok, limited(ok, "Clients", 5, second, 5, 0))
}

// Rules swapped while the server serves apply from the next request; nil
// rules limit nothing.
func TestSetRulesSwapsTheRules(t *testing.T) {
	h := start(t)
	req := request("edge", desc("user", "bob"))
	checkStatuses(t, h.call(req), ok, limited(ok, "Logins", 3, minute, 2, 20*time.Second))

	h.server.SetRules(mustRules(t, []descriptors.Domain{{Name: "edge", Rules: []descriptors.Rule{{Keys: []string{"user"}, Limit: "Keys"}}}}))
	checkStatuses(t, h.call(req), ok, limited(ok, "Keys", 10, hour, 9, 6*time.Minute))

	h.server.SetRules(nil)
	checkStatuses(t, h.call(req), ok, unlimited())
	for _, b := range []bucketState{{"Logins", "bob", 2}, {"Keys", "bob", 9}} {
		if got := h.remaining(b.limit, b.id); got != b.remaining {
			t.Errorf("%s %q: %d remaining, want %d", b.limit, b.id, got, b.remaining)
		}
	}
}

// The limit override a descriptor may carry is ignored: limits come from
// the limit files alone.
func TestDescriptorLimitOverrideIsIgnored(t *testing.T) {
	h := start(t)
	d := desc("user", "bob")
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1000, Unit: typev3.RateLimitUnit_SECOND}
	checkStatuses(t, h.call(request("edge", d)), ok, limited(ok, "Logins", 3, minute, 2, 20*time.Second))
}

// Rules can be swapped while calls are decided; each call decides with
// one set or the other (the race detector watches the swap).
func TestSetRulesWhileServing(t *testing.T) {
	h := start(t)
	other := mustRules(t, []descriptors.Domain{{Name: "edge", Rules: []descriptors.Rule{{Keys: []string{"user"}, Limit: "Keys"}}}})
	original := mustRules(t, testDomains)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			if i%2 == 0 {
				h.server.SetRules(other)
			} else {
				h.server.SetRules(original)
			}
		}
	}()
	for range 20 {
		resp := h.call(request("edge", desc("user", "carol")))
		if name := resp.GetStatuses()[0].GetCurrentLimit().GetName(); name != "Logins" && name != "Keys" {
			t.Errorf("limit %q, want Logins or Keys", name)
		}
	}
	<-done
}

// The values of a rule of several keys are joined with ':' as they are, so
// two descriptors whose values split one id at different ':' are one
// bucket: across requests they share it, and in one request they are a
// duplicate bucket, refused with nothing spent.
func TestJoinedValuesAreJoinedPlainly(t *testing.T) {
	h := start(t, func(su *setup) {
		su.defaults = `
Pairs:
  enum: 101
  id: string
  burst: 2
  count: 2
  period: 1h
`
		su.opts.Rules = mustRules(t, []descriptors.Domain{{Name: "edge", Rules: []descriptors.Rule{
			{Keys: []string{"a", "b"}, Limit: "Pairs"},
		}}})
	})
	spend := func(a, b string) rlsv3.RateLimitResponse_Code {
		t.Helper()
		return h.call(request("edge", desc("a", a, "b", b))).GetOverallCode()
	}
	if got := spend("tenant:alice", "x"); got != ok {
		t.Fatalf("(a=tenant:alice, b=x): %v, want OK", got)
	}
	if got := h.remaining("Pairs", "tenant:alice:x"); got != 1 {
		t.Fatalf("Pairs tenant:alice:x: %d remaining, want 1", got)
	}
	h.refused(request("edge", desc("a", "tenant:alice", "b", "x"), desc("a", "tenant", "b", "alice:x")), codes.InvalidArgument)
	if got := spend("tenant", "alice:x"); got != ok {
		t.Fatalf("(a=tenant, b=alice:x): %v, want OK", got)
	}
	if got := spend("tenant:alice", "x"); got != overLimit {
		t.Errorf("(a=tenant:alice, b=x) after both spent its burst of 2: %v, want OVER_LIMIT", got)
	}
}
