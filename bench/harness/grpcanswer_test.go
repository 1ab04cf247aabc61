package main

import (
	"errors"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
)

// Every encoded request is a RateLimitRequest of the domain, one
// descriptor of one entry with the id bench/spend.lua would spend, and a
// cost of 1.
func TestEncodeRequests(t *testing.T) {
	reqs, err := encodeRequests("bench", "api_key", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, b := range reqs {
		var req rlsv3.RateLimitRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		want := &rlsv3.RateLimitRequest{
			Domain: "bench",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{{
				Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "api_key", Value: []string{"key-1", "key-2", "key-3"}[i]}},
			}},
			HitsAddend: 1,
		}
		if !proto.Equal(&req, want) {
			t.Errorf("request %d = %v, want %v", i, &req, want)
		}
	}
}

// A framed request is the message behind gRPC's prefix: not compressed,
// and its length big-endian.
func TestGRPCFrame(t *testing.T) {
	msg := make([]byte, 300)
	msg[0], msg[299] = 'a', 'z'
	got := grpcFrame(msg)
	if want := []byte{0, 0, 0, 1, 44}; string(got[:5]) != string(want) {
		t.Errorf("prefix % x, want % x", got[:5], want)
	}
	if string(got[5:]) != string(msg) {
		t.Error("the message after the prefix is not the one given")
	}
}

// Every answer must be one uncompressed message whose prefix tells its
// length exactly; anything else is a bad answer.
func TestCheckFraming(t *testing.T) {
	prefix := func(b ...byte) (p [grpcPrefixLen]byte) { copy(p[:], b); return p }
	for _, tc := range []struct {
		name   string
		prefix [grpcPrefixLen]byte
		size   int
		ok     bool
	}{
		{"a message of 12 bytes", prefix(0, 0, 0, 0, 12), 17, true},
		{"an empty message", prefix(0, 0, 0, 0, 0), 5, true},
		{"a large message", prefix(0, 0, 1, 0, 0), 65536 + 5, true},
		{"no body", prefix(), 0, false},
		{"less than a prefix", prefix(0, 0), 2, false},
		{"compressed", prefix(1, 0, 0, 0, 12), 17, false},
		{"shorter than its prefix says", prefix(0, 0, 0, 0, 12), 16, false},
		{"longer: a second message", prefix(0, 0, 0, 0, 12), 17 + 6, false},
	} {
		err := checkFraming(tc.prefix, tc.size)
		if (err == nil) != tc.ok {
			t.Errorf("%s: checkFraming = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, errBadAnswer) {
			t.Errorf("%s: %v does not wrap errBadAnswer", tc.name, err)
		}
	}
}

// checkAnswer accepts what a rate-limit service answers and refuses what
// would make a row measure something else.
func TestCheckAnswer(t *testing.T) {
	answer := func(code rlsv3.RateLimitResponse_Code, limits ...string) []byte {
		r := &rlsv3.RateLimitResponse{OverallCode: code}
		for _, l := range limits {
			st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: code}
			if l != "" {
				st.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{Name: l}
			}
			r.Statuses = append(r.Statuses, st)
		}
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name   string
		answer []byte
		limit  string
		ok     bool
	}{
		{"allowed", answer(rlsv3.RateLimitResponse_OK, "L"), "L", true},
		{"denied", answer(rlsv3.RateLimitResponse_OVER_LIMIT, "L"), "L", true},
		{"any limit when none is asked for", answer(rlsv3.RateLimitResponse_OK, ""), "", true},
		{"unknown code", answer(rlsv3.RateLimitResponse_UNKNOWN, "L"), "L", false},
		{"no status", answer(rlsv3.RateLimitResponse_OK), "L", false},
		{"two statuses", answer(rlsv3.RateLimitResponse_OK, "L", "L"), "L", false},
		{"unlimited: the rules did not match", answer(rlsv3.RateLimitResponse_OK, ""), "L", false},
		{"another limit", answer(rlsv3.RateLimitResponse_OK, "M"), "L", false},
		{"not protobuf", []byte{0xff, 0xff, 0xff}, "", false},
	} {
		var into rlsv3.RateLimitResponse
		err := checkAnswer(tc.answer, &into, tc.limit)
		if (err == nil) != tc.ok {
			t.Errorf("%s: checkAnswer = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, errBadAnswer) {
			t.Errorf("%s: %v does not wrap errBadAnswer", tc.name, err)
		}
	}
}
