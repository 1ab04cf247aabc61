package main

import (
	"testing"

	"golang.org/x/net/http2/hpack"
)

// The request header block is sent as it is on every call, so it must
// decode to the same fields every time and leave nothing in the server's
// decoding table that a later block could depend on.
func TestRequestHeaderBlock(t *testing.T) {
	block, err := requestHeaderBlock("127.0.0.1:8081")
	if err != nil {
		t.Fatal(err)
	}
	want := []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"},
		{Name: ":authority", Value: "127.0.0.1:8081"},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
	}
	// One decoder for all blocks, as a server has per connection.
	dec := hpack.NewDecoder(4096, nil)
	for i := range 3 {
		got, err := dec.DecodeFull(block)
		if err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		if len(got) != len(want) {
			t.Fatalf("block %d: %d fields, want %d: %v", i, len(got), len(want), got)
		}
		for j := range want {
			if got[j].Name != want[j].Name || got[j].Value != want[j].Value {
				t.Errorf("block %d field %d = %s: %s, want %s: %s", i, j, got[j].Name, got[j].Value, want[j].Name, want[j].Value)
			}
		}
	}
	// A reference to the first entry of the dynamic table (index 62)
	// fails only if the blocks added none.
	if _, err := dec.DecodeFull([]byte{0x80 | 62}); err == nil {
		t.Error("the blocks added fields to the server's decoding table")
	}
}
