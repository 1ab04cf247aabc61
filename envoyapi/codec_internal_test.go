package envoyapi

import (
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The codec reads every message proto.Unmarshal reads exactly as it does,
// and any other input without panicking, reading it only where
// proto.Unmarshal refuses it for a string that is not UTF-8.
func FuzzRequestCodec(f *testing.F) {
	for _, req := range []*rlsv3.RateLimitRequest{
		{Domain: "edge", HitsAddend: 3, Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "192.0.2.1"}}},
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "api_key", Value: "k"}, {Key: "path", Value: "/x"}},
				HitsAddend: wrapperspb.UInt64(2), IsNegativeHits: true,
				Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: 2}},
		}},
		{},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x02, 0xc3, 0x28}) // a domain that is not UTF-8
	codec := newRequestCodec()
	f.Fuzz(func(t *testing.T, b []byte) {
		var want rlsv3.RateLimitRequest
		strictErr := proto.Unmarshal(b, &want)
		var got rlsv3.RateLimitRequest
		err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got)
		switch {
		case strictErr == nil && (err != nil || !proto.Equal(&got, &want)):
			t.Fatalf("proto.Unmarshal reads %v; the codec %v, %v", &want, &got, err)
		case strictErr != nil && err == nil && !strings.Contains(strictErr.Error(), "UTF-8"):
			t.Fatalf("the codec read %v from bytes proto.Unmarshal refuses for another fault than a string's: %v", &got, strictErr)
		}
	})
}
