package envoyapi

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/decisionmetrics"
	"github.com/limiter-dev/limiter/envoyapi/descriptors"
	"github.com/limiter-dev/limiter/ratelimits"
)

// DefaultMaxDescriptors is the most descriptors one request may carry by
// default: Envoy sends one per rate-limit action, a handful at most.
const DefaultMaxDescriptors = 100

// streamWorkers is how many goroutines serve calls, reused from call to
// call (serverOptions says why).
const streamWorkers = 64

// DefaultMaxMessageBytes is the largest request accepted by default.
const DefaultMaxMessageBytes = 1 << 20

// methodShouldRateLimit is the full name of the one call that decides.
const methodShouldRateLimit = rlsv3.RateLimitService_ShouldRateLimit_FullMethodName

// serviceName is the rate-limit service's name, as health checks ask for it.
var serviceName = rlsv3.RateLimitService_ServiceDesc.ServiceName

// Options configures a Server.
type Options struct {
	// Limiter decides; required.
	Limiter *ratelimits.Limiter
	// Rules maps descriptors to limits at start (SetRules replaces them);
	// nil has no rules, so every descriptor is unlimited.
	Rules *descriptors.Rules
	// Tokens, when set and holding API tokens, are required on
	// ShouldRateLimit; nil requires none. The HTTP API's set can be
	// shared, so that a reload revokes a token on both.
	Tokens *bearer.Tokens
	// Logger receives a line per source failure, panic and health change;
	// nil discards.
	Logger *slog.Logger
	// Registry receives the service's own metrics; nil makes a private
	// one.
	Registry prometheus.Registerer
	// Decisions are the decision series shared with the other front ends,
	// already registered; nil makes and registers them on Registry.
	Decisions *decisionmetrics.Metrics
	// MaxDescriptors bounds the descriptors of one request
	// (DefaultMaxDescriptors when <= 0).
	MaxDescriptors int
	// MaxMessageBytes bounds the size of one request
	// (DefaultMaxMessageBytes when <= 0).
	MaxMessageBytes int
	// Bounds are what one client may hold of the server; each zero field
	// takes its default.
	Bounds Bounds
	// LimitNameHeader has every OVER_LIMIT answer ask Envoy to add the
	// header x-ratelimit-limit-name, the name of the limit that denied
	// the request, to the client's response. Off by default: it tells
	// clients how the service's limits are named.
	LimitNameHeader bool
}

// Server is Envoy's rate-limit service with its health and reflection
// services. Make it with New, run it with Serve, stop it with Shutdown.
type Server struct {
	limiter        *ratelimits.Limiter
	rules          atomic.Pointer[descriptors.Rules]
	tokens         *bearer.Tokens
	log            *slog.Logger
	decisions      *decisionmetrics.Metrics
	requests       *requestMetrics
	maxDescriptors int
	// limitNameHeader is Options.LimitNameHeader.
	limitNameHeader bool
	callTimeout     time.Duration // Bounds.CallTimeout
	// streaming are the full names of the streaming methods, set once
	// the services are registered, before any call.
	streaming map[string]bool

	grpc   *grpc.Server
	health *health.Server

	// probeCtx ends when Shutdown begins, and with it the health probe.
	probeCtx  context.Context
	stopProbe context.CancelFunc
	// streamsCtx ends once Shutdown has begun its graceful stop, and with
	// it every streaming call under way (stream): a health watch or a
	// reflection stream lasts as long as its client wants, and the
	// graceful stop would wait for it until the shutdown timeout.
	streamsCtx context.Context
	endStreams context.CancelFunc

	mu        sync.Mutex
	closing   bool          // Shutdown has begun
	probing   bool          // the probe runs (the first Serve started it)
	probeDone chan struct{} // closed when the probe has stopped
}

