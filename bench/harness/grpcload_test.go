package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeRLS is a rate-limit service in the test process. It allows ids
// ending in an even digit and denies the others; it answers the domain
// "broken" with the code UNKNOWN, "down" with the gRPC status
// UNAVAILABLE ("verbose" with a reason too long for one frame of
// trailers), "big" with bigAnswer bytes of response headers, and
// "hang" not at all, until the test ends. It counts the calls it served
// and the most it served at once.
type fakeRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
	calls, inFlight, maxInFlight atomic.Int64
	hang                         chan struct{}
}

// bigAnswer is the size of the "big" domain's answers: several times
// the protocol's initial flow-control window of 64 KiB.
const bigAnswer = 200 << 10

func (f *fakeRLS) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for m := f.maxInFlight.Load(); n > m && !f.maxInFlight.CompareAndSwap(m, n); m = f.maxInFlight.Load() {
	}
	f.calls.Add(1)
	code := rlsv3.RateLimitResponse_OK
	var headers []*corev3.HeaderValue
	switch {
	case req.GetDomain() == "hang":
		<-f.hang
		return nil, status.Error(codes.Canceled, "test over")
	case req.GetDomain() == "down":
		return nil, status.Error(codes.Unavailable, "source down")
	case req.GetDomain() == "verbose":
		return nil, status.Error(codes.Unavailable, "source down: "+strings.Repeat("why ", 10000))
	case req.GetDomain() == "broken":
		code = rlsv3.RateLimitResponse_UNKNOWN
	case req.GetDomain() == "big":
		for i := range 4 {
			headers = append(headers, &corev3.HeaderValue{Key: "x-filler-" + string(rune('a'+i)), Value: strings.Repeat("x", bigAnswer/4)})
		}
	case strings.ContainsAny(lastByte(req.GetDescriptors()[0].GetEntries()[0].GetValue()), "13579"):
		code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	return &rlsv3.RateLimitResponse{OverallCode: code, ResponseHeadersToAdd: headers, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{
		Code: code, CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{Name: "L"},
	}}}, nil
}

func lastByte(s string) string { return s[len(s)-1:] }

// serve runs a gRPC server with opts on a loopback port until the test
// ends, with register adding its services.
func serve(t *testing.T, register func(*grpc.Server), opts ...grpc.ServerOption) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	register(srv)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// serveFake runs fakeRLS with opts until the test ends.
func serveFake(t *testing.T, opts ...grpc.ServerOption) (*fakeRLS, string) {
	t.Helper()
	fake := &fakeRLS{hang: make(chan struct{})}
	t.Cleanup(func() { close(fake.hang) })
	addr := serve(t, func(s *grpc.Server) { rlsv3.RegisterRateLimitServiceServer(s, fake) }, opts...)
	return fake, addr
}

// bytesCodec lets a test server answer bytes that are not a message.
type bytesCodec struct{}

func (bytesCodec) Name() string                  { return "proto" }
func (bytesCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (bytesCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append((*v.(*[]byte))[:0], b...)
	return nil
}

// serveGarbage runs a server that answers every call with OK and bytes
// that are no protobuf message, counting the calls.
func serveGarbage(t *testing.T) (*atomic.Int64, string) {
	t.Helper()
	var calls atomic.Int64
	addr := serve(t, func(*grpc.Server) {},
		grpc.ForceServerCodec(bytesCodec{}),
		grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
			var req []byte
			if err := stream.RecvMsg(&req); err != nil {
				return err
			}
			calls.Add(1)
			garbage := []byte{0xff, 0xff, 0xff, 0xff}
			return stream.SendMsg(&garbage)
		}))
	return &calls, addr
}

