package envoyapi

import (
	"context"
	"errors"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/tap"
)

// The defaults of Bounds.
const (
	// DefaultMaxConcurrentStreams: a call the server holds costs about
	// 11 KiB, its goroutine's stack and the stream's state (20,000 calls
	// without a request held 220 MiB), and its headers, so a connection
	// at the cap holds some 11 MiB, and 27 MiB at most with headers of
	// DefaultMaxHeaderBytes. Envoy multiplexes its calls over one
	// connection per worker thread and waits for each at most its
	// timeout (20 ms by default), so 1000 calls under way on one
	// connection would be some 50,000 calls a second from one worker,
	// more than a worker makes; and a connection at the limit the server
	// advertises does not make Envoy wait: its pool opens another.
	DefaultMaxConcurrentStreams = 1000
	// DefaultMaxHeaderBytes is far more than the headers Envoy sends to
	// the service (its own, a token, tracing), where gRPC's default, 16
	// MiB, would let each call hold that much: a header gRPC decodes
	// from base64 (a "-bin" one) is new memory even when HPACK sent it as
	// a one-byte reference to a header sent before, so 20 calls of a few
	// KiB each on the wire held 320 MiB.
	DefaultMaxHeaderBytes = 16 << 10
	// DefaultCallTimeout is far above what Envoy waits for an answer
	// (its timeout: 20 ms by default) and above any sensible source
	// timeout (100 ms by default), and short enough that calls whose
	// request never comes are let go within seconds.
	DefaultCallTimeout = 5 * time.Second
	// DefaultKeepaliveMinTime lets Envoy ping as often as its
	// connection_keepalive is commonly set (every few seconds), where
	// gRPC's own default policy closes a connection pinged more often
	// than every 5 minutes ("too_many_pings").
	DefaultKeepaliveMinTime = 5 * time.Second
	// DefaultMaxConnectionIdle: a connection without calls costs a few
	// goroutines and its buffers; Envoy opens a new one on its next call.
	DefaultMaxConnectionIdle = 5 * time.Minute
	// DefaultMaxConnectionAge has clients reconnect now and then, which
	// spreads them over the processes behind a load balancer and ends
	// the streams that never end otherwise (health watches).
	DefaultMaxConnectionAge = 30 * time.Minute
	// DefaultMaxConnectionAgeGrace is twice DefaultCallTimeout: a call
	// under way when the connection reaches its age ends within the call
	// timeout anyway.
	DefaultMaxConnectionAgeGrace = 2 * DefaultCallTimeout
)

// Bounds are what one client may hold of the server: calls at once on a
// connection and the size of their headers, how long a call may last,
// how often a client may ping, and how long a connection may live. Without them, one connection opening calls
// it never sends the request of keeps a goroutine and the call's state
// each, for as long as it stays connected. A zero field takes its
// default.
type Bounds struct {
	// MaxConcurrentStreams is the most calls one connection may have
	// under way at once; a call beyond it is refused (the stream is reset
	// with REFUSED_STREAM, which tells the client it may retry it
	// elsewhere). It is also the most goroutines serving one connection:
	// the stream workers are shared, and a call finding none free gets a
	// goroutine of its own. DefaultMaxConcurrentStreams when <= 0.
	MaxConcurrentStreams int
	// MaxHeaderBytes is the largest size of one call's headers
	// (metadata), as HTTP/2 counts it (each field's name and value, and
	// 32 bytes). The server announces it when the connection opens, and
	// resets a call with larger headers (FRAME_SIZE_ERROR).
	// DefaultMaxHeaderBytes when <= 0.
	MaxHeaderBytes int
	// CallTimeout bounds a call from the moment its headers arrive. A
	// unary call (ShouldRateLimit, a health check) not answered by then,
	// whether its request never came or deciding took that long, ends with
	// DEADLINE_EXCEEDED; so does a streaming call (a health watch,
	// reflection) whose first request has not come by then, while one
	// that has its request lives on, until the client ends it or the
	// connection's age. A client's own shorter deadline (grpc-timeout)
	// still applies. DefaultCallTimeout when <= 0.
	CallTimeout time.Duration
	// KeepaliveMinTime is the shortest time between a client's pings the
	// server accepts, with or without calls under way; a client pinging
	// more often is sent GOAWAY ("too_many_pings") and disconnected.
	// DefaultKeepaliveMinTime when <= 0.
	KeepaliveMinTime time.Duration
	// MaxConnectionIdle closes a connection (GOAWAY) that has had no call
	// under way for that long. DefaultMaxConnectionIdle when <= 0.
	MaxConnectionIdle time.Duration
	// MaxConnectionAge closes a connection (GOAWAY, so that the client
	// sends its next calls on a new one) once it is that old, give or
	// take a tenth, at random, so that clients do not all reconnect at
	// once. DefaultMaxConnectionAge when <= 0.
	MaxConnectionAge time.Duration
	// MaxConnectionAgeGrace is how long the calls under way on a
	// connection closed for its age may still finish; the connection is
	// then cut. DefaultMaxConnectionAgeGrace when <= 0.
	MaxConnectionAgeGrace time.Duration
}

