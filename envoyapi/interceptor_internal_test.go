package envoyapi

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// stubStream is a streaming call's server side with nothing behind it.
type stubStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s stubStream) Context() context.Context  { return s.ctx }
func (stubStream) SendMsg(any) error           { return nil }
func (stubStream) SetHeader(metadata.MD) error { return nil }

// A streaming call that a shutdown cuts ends UNAVAILABLE, whether its
// handler returns on its context (a health watch) or is still waiting
// (reflection in RecvMsg); one that ends by itself keeps its own status;
// one begun after the shutdown is refused before its handler runs.
func TestStreamStatusAtShutdown(t *testing.T) {
	newServer := func() *Server {
		s := &Server{log: slog.New(slog.DiscardHandler), requests: newRequestMetrics(prometheus.NewRegistry(), grpc.NewServer())}
		s.streamsCtx, s.endStreams = context.WithCancel(context.Background())
		return s
	}
	info := &grpc.StreamServerInfo{FullMethod: "/grpc.health.v1.Health/Watch"}
	ss := stubStream{ctx: context.Background()}

	// A handler that returns once its context ends, as the health
	// service's does, with Canceled.
	s := newServer()
	started := make(chan struct{})
	answered := make(chan error, 1)
	go func() {
		answered <- s.stream(nil, ss, info, func(_ any, st grpc.ServerStream) error {
			close(started)
			<-st.Context().Done()
			return status.Error(codes.Canceled, "Stream has ended.")
		})
	}()
	<-started
	s.endStreams()
	if err := <-answered; status.Code(err) != codes.Unavailable {
		t.Errorf("a watch cut by the shutdown: %v, want Unavailable", err)
	}

	// A handler that never looks at its context (blocked in RecvMsg).
	s = newServer()
	release := make(chan struct{})
	defer close(release)
	started = make(chan struct{})
	go func() {
		answered <- s.stream(nil, ss, info, func(any, grpc.ServerStream) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	s.endStreams()
	if err := <-answered; status.Code(err) != codes.Unavailable {
		t.Errorf("a stream waiting in RecvMsg at the shutdown: %v, want Unavailable", err)
	}

	// A handler that ends by itself with its own status keeps it.
	s = newServer()
	own := status.Error(codes.InvalidArgument, "bad request")
	handler := func(any, grpc.ServerStream) error { return own }
	if err := s.stream(nil, ss, info, handler); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a streaming call that ended by itself: %v, want its own InvalidArgument", err)
	}
	s.endStreams()
	if err := s.stream(nil, ss, info, handler); status.Code(err) != codes.Unavailable {
		t.Errorf("a streaming call begun after the shutdown: %v, want Unavailable", err)
	}
}