// loadFor opens a load of conns connections to addr for 100 requests of
// domain.
func loadFor(t *testing.T, addr, domain string, conns int, window uint32) *grpcLoad {
	t.Helper()
	reqs, err := encodeRequests(domain, "api_key", 100)
	if err != nil {
		t.Fatal(err)
	}
	load, err := newGRPCLoad(context.Background(), addr, conns, window, reqs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(load.close)
	return load
}

// The closed loop against real gRPC servers: every call it counts was
// served, allowed and denied answers alike are successes, failures and
// answers of the wrong kind are counted and reported, and a second run on
// the same connections (the measured run after the warm-up) works as the
// first did.
func TestGRPCLoad(t *testing.T) {
	fake, fakeAddr := serveFake(t)
	garbageCalls, garbageAddr := serveGarbage(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name              string
		addr, domain      string
		served            *atomic.Int64
		conns             int
		window            uint32
		wantErrs, wantBad bool
	}{
		{name: "a working service", addr: fakeAddr, domain: "bench", served: &fake.calls, conns: 2, window: recvWindow},
		{name: "one connection", addr: fakeAddr, domain: "bench", served: &fake.calls, conns: 1, window: recvWindow},
		{name: "answers larger than the initial window", addr: fakeAddr, domain: "big", served: &fake.calls, conns: 2, window: recvWindow},
		{name: "answers larger than a small window: window updates", addr: fakeAddr, domain: "big", served: &fake.calls, conns: 1, window: 65535},
		{name: "a failing service", addr: fakeAddr, domain: "down", served: &fake.calls, conns: 2, window: recvWindow, wantErrs: true},
		{name: "failures told in trailers of several frames", addr: fakeAddr, domain: "verbose", served: &fake.calls, conns: 1, window: recvWindow, wantErrs: true},
		{name: "a service answering the wrong kind", addr: fakeAddr, domain: "broken", served: &fake.calls, conns: 2, window: recvWindow, wantBad: true},
		{name: "a service answering garbage", addr: garbageAddr, domain: "bench", served: garbageCalls, conns: 2, window: recvWindow, wantBad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			load := loadFor(t, tc.addr, tc.domain, tc.conns, tc.window)
			if err := load.preflight(ctx, "L"); (err == nil) != (!tc.wantErrs && !tc.wantBad) {
				t.Errorf("preflight = %v", err)
			}
			for run := range 2 {
				before := tc.served.Load()
				st, err := load.run(ctx, 8, 100*time.Millisecond)
				if err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				served := tc.served.Load() - before
				if st.calls == 0 || st.calls != served {
					t.Errorf("run %d: counted %d calls, the server served %d", run, st.calls, served)
				}
				if int64(len(st.latencies)) != st.calls {
					t.Errorf("run %d: %d latencies for %d calls", run, len(st.latencies), st.calls)
				}
				if p50, p99 := percentile(st.latencies, 0.5), percentile(st.latencies, 0.99); p50 <= 0 || p99 < p50 {
					t.Errorf("run %d: p50 %v, p99 %v", run, p50, p99)
				}
				if st.elapsed < 100*time.Millisecond {
					t.Errorf("run %d: ran %v of 100ms", run, st.elapsed)
				}
				if got := st.errors > 0; got != tc.wantErrs || (tc.wantErrs && st.errors != st.calls) {
					t.Errorf("run %d: %d errors in %d calls", run, st.errors, st.calls)
				}
				if got := st.badAnswer > 0; got != tc.wantBad {
					t.Errorf("run %d: %d bad answers in %d calls", run, st.badAnswer, st.calls)
				}
				if (st.firstErr != nil) != (tc.wantErrs || tc.wantBad) {
					t.Errorf("run %d: first error %v", run, st.firstErr)
				}
				if tc.wantErrs && !strings.Contains(st.firstErr.Error(), "Unavailable: source down") {
					t.Errorf("run %d: the first error, %v, does not tell the server's status", run, st.firstErr)
				}
			}
		})
	}
}

// A server that allows two streams at a time is never sent a third: the
// calls over the limit wait for a stream instead of being refused, so
// none fails.
func TestGRPCLoadKeepsToMaxConcurrentStreams(t *testing.T) {
	fake, addr := serveFake(t, grpc.MaxConcurrentStreams(2))
	load := loadFor(t, addr, "bench", 1, recvWindow)
	if got := load.conns[0].maxStreams; got != 2 {
		t.Fatalf("the connection allows %d streams, the server 2", got)
	}
	st, err := load.run(context.Background(), 16, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if st.calls == 0 || st.errors != 0 || st.badAnswer != 0 {
		t.Errorf("%d calls, %d errors, %d bad answers; first: %v", st.calls, st.errors, st.badAnswer, st.firstErr)
	}
	if got := fake.maxInFlight.Load(); got > 2 {
		t.Errorf("the server served %d calls at once, allowing 2", got)
	}
}

// A run against a server that stops answering ends when its context
// does, with the context's error, and the connections fail from then on.
func TestGRPCLoadCancelled(t *testing.T) {
	_, addr := serveFake(t)
	load := loadFor(t, addr, "hang", 1, recvWindow)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := load.run(ctx, 4, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("run = %v, want the context's deadline", err)
	}
	if _, err := load.run(context.Background(), 4, time.Millisecond); !errors.Is(err, errConnection) {
		t.Errorf("a run after the failure = %v, want errConnection", err)
	}
}

// The load refuses settings that would measure nothing, and a server
// that does not speak HTTP/2.
func TestGRPCLoadRefuses(t *testing.T) {
	_, addr := serveFake(t)
	reqs, err := encodeRequests("bench", "api_key", 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := newGRPCLoad(ctx, addr, 0, recvWindow, reqs); err == nil {
		t.Error("accepted no connections")
	}
	if _, err := newGRPCLoad(ctx, addr, 1, recvWindow, nil); err == nil {
		t.Error("accepted no requests")
	}
	load := loadFor(t, addr, "bench", 1, recvWindow)
	if _, err := load.run(ctx, 0, time.Millisecond); err == nil {
		t.Error("accepted no calls in flight")
	}
	// An HTTP/1.1 server answers the preface with an error page.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
	}()
	if _, err := newGRPCLoad(ctx, ln.Addr().String(), 1, recvWindow, reqs); !errors.Is(err, errConnection) {
		t.Errorf("an HTTP/1.1 server: %v, want errConnection", err)
	}
}
