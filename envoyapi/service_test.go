package envoyapi_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/envoyapi"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

const rlsService = "envoy.service.ratelimit.v3.RateLimitService"

// pingSource is a source whose Ping fails while down is set.
type pingSource struct {
	ratelimits.Source
	down atomic.Bool
}

func (s *pingSource) Ping(ctx context.Context) error {
	if s.down.Load() {
		return errStoreDown
	}
	return s.Source.Ping(ctx)
}

// Health answers SERVING for the server and the rate-limit service while
// the source answers, needs no token, and knows no other service.
func TestHealthServingWhileTheSourceAnswers(t *testing.T) {
	tokens := bearer.NewTokens([][]byte{[]byte("api-token")}, nil)
	h := start(t, func(s *setup) { s.opts.Tokens = tokens })
	health := healthpb.NewHealthClient(h.conn)
	for _, service := range []string{"", rlsService} {
		resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: %v, %v; want SERVING", service, resp, err)
		}
	}
	if _, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "other"}); status.Code(err) != codes.NotFound {
		t.Errorf("health of another service: %v, want NotFound", err)
	}
}

// The probe asks the source every 2 seconds (real time): a source that
// does not answer makes the service NOT_SERVING from the start, and
// SERVING once it answers again.
func TestHealthFollowsTheSource(t *testing.T) {
	src := &pingSource{Source: memory.New(0)}
	src.down.Store(true)
	h := start(t, func(s *setup) { s.src = src })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	watch, err := healthpb.NewHealthClient(h.conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: rlsService})
	if err != nil {
		t.Fatal(err)
	}
	next := func() healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		resp, err := watch.Recv()
		if err != nil {
			t.Fatalf("watching health: %v", err)
		}
		return resp.GetStatus()
	}
	if got := next(); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health with the source down: %v, want NOT_SERVING", got)
	}
	src.down.Store(false)
	if got := next(); got != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health once the source answers: %v, want SERVING", got)
	}
}

// Shutdown turns health NOT_SERVING at once, tells the watchers, and then
// ends the streaming calls under way (a health watch, a reflection
// stream), which last as long as their clients want: the graceful stop
// does not wait for them, and Shutdown returns nil before its context
// ends.
func TestShutdownIsNotServingFromItsStart(t *testing.T) {
	h := start(t)
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	watch, err := healthpb.NewHealthClient(h.conn).Watch(watchCtx, &healthpb.HealthCheckRequest{Service: rlsService})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := watch.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before Shutdown: %v, %v; want SERVING", resp, err)
	}
	reflection, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(watchCtx)
	if err != nil {
		t.Fatal(err)
	}
	if err := reflection.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := reflection.Recv(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shutdown := make(chan error, 1)
	go func() { shutdown <- h.server.Shutdown(ctx) }()
	if resp, err := watch.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health once Shutdown began: %v, %v; want NOT_SERVING", resp, err)
	}
	if err := <-shutdown; err != nil {
		t.Errorf("Shutdown with a watch and a reflection stream open: %v, want nil before its context ends", err)
	}
	if _, err := watch.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("the watch after Shutdown: %v, want Unavailable", err)
	}
	if _, err := reflection.Recv(); err == nil {
		t.Error("the reflection stream went on after Shutdown")
	}
	if _, err := h.client.ShouldRateLimit(context.Background(), request("edge", desc("user", "bob"))); status.Code(err) != codes.Unavailable {
		t.Errorf("a call after Shutdown: %v, want Unavailable", err)
	}
}

// Reflection lists the services, needs no token, and describes the
// rate-limit service.
func TestReflection(t *testing.T) {
	tokens := bearer.NewTokens([][]byte{[]byte("api-token")}, nil)
	h := start(t, func(s *setup) { s.opts.Tokens = tokens })
	stream, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	slices.Sort(names)
	want := []string{rlsService, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("services %q, want %q", names, want)
	}

	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: rlsService}}); err != nil {
		t.Fatal(err)
	}
	if resp, err = stream.Recv(); err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("describing %s: %v, %v", rlsService, resp, err)
	}
}

// A server shut down before it serves serves nothing, and Serve returns
// nil at once.
func TestShutdownBeforeServe(t *testing.T) {
	l, _ := newLimiter(t, defaults, memory.New(0))
	srv := envoyapi.New(envoyapi.Options{Limiter: l})
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(ln); err != nil {
		t.Errorf("Serve after Shutdown: %v, want nil", err)
	}
}