// New returns a Server deciding with opts.Limiter. Nothing listens until
// Serve.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.Decisions == nil {
		opts.Decisions = decisionmetrics.New(opts.Registry)
	}
	if opts.MaxDescriptors <= 0 {
		opts.MaxDescriptors = DefaultMaxDescriptors
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	bounds := opts.Bounds.withDefaults()
	s := &Server{
		limiter:         opts.Limiter,
		tokens:          opts.Tokens,
		log:             opts.Logger,
		decisions:       opts.Decisions,
		maxDescriptors:  opts.MaxDescriptors,
		limitNameHeader: opts.LimitNameHeader,
		callTimeout:     bounds.CallTimeout,
		health:          health.NewServer(),
		probeDone:       make(chan struct{}),
	}
	s.rules.Store(opts.Rules)
	s.probeCtx, s.stopProbe = context.WithCancel(context.Background())
	s.streamsCtx, s.endStreams = context.WithCancel(context.Background())
	s.grpc = grpc.NewServer(s.serverOptions(opts.MaxMessageBytes, bounds)...)
	rlsv3.RegisterRateLimitServiceServer(s.grpc, rateLimitService{s: s})
	healthgrpc.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	s.streaming = streamingMethods(s.grpc)
	s.requests = newRequestMetrics(opts.Registry, s.grpc)
	// Not serving until the first probe has seen the source answer.
	s.setHealth(false)
	return s
}

// serverOptions are the gRPC server's options: the interceptors, the
// request size bound, a pool of stream workers, and the bounds on every
// client (boundOptions).
func (s *Server) serverOptions(maxMessageBytes int, bounds Bounds) []grpc.ServerOption {
	return append([]grpc.ServerOption{
		grpc.UnaryInterceptor(s.unary),
		grpc.StreamInterceptor(s.stream),
		grpc.UnknownServiceHandler(unknownMethod),
		grpc.MaxRecvMsgSize(maxMessageBytes),
		grpc.ForceServerCodecV2(newRequestCodec(s.maxDescriptors)),
		// Without workers gRPC starts a goroutine per call, whose stack
		// then grows through the call's depth every time: about a tenth
		// of the process's CPU under load. Workers keep their grown
		// stacks. In the served binary under the harness's closed loop,
		// 64 of them cut the CPU per call by 12-20% (memory and Redis
		// sources alike); calls beyond 64 at once get a goroutine each,
		// as without workers. Buffer and window sizes and shared write
		// buffers made no measurable difference, so they are left alone.
		grpc.NumStreamWorkers(streamWorkers),
	}, s.boundOptions(bounds)...)
}

// SetRules puts r in use from the next request on, as a reload does; nil
// removes every rule. It is safe while the server serves.
func (s *Server) SetRules(r *descriptors.Rules) { s.rules.Store(r) }

// Serve accepts connections on ln and serves them until Shutdown, then
// returns nil; any other end is an error. The first Serve probes the
// source once before it serves, so health answers SERVING from the first
// call when the source answers, and then every probeInterval.
func (s *Server) Serve(ln net.Listener) error {
	s.startProbe()
	err := s.grpc.Serve(ln)
	if err != nil && errors.Is(err, grpc.ErrServerStopped) && s.isClosing() {
		return nil // Shutdown came first
	}
	return err
}

// Shutdown stops the server: health answers NOT_SERVING from the start,
// so that Envoy stops sending, no new call is accepted, and the calls
// under way are let finish. When ctx ends first, the remaining calls and
// connections are closed at once and ctx's error returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	probing := s.probing
	s.mu.Unlock()
	s.health.Shutdown() // every status NOT_SERVING, and stays so
	s.stopProbe()
	if probing {
		select {
		case <-s.probeDone:
		case <-ctx.Done():
		}
	}
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	// The watchers have been told NOT_SERVING; their streams, and any
	// reflection stream, now end so that the graceful stop does not wait
	// on them.
	s.endStreams()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		s.grpc.Stop()
		<-stopped
		return ctx.Err()
	}
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// rateLimitService is the generated service interface's implementation,
// kept apart so that Server's own methods stay the package's API.
type rateLimitService struct {
	rlsv3.UnimplementedRateLimitServiceServer
	s *Server
}

// ShouldRateLimit decides one request of Envoy's.
func (r rateLimitService) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return r.s.shouldRateLimit(ctx, req)
}