// withDefaults fills the zero fields of b.
func (b Bounds) withDefaults() Bounds {
	if b.MaxConcurrentStreams <= 0 {
		b.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if b.MaxHeaderBytes <= 0 {
		b.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	orDefault := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	orDefault(&b.CallTimeout, DefaultCallTimeout)
	orDefault(&b.KeepaliveMinTime, DefaultKeepaliveMinTime)
	orDefault(&b.MaxConnectionIdle, DefaultMaxConnectionIdle)
	orDefault(&b.MaxConnectionAge, DefaultMaxConnectionAge)
	orDefault(&b.MaxConnectionAgeGrace, DefaultMaxConnectionAgeGrace)
	return b
}

// boundOptions are the gRPC server's options that enforce b (filled).
func (s *Server) boundOptions(b Bounds) []grpc.ServerOption {
	return []grpc.ServerOption{
		// The transport resets a stream beyond the limit, and also stops
		// reading the connection while as many handlers run as the limit
		// (a stream the client reset may leave its handler running).
		grpc.MaxConcurrentStreams(uint32(min(b.MaxConcurrentStreams, math.MaxUint32))),
		grpc.MaxHeaderListSize(uint32(min(b.MaxHeaderBytes, math.MaxUint32))),
		grpc.InTapHandle(s.bound),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: b.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     b.MaxConnectionIdle,
			MaxConnectionAge:      b.MaxConnectionAge,
			MaxConnectionAgeGrace: b.MaxConnectionAgeGrace,
		}),
	}
}

// streamingMethods are the full names of srv's streaming methods.
func streamingMethods(srv *grpc.Server) map[string]bool {
	methods := map[string]bool{}
	for service, info := range srv.GetServiceInfo() {
		for _, m := range info.Methods {
			if m.IsClientStream || m.IsServerStream {
				methods["/"+service+"/"+m.Name] = true
			}
		}
	}
	return methods
}

// bound gives a call its deadline (Bounds.CallTimeout). It is the
// server's tap, which gRPC runs in the connection's reading goroutine as
// the call's headers arrive, and whose context the call then has. That
// is the one place a deadline covers the wait for the request: gRPC reads
// a unary call's request before it runs the interceptors and the
// handler, so neither is reached by a call whose request never comes, and
// the context such a call waits on is this one.
//
// A client's deadline (grpc-timeout) is already on ctx, and gRPC ends the
// call then. When it comes no later than the call timeout, as Envoy's
// does (it sends its timeout, 20 ms by default), the call is left as it
// is: a deadline of its own would cost every call a timer and a context
// (8 allocations, some 5% of a call's time in BenchmarkShouldRateLimit)
// and change nothing.
func (s *Server) bound(ctx context.Context, info *tap.Info) (context.Context, error) {
	if s.streaming[info.FullMethodName] {
		return awaitRequest(ctx, s.callTimeout), nil
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= s.callTimeout {
		return ctx, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	// gRPC cancels ctx's parent when the call ends, which releases ctx
	// and stops its timer: there is nothing left for cancel to do.
	_ = cancel
	return ctx, nil
}

// errNoRequest is the cause of the end of a streaming call whose first
// request did not come within the call timeout.
var errNoRequest = errors.New("no request within the call timeout")

// requestWait is the context of a streaming call until its first request
// comes: it ends after the call timeout, unless firstRequest stops its
// timer first. Unlike a deadline, that leaves a stream that has its
// request (a health watch, say) open for as long as its client wants it.
// Its Err is context.DeadlineExceeded once the timer has ended it, so
// that the call ends with DEADLINE_EXCEEDED, as a unary call does: gRPC
// answers a read that failed with the code its context's Err maps to.
type requestWait struct {
	context.Context
	timer *time.Timer
}

// awaitRequest is the context of a streaming call on ctx (requestWait).
func awaitRequest(ctx context.Context, d time.Duration) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	return &requestWait{Context: ctx, timer: time.AfterFunc(d, func() { cancel(errNoRequest) })}
}

func (w *requestWait) Err() error {
	err := w.Context.Err()
	if err != nil && context.Cause(w.Context) == errNoRequest {
		return context.DeadlineExceeded
	}
	return err
}

// requestWaitKey is the context key of a streaming call's requestWait.
type requestWaitKey struct{}

func (w *requestWait) Value(key any) any {
	if key == (requestWaitKey{}) {
		return w
	}
	return w.Context.Value(key)
}

// firstRequest is a streaming call's stream that stops the call's timer
// once its first request has arrived. The stream interceptor puts it in
// place (awaitingRequest); gRPC never calls RecvMsg of one stream
// concurrently.
type firstRequest struct {
	grpc.ServerStream
	timer *time.Timer // nil once stopped
}

func (f *firstRequest) RecvMsg(m any) error {
	err := f.ServerStream.RecvMsg(m)
	if err == nil && f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	return err
}

// awaitingRequest wraps the stream of a streaming call that waits for
// its first request (requestWait) in a firstRequest, and returns a
// function that stops the timer for good, to call when the call ends.
func awaitingRequest(ss grpc.ServerStream) (grpc.ServerStream, func()) {
	w, ok := ss.Context().Value(requestWaitKey{}).(*requestWait)
	if !ok {
		return ss, func() {}
	}
	return &firstRequest{ServerStream: ss, timer: w.timer}, func() { w.timer.Stop() }
}
