package envoyapi_test

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/limiter-dev/limiter/envoyapi"
)

// Every request that is not well formed, or that a limit refuses, is
// INVALID_ARGUMENT with a message naming what is wrong (and which
// descriptor), and spends nothing: the valid descriptor 0 of each request
// finds its bucket full afterwards.
func TestInvalidRequestsSpendNothing(t *testing.T) {
	h := start(t, func(s *setup) { s.opts.MaxDescriptors = 4 })
	valid := func() *ratelimitv3.RateLimitDescriptor { return desc("remote_address", "192.0.2.1") }
	long := strings.Repeat("x", 1025)
	for _, tc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want string // the start of the message
	}{
		{"an empty domain", request("", valid()), "the domain is empty"},
		{"no descriptors", request("edge"), "the request has no descriptors"},
		{"more descriptors than allowed", request("edge", valid(), desc("user", "a"), desc("user", "b"), desc("user", "c"), desc("user", "d")),
			"the request has more than 4 descriptors, the most allowed"},
		{"an empty key", request("edge", valid(), desc("user", "a", "", "b")), "descriptor 1, entry 1: the key is empty"},
		{"an empty key in a descriptor no rule matches", request("edge", valid(), desc("", "b")), "descriptor 1, entry 0: the key is empty"},
		{"a value over 1024 bytes", request("edge", valid(), desc("user", long)), "descriptor 1, entry 0: the value is 1025 bytes; at most 1024"},
		{"an id its kind refuses", request("edge", valid(), desc("remote_address", "300.0.0.1")), "descriptor 1: invalid id"},
		{"a cost above the burst", request("edge", valid(), withHits(desc("user", "a"), 4)), "descriptor 1: cost out of range: 4 exceeds the burst of 3"},
		{"the request's hits above a burst", func() *rlsv3.RateLimitRequest {
			r := request("edge", valid(), desc("user", "a"))
			r.HitsAddend = 4
			return r
		}(), "descriptor 1: cost out of range: 4 exceeds the burst of 3"},
		{"hits_addend beyond int64", request("edge", valid(), withHits(desc("user", "a"), math.MaxUint64)), "descriptor 1: hits_addend 18446744073709551615 is out of range"},
		{"two descriptors on one bucket", request("edge", valid(), desc("user", "a"), desc("user", "a")), "descriptor 2: duplicate bucket in batch"},
		{"two spellings of one bucket", request("edge", valid(), desc("remote_address", "2001:DB8::1"), desc("remote_address", "2001:db8::1")),
			"descriptor 2: duplicate bucket in batch"},
		{"negative and positive hits together", request("edge", valid(), negative(desc("user", "a"))),
			"descriptor 1: is_negative_hits differs from the request's other limited descriptors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := h.refused(tc.req, codes.InvalidArgument)
			if !strings.HasPrefix(msg, tc.want) {
				t.Errorf("message %q, want it to start with %q", msg, tc.want)
			}
			for _, b := range []bucketState{{"Clients", "192.0.2.1", 5}, {"Logins", "a", 3}} {
				if got := h.remaining(b.limit, b.id); got != b.remaining {
					t.Errorf("%s %q: %d remaining after a refused request, want %d", b.limit, b.id, got, b.remaining)
				}
			}
		})
	}
	// The largest request allowed still works.
	h.call(request("edge", valid(), desc("user", "a"), desc("user", "b"), desc("user", "c")))
}

// Sizes bound the keys and values of descriptors a rule counts only: a
// long key or value in a descriptor no rule matches is unlimited, like any
// other, and the request's other descriptors are decided as usual.
func TestLongEntriesOfUnlimitedDescriptors(t *testing.T) {
	h := start(t)
	long := strings.Repeat("x", 2000)
	resp := h.call(request("edge", desc("remote_address", "192.0.2.9"), desc(long, "a"), desc("unknown", long)))
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || len(resp.GetStatuses()) != 3 {
		t.Fatalf("answer %v", resp)
	}
	for i, st := range resp.GetStatuses()[1:] {
		if st.GetCode() != rlsv3.RateLimitResponse_OK || st.GetCurrentLimit() != nil {
			t.Errorf("status %d: %v, want OK and unlimited", i+1, st)
		}
	}
	if got := h.remaining("Clients", "192.0.2.9"); got != 4 {
		t.Errorf("Clients: %d remaining, want 4: the matched descriptor was spent", got)
	}
}

