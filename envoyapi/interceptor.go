package envoyapi

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/limiter-dev/limiter/bearer"
)

// msgUnauthenticated is the refusal of a call without a valid token.
const msgUnauthenticated = "a valid bearer token is required (authorization: Bearer <token> metadata)"

// unary wraps every unary call: it times it by method and code, turns a
// panic into INTERNAL and a log line (one bad call must never take the
// process down), and checks the token of ShouldRateLimit, the one call
// that needs one. It is one interceptor rather than a chain, since a chain
// costs a closure per link on every call.
func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			s.panicked(info.FullMethod, v)
			resp, err = nil, status.Error(codes.Internal, msgInternal)
		}
		s.requests.observe(info.FullMethod, status.Code(err), time.Since(start))
	}()
	if info.FullMethod == methodShouldRateLimit {
		if err := s.authenticate(ctx); err != nil {
			return nil, err
		}
	}
	return handler(ctx, req)
}

// stream wraps every streaming call (health watches, reflection, and
// calls to methods the server does not have) as unary does, without the
// token check: none of them needs one. It also lifts the call's timeout
// once its first request has come (awaitingRequest).
func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	start := time.Now()
	ss, ended := awaitingRequest(ss)
	defer func() {
		ended()
		if v := recover(); v != nil {
			s.panicked(info.FullMethod, v)
			err = status.Error(codes.Internal, msgInternal)
		}
		s.requests.observe(info.FullMethod, status.Code(err), time.Since(start))
	}()
	if s.streamsCtx.Err() != nil {
		return status.Error(codes.Unavailable, msgShuttingDown)
	}
	// The handler runs apart, so that a shutdown can end the call even
	// while the handler waits in RecvMsg, which only the client or the
	// connection's end would wake (reflection); a health watch also sees
	// its context end, and returns by itself.
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	stream := &cutStream{ServerStream: ss, ctx: ctx, sent: make(chan struct{}, 1)}
	stop := context.AfterFunc(s.streamsCtx, func() { stream.cutWhenTold(cancel) })
	defer stop()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				s.panicked(info.FullMethod, v)
				done <- status.Error(codes.Internal, msgInternal)
			}
		}()
		done <- handler(srv, stream)
	}()
	select {
	case err = <-done:
		if status.Code(err) == codes.Canceled && s.streamsCtx.Err() != nil {
			// The handler saw the context the shutdown cut.
			return status.Error(codes.Unavailable, msgShuttingDown)
		}
		return err
	case <-ctx.Done():
		if s.streamsCtx.Err() == nil {
			return <-done // the client's end: the handler sees it too
		}
		return status.Error(codes.Unavailable, msgShuttingDown)
	}
}

// msgShuttingDown ends the streaming calls a shutdown cuts.
const msgShuttingDown = "the server is shutting down"

// watchGrace is how long a shutdown waits for a health watch to tell its
// client NOT_SERVING before it ends the watch anyway (a client that does
// not read).
const watchGrace = time.Second

// cutStream is a streaming call's stream whose context a shutdown ends.
// It notes the statuses a health watch sends, so that the shutdown ends
// a watch only once its client was told it is no longer served.
type cutStream struct {
	grpc.ServerStream
	ctx     context.Context
	serving atomic.Bool   // the last status sent was SERVING
	sent    chan struct{} // a status was sent
}

func (c *cutStream) Context() context.Context { return c.ctx }

func (c *cutStream) SendMsg(m any) error {
	err := c.ServerStream.SendMsg(m)
	if r, ok := m.(*healthpb.HealthCheckResponse); ok && err == nil {
		c.serving.Store(r.GetStatus() == healthpb.HealthCheckResponse_SERVING)
		select {
		case c.sent <- struct{}{}:
		default:
		}
	}
	return err
}

// cutWhenTold calls cut once the stream's client was last told anything
// but SERVING (at once for a stream that is not a health watch), or after
// watchGrace.
func (c *cutStream) cutWhenTold(cut context.CancelFunc) {
	grace := time.NewTimer(watchGrace)
	defer grace.Stop()
	for c.serving.Load() {
		select {
		case <-c.sent:
		case <-grace.C:
			cut()
			return
		case <-c.ctx.Done():
			return
		}
	}
	cut()
}

// panicked logs a recovered panic with its stack, without which nothing
// says where it came from.
func (s *Server) panicked(fullMethod string, v any) {
	s.log.Error("panic in handler", "method", s.requests.label(fullMethod), "panic", v, "stack", string(debug.Stack()))
}

// authenticate checks the call's "authorization: Bearer <token>" metadata
// when API tokens are configured: an API token or an admin token passes.
// Only the first authorization value counts, as in the HTTP API.
func (s *Server) authenticate(ctx context.Context) error {
	if s.tokens == nil || !s.tokens.Required(bearer.API) {
		return nil
	}
	if vs := metadata.ValueFromIncomingContext(ctx, "authorization"); len(vs) > 0 {
		if tok, ok := bearer.FromAuthorization(vs[0]); ok && s.tokens.Allows(bearer.API, tok) {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, msgUnauthenticated)
}

// unknownMethod answers a call to a method the server does not have, as
// gRPC would, but through the interceptors, so that such calls are
// counted (under the method label "unknown").
func unknownMethod(any, grpc.ServerStream) error {
	return status.Error(codes.Unimplemented, "unknown service or method")
}
