package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The codec sends exactly the bytes it is given and hands back exactly the
// bytes received, reusing the caller's storage; it refuses anything but
// *[]byte rather than sending something else.
func TestRawCodec(t *testing.T) {
	msg := []byte("\x0a\x05bench")
	out, err := rawCodec{}.Marshal(&msg)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Materialize(); string(got) != string(msg) {
		t.Errorf("Marshal sent %q, want %q", got, msg)
	}
	into := make([]byte, 0, 64)
	storage := &into[:1][0]
	in := mem.BufferSlice{mem.SliceBuffer("\x08"), mem.SliceBuffer("\x01\x12\x00")}
	if err := (rawCodec{}).Unmarshal(in, &into); err != nil {
		t.Fatal(err)
	}
	if string(into) != "\x08\x01\x12\x00" {
		t.Errorf("Unmarshal gave %q, want the four bytes in order", into)
	}
	if &into[0] != storage {
		t.Error("Unmarshal allocated although the slice had room")
	}
	if _, err := (rawCodec{}).Marshal("text"); err == nil {
		t.Error("Marshal accepted a string")
	}
	var notBytes rlsv3.RateLimitResponse
	if err := (rawCodec{}).Unmarshal(in, &notBytes); err == nil {
		t.Error("Unmarshal accepted a message")
	}
	if (rawCodec{}).Name() != "proto" {
		t.Error("the codec must announce the protobuf content subtype the server expects")
	}
}

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

// The nearest rank: p of the values are at or below the answer, which is
// always one of the values.
func TestPercentile(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"none", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of four is the second", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"median of five is the third", ms(1, 2, 3, 4, 5), 0.5, 3 * time.Millisecond},
		{"p99 of 100", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p50 of 100", ms(hundred...), 0.50, 50 * time.Millisecond},
		{"p100 is the largest", ms(hundred...), 1, 100 * time.Millisecond},
		{"a tiny p is the smallest", ms(hundred...), 0.001, time.Millisecond},
	} {
		if got := percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("%s: percentile(%v) = %v, want %v", tc.name, tc.p, got, tc.want)
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

// fakeRLS is a rate-limit service in the test process: it allows ids
// ending in an even digit, denies the others, and answers the domains
// "broken" with UNKNOWN and "down" with UNAVAILABLE.
type fakeRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
	calls atomic.Int64
}

func (f *fakeRLS) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	f.calls.Add(1)
	code := rlsv3.RateLimitResponse_OK
	switch {
	case req.GetDomain() == "down":
		return nil, status.Error(codes.Unavailable, "source down")
	case req.GetDomain() == "broken":
		code = rlsv3.RateLimitResponse_UNKNOWN
	case strings.ContainsAny(lastByte(req.GetDescriptors()[0].GetEntries()[0].GetValue()), "13579"):
		code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	return &rlsv3.RateLimitResponse{OverallCode: code, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{
		Code: code, CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{Name: "L"},
	}}}, nil
}

func lastByte(s string) string { return s[len(s)-1:] }

// serveFake runs fakeRLS on a loopback port until the test ends.
func serveFake(t *testing.T) (*fakeRLS, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	fake := &fakeRLS{}
	rlsv3.RegisterRateLimitServiceServer(srv, fake)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return fake, ln.Addr().String()
}

// The closed loop against a real gRPC server: every call it counts was
// served, allowed and denied answers alike are successes, and failures and
// answers of the wrong kind are counted and reported.
func TestGRPCLoad(t *testing.T) {
	fake, addr := serveFake(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name              string
		domain            string
		wantErrs, wantBad bool
	}{
		{name: "a working service", domain: "bench"},
		{name: "a failing service", domain: "down", wantErrs: true},
		{name: "a service answering nonsense", domain: "broken", wantBad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs, err := encodeRequests(tc.domain, "api_key", 100)
			if err != nil {
				t.Fatal(err)
			}
			load, err := newGRPCLoad(addr, 2, reqs)
			if err != nil {
				t.Fatal(err)
			}
			defer load.close()
			if err := load.preflight(ctx, "L"); (err == nil) != (!tc.wantErrs && !tc.wantBad) {
				t.Errorf("preflight = %v", err)
			}
			before := fake.calls.Load()
			st, err := load.run(ctx, 8, 150*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			served := fake.calls.Load() - before
			if st.calls == 0 || st.calls != served {
				t.Errorf("counted %d calls, the server served %d", st.calls, served)
			}
			if int64(len(st.latencies)) != st.calls {
				t.Errorf("%d latencies for %d calls", len(st.latencies), st.calls)
			}
			if p50, p99 := percentile(st.latencies, 0.5), percentile(st.latencies, 0.99); p50 <= 0 || p99 < p50 {
				t.Errorf("p50 %v, p99 %v", p50, p99)
			}
			if st.elapsed < 150*time.Millisecond {
				t.Errorf("ran %v of 150ms", st.elapsed)
			}
			if got := st.errors > 0; got != tc.wantErrs || (tc.wantErrs && st.errors != st.calls) {
				t.Errorf("%d errors in %d calls", st.errors, st.calls)
			}
			if got := st.badAnswer > 0; got != tc.wantBad {
				t.Errorf("%d bad answers in %d calls", st.badAnswer, st.calls)
			}
			if (st.firstErr != nil) != (tc.wantErrs || tc.wantBad) {
				t.Errorf("first error %v", st.firstErr)
			}
		})
	}
}

// The load refuses settings that would measure nothing.
func TestGRPCLoadRefuses(t *testing.T) {
	reqs, err := encodeRequests("bench", "api_key", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newGRPCLoad("127.0.0.1:1", 0, reqs); err == nil {
		t.Error("accepted no connections")
	}
	if _, err := newGRPCLoad("127.0.0.1:1", 1, nil); err == nil {
		t.Error("accepted no requests")
	}
	load, err := newGRPCLoad("127.0.0.1:1", 1, reqs)
	if err != nil {
		t.Fatal(err)
	}
	defer load.close()
	if _, err := load.run(context.Background(), 0, time.Millisecond); err == nil {
		t.Error("accepted no calls in flight")
	}
}