// By default a request may carry DefaultMaxDescriptors descriptors and
// DefaultMaxMessageBytes bytes; a larger message is refused by gRPC
// before it is decoded.
func TestRequestSizeBounds(t *testing.T) {
	h := start(t)
	many := make([]*ratelimitv3.RateLimitDescriptor, envoyapi.DefaultMaxDescriptors+1)
	for i := range many {
		many[i] = desc("unknown", "x")
	}
	h.call(request("edge", many[1:]...))
	if msg := h.refused(request("edge", many...), codes.InvalidArgument); msg != "the request has more than 100 descriptors, the most allowed" {
		t.Errorf("message %q", msg)
	}

	small := start(t, func(s *setup) { s.opts.MaxMessageBytes = 512 })
	small.call(request("edge", desc("unknown", strings.Repeat("x", 400))))
	small.refused(request("edge", desc("unknown", strings.Repeat("x", 600))), codes.ResourceExhausted)
}

// A descriptor of more entries than a rule can have keys matches no rule:
// it is unlimited, however many entries it has, past the size the codec
// walks before decoding too, unless one of its entries has an empty key.
func TestManyEntriesAreUnlimited(t *testing.T) {
	h := start(t)
	many := func(n int) *ratelimitv3.RateLimitDescriptor {
		return desc(strings.Split(strings.Repeat("user,a,", n), ",")[:2*n]...)
	}
	for _, n := range []int{65, 5000} {
		resp := h.call(request("edge", many(n)))
		if resp.GetOverallCode() != ok || len(resp.GetStatuses()) != 1 || resp.GetStatuses()[0].GetCurrentLimit() != nil {
			t.Errorf("a descriptor of %d entries: %v; want OK and unlimited", n, resp)
		}
	}
	d := many(5000)
	d.Entries[3000].Key = ""
	if msg := h.refused(request("edge", d), codes.InvalidArgument); !strings.Contains(msg, "the key is empty") {
		t.Errorf("an empty key at entry 3000 of 5000: %q", msg)
	}
}

// A request whose bytes are not a RateLimitRequest in protobuf wire format
// is the client's mistake, INVALID_ARGUMENT as any malformed request is,
// not INTERNAL: it spends nothing, and the connection serves on. So is one
// larger than the size at which the codec walks a request before decoding
// it.
func TestUnreadableRequestIsInvalidArgument(t *testing.T) {
	h := start(t)
	long := append([]byte{0x0a, 0x04, 'e', 'd', 'g', 'e'}, bytes.Repeat([]byte{0x12, 0x00}, 5000)...)
	for _, b := range [][]byte{
		{0xff, 0xff, 0xff},                   // a field tag cut short
		{0x0a, 0x10, 'e'},                    // the domain cut short
		{0x12, 0x05, 0x0a, 0x03, 0x0a, 0x01}, // an entry cut short in a descriptor
		append(long, 0x12, 0x05, 0x0a),       // the same, past 4 KiB
	} {
		var out []byte
		err := h.conn.Invoke(context.Background(), rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, &b, &out, grpc.ForceCodecV2(rawCodec{}))
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("% x: %v, want INVALID_ARGUMENT", b[:min(len(b), 8)], err)
		}
	}
	if got := h.remaining("Clients", "192.0.2.1"); got != 5 {
		t.Errorf("%d remaining after unreadable requests, want 5", got)
	}
	h.call(request("edge", desc("remote_address", "192.0.2.1")))
}

// A request that is read holds an unknown field, whatever its number, as
// protobuf has it: ignored. The field the codec marks an unreadable request
// with, sent beside a domain and descriptors, leaves the request decided.
func TestUnknownFieldBesideARequestIsIgnored(t *testing.T) {
	h := start(t)
	req := request("edge", desc("remote_address", "192.0.2.1"))
	req.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, protowire.MaxValidNumber, protowire.VarintType), 1))
	if _, err := h.callRaw(req, 0); err != nil {
		t.Fatalf("a request with an unknown field: %v, want it decided", err)
	}
	if got := h.remaining("Clients", "192.0.2.1"); got != 4 {
		t.Errorf("%d remaining after a request with an unknown field, want 4", got)
	}
}
