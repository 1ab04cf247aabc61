package envoyapi_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// rawCodec sends a request's bytes as they are and returns the answer's,
// so a test can send what gRPC's own codec would refuse to marshal.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// callRaw sends req marshalled, with every "@@@@" in it replaced by bytes
// that are not UTF-8 (of the same length), and cut to cut bytes when
// cut > 0.
func (h *harness) callRaw(req *rlsv3.RateLimitRequest, cut int) (*rlsv3.RateLimitResponse, error) {
	h.t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		h.t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte("@@@@"), []byte{0xc3, 0x28, 0xff, 0xfe})
	if cut > 0 {
		b = b[:cut]
	}
	var out []byte
	if err := h.conn.Invoke(context.Background(), rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, &b, &out, grpc.ForceCodecV2(rawCodec{})); err != nil {
		return nil, err
	}
	resp := &rlsv3.RateLimitResponse{}
	if err := proto.Unmarshal(out, resp); err != nil {
		h.t.Fatal(err)
	}
	return resp, nil
}

// A value that is not UTF-8 (Envoy copies header bytes as they come) in a
// descriptor no rule counts leaves the request as it would be without
// it: the others are decided. In a descriptor a rule counts, it is an id
// the limit's kind refuses: INVALID_ARGUMENT, nothing spent. A message
// that is not protobuf is still refused, as INVALID_ARGUMENT too.
func TestValuesThatAreNotUTF8(t *testing.T) {
	h := start(t)
	before := h.remaining("Logins", "alice")
	resp, err := h.callRaw(request("edge", desc("user", "alice"), desc("junk", "@@@@")), 0)
	if err != nil || resp.GetOverallCode() != ok || len(resp.GetStatuses()) != 2 || resp.GetStatuses()[1].GetCurrentLimit() != nil {
		t.Fatalf("a stray value in an uncounted descriptor: %v, %v; want OK, the second unlimited", resp, err)
	}
	if got := h.remaining("Logins", "alice"); got != before-1 {
		t.Fatalf("Logins alice: %d remaining, want %d (spent once)", got, before-1)
	}
	_, err = h.callRaw(request("edge", desc("user", "alice"), desc("user", "bo@@@@")), 0)
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a stray value in a counted descriptor: %v; want InvalidArgument", err)
	}
	if got := h.remaining("Logins", "alice"); got != before-1 {
		t.Fatalf("Logins alice after a refused request: %d remaining, want %d", got, before-1)
	}
	if _, err := h.callRaw(request("edge", desc("junk", "@@@@")), 9); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(status.Convert(err).Message(), "not a RateLimitRequest in protobuf wire format") {
		t.Fatalf("a message cut short: %v; want InvalidArgument, as a request that is not wire format", err)
	}
}
