package main

import (
	"testing"

	"golang.org/x/net/http2"
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

// A HEADERS frame's fragment is its payload without the pad length, the
// priority and the padding the flags announce; a frame too short for
// what its flags announce is refused.
func TestHeadersFragment(t *testing.T) {
	const padded, priority = http2.FlagHeadersPadded, http2.FlagHeadersPriority
	for _, tc := range []struct {
		name    string
		flags   http2.Flags
		stream  uint32
		payload string
		want    string
		ok      bool
	}{
		{"plain", 0, 1, "abc", "abc", true},
		{"padded", padded, 1, "\x02abc\x00\x00", "abc", true},
		{"with priority", priority, 1, "\x00\x00\x00\x03\x10abc", "abc", true},
		{"padded, with priority", padded | priority, 1, "\x01\x00\x00\x00\x03\x10abc\x00", "abc", true},
		{"empty", 0, 3, "", "", true},
		{"on stream 0", 0, 0, "abc", "", false},
		{"no pad length", padded, 1, "", "", false},
		{"padding beyond the frame", padded, 1, "\x05abc", "", false},
		{"short priority", priority, 1, "\x00\x00", "", false},
	} {
		fh := http2.FrameHeader{Type: http2.FrameHeaders, Flags: tc.flags, StreamID: tc.stream, Length: uint32(len(tc.payload))}
		got, err := headersFragment(fh, []byte(tc.payload))
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok %v", tc.name, err, tc.ok)
			continue
		}
		if tc.ok && string(got) != tc.want {
			t.Errorf("%s: fragment %q, want %q", tc.name, got, tc.want)
		}
	}
}
