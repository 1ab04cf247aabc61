package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jmhodges/clock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/decisionmetrics"
	"github.com/limiter-dev/limiter/envoyapi"
	"github.com/limiter-dev/limiter/forwardauth"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/local"
	"github.com/limiter-dev/limiter/source/redis"
	"github.com/limiter-dev/limiter/topdenied"
)

// serveFlags are serve's settings, each also read from the environment
// (see settings for the table of them).
type serveFlags struct {
	configFlags
	redisFlags
	listen     string
	grpcListen string
	grpcBounds envoyapi.Bounds
	// grpcLimitName is envoyapi.Options.LimitNameHeader.
	grpcLimitName   bool
	source          string
	maxBuckets      int
	maxBodyBytes    int64
	maxBatch        int
	sourceTimeout   time.Duration
	shutdownTimeout time.Duration
	failOpen        bool
	logFormat       string
	logLevel        string
	accessLog       bool
	apiTokenFile    string
	adminTokenFile  string
	// insecureNoAdminToken lets --listen reach beyond loopback without
	// admin tokens (adminExposed).
	insecureNoAdminToken bool
	metricsListen        string
	reloadInterval       time.Duration
	pprofListen          string
	gcHeapFloorMiB       int
	idempotencyTTL       time.Duration

	// warnings are settings the environment gave that do not apply to the
	// chosen source; serve logs them once the logger exists.
	warnings []string
}

// serveSynopsis is what `limiter serve --help` says serve does.
const serveSynopsis = `Serves the HTTP API (and, with --grpc-listen, Envoy's rate-limit service)
until SIGINT or SIGTERM; SIGHUP reloads the configuration files.`

// parseServeFlags parses serve's flags and environment; --help prints the
// help to stdout, and parse errors go to stderr.
func parseServeFlags(args []string, stdout, stderr io.Writer) (*serveFlags, error) {
	var bad []string
	f := &serveFlags{}
	fs := newFlagSet("limiter serve", stderr)
	table := f.settings()
	register(fs, table, &bad)
	if err := parseFlags(fs, serveSynopsis, args, stdout); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	set := newSettings(fs, table)
	f.resolve(set)
	if len(bad) > 0 {
		// The values that parsed are checked too, so that one start lists
		// every bad setting (a value that did not parse has its default,
		// which passes).
		if err := set.check(sourceKind(f.source)); err != nil {
			bad = append(bad, err.Error())
		}
		return nil, fmt.Errorf("bad environment: %s", strings.Join(bad, "; "))
	}
	kind := sourceKind(f.source)
	if kind != "memory" && !isRedisKind(kind) {
		return nil, errUnknownSource(f.source)
	}
	if err := set.check(kind); err != nil {
		return nil, err
	}
	if err := f.adminExposed(); err != nil {
		return nil, err
	}
	warnings, err := set.sourceMismatch(kind)
	if err != nil {
		return nil, err
	}
	f.warnings = warnings
	return f, nil
}

func newLogger(format, level string, w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// newClock returns the real clock, or a fake one starting at
// LIMITER_FAKECLOCK (RFC 3339) for tests; the fake one is also returned so
// that /debug/clock can move it.
func newClock() (clock.Clock, clock.FakeClock, error) {
	v, ok := os.LookupEnv("LIMITER_FAKECLOCK")
	if !ok || v == "" {
		return clock.New(), nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, nil, fmt.Errorf("LIMITER_FAKECLOCK=%q is not an RFC 3339 time: %w", v, err)
	}
	fake := clock.NewFake()
	fake.Set(t)
	return fake, fake, nil
}

// serve wires flags → config → source → local layer → Limiter → handlers
// → server, and shuts down in reverse order on SIGINT or SIGTERM: the
// servers finish their requests, the local layer pushes its unpushed hits,
// the source closes.
func serve(args []string, stdout, stderr io.Writer) int {
	f, err := parseServeFlags(args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		if !isFlagSyntaxError(err) {
			// The flag package has printed its own errors already.
			fmt.Fprintln(stderr, "limiter serve:", err)
		}
		return 2
	}
	log, err := newLogger(f.logFormat, f.logLevel, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "limiter serve:", err)
		return 2
	}
	for _, w := range f.warnings {
		log.Warn(w)
	}
	if err := runServer(f, log); err != nil {
		log.Error("limiter stopped", "err", err)
		var missing *missingFile
		if errors.As(err, &missing) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, redis.ErrBadURL) {
			// A file that is not where the settings say (a
			// configuration file, a token file, a CA file), or a
			// --source URL that does not parse, is a mistake in how the
			// process was started.
			return 2
		}
		return 1
	}
	return 0
}

// configNotLoaded is the end of a start whose configuration files did
// not load; their problems are logged one per line before it.
type configNotLoaded struct{ err error }

func (e *configNotLoaded) Error() string { return "configuration did not load" }

func (e *configNotLoaded) Unwrap() error { return e.err }

func runServer(f *serveFlags, log *slog.Logger) error {
	if f.gcHeapFloorMiB > 0 && os.Getenv("GOGC") == "" {
		limit := cgroupMemoryLimit("/sys/fs/cgroup")
		floor := gcFloorFor(uint64(f.gcHeapFloorMiB)<<20, limit)
		if floor < uint64(f.gcHeapFloorMiB)<<20 {
			log.Info("GC heap floor lowered to a quarter of the container's memory limit",
				"floor_mib", floor>>20, "memory_limit_mib", limit>>20)
		}
		defer startGCFloor(floor).stop()
	}
	if f.grpcListen == "" {
		// The descriptors file is Envoy's service's alone: without it, a
		// file that names limits this configuration lacks (the bundled
		// one, beside other limit files) must not stop serving or reloads.
		f.descriptors = ""
	}
	loaded, err := f.configFlags.load(nil, nil)
	if err != nil {
		for _, line := range problemLines(err) {
			log.Error("configuration problem", "problem", line)
		}
		return &configNotLoaded{err}
	}
	cfg := loaded.cfg
	apiTokens, err := readTokenFile(f.apiTokenFile)
	if err != nil {
		return err
	}
	adminTokens, err := readTokenFile(f.adminTokenFile)
	if err != nil {
		return err
	}
	clk, fake, err := newClock()
	if err != nil {
		return err
	}
	goredis.SetLogger(redisClientLog{log})
	src, err := openSource(f, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := src.Close(); err != nil {
			log.Warn("closing the source", "err", err)
		}
	}()
	pingAtStart(src, sourceKind(f.source), startPingTimeout(f), log)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var opts []ratelimits.Option
	if f.failOpen {
		opts = append(opts, ratelimits.WithFailOpen())
	}
	opts = append(opts, ratelimits.WithIdempotencyTTL(f.idempotencyTTL))
	// Window and rate-counter limits with a sync_rate other than 0 count in
	// this process's memory when the source is shared, in the local layer
	// in front of it; on the memory source, the only process, every
	// sync_rate behaves as 0.
	var layer *local.Layer
	var syncNow func(context.Context) (int, int, error) // POST /v1/admin/sync; nil: nothing syncs
	closeLayer := func() {}
	syncObs := newSyncMetrics(reg)
	limiterSource := observeSource(src, reg)
	if sourceKind(f.source) != "memory" {
		// The layer bounds each call to the source (the memory source
		// never waits, so a deadline around each call would only cost a
		// timer per request).
		if layer, err = newLocalLayer(src, clk, f.sourceTimeout, syncObs, log); err != nil {
			return err
		}
		limiterSource, syncNow = layer.Front(limiterSource), layer.Sync
		// The hits not pushed yet go to the source once the servers have
		// stopped, before the source closes: deferred after its Close, so
		// it runs first on every way out, and called on a clean stop.
		var once sync.Once
		closeLayer = func() { once.Do(func() { closeLocalLayer(layer, f.shutdownTimeout, log) }) }
		defer closeLayer()
	}
	registerLayerGauges(reg, layer)
	limiter, err := ratelimits.NewLimiter(cfg, limiterSource, clk, opts...)
	if err != nil {
		return err
	}
	tokens := bearer.NewTokens(apiTokens, adminTokens)
	rules, fwd := loaded.rules, loaded.fwd
	var forwardAuth atomic.Pointer[forwardauth.Rules]
	forwardAuth.Store(fwd)
	reload := newReloader(f, loaded, limiter, tokens, log, reg)
	reload.setForwardAuth = forwardAuth.Store
	reload.onRedis = isRedisKind(sourceKind(f.source))
	if layer != nil {
		reload.follow = func(cfg *ratelimits.Config) { layer.Follow(followedBoxes(cfg)) }
		reload.follow(cfg)
		reload.move = func(running, next *ratelimits.Config) {
			ctx, cancel := context.WithTimeout(context.Background(), reloadPushTimeout)
			defer cancel()
			layer.Move(ctx, movedLimits(running, next))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Every front end's denials go to the top lists through the shared
	// decision series.
	top := topdenied.New(clk)
	decisions := decisionmetrics.New(reg, decisionmetrics.WithDenials(top))
	handler := httpapi.New(httpapi.Options{
		Limiter:      limiter,
		Logger:       log,
		MaxBodyBytes: f.maxBodyBytes,
		MaxBatch:     f.maxBatch,
		Registry:     reg,
		Decisions:    decisions,
		OmitMetrics:  f.metricsListen != "",
		Tokens:       tokens,
		Reload:       reload.adminReload,
		Sync:         syncNow,
		ReloadStatus: reload.history.status,
		ForwardAuth:  forwardAuth.Load,
		TopDenied:    topLister(ctx, top, src, clk, f.redisFlags.topPush, f.sourceTimeout, log),
		AccessLog:    f.accessLog,
	})
	var envoy *envoyServer
	if f.grpcListen != "" {
		envoy = &envoyServer{addr: f.grpcListen, srv: envoyapi.New(envoyapi.Options{
			Limiter:         limiter,
			Rules:           rules,
			Tokens:          tokens,
			Logger:          log,
			Registry:        reg,
			Decisions:       decisions,
			MaxDescriptors:  f.maxBatch,
			MaxMessageBytes: int(min(f.maxBodyBytes, math.MaxInt32)),
			Bounds:          f.grpcBounds,
			LimitNameHeader: f.grpcLimitName,
		})}
		reload.setRules = envoy.srv.SetRules
	}
	if fake != nil {
		// LIMITER_FAKECLOCK: tests step time through /debug/clock.
		handler = httpapi.WithDebugClock(handler, fake, tokens)
	}

	// SIGHUP is taken over before the process says it is listening: its
	// default action would otherwise end the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	servers := []*namedServer{{name: "api", addr: f.listen, handler: handler}}
	if f.metricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		servers = append(servers, &namedServer{name: "metrics", addr: f.metricsListen, handler: mux})
	}
	if f.pprofListen != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		servers = append(servers, &namedServer{name: "pprof", addr: f.pprofListen, handler: mux})
	}
	served := make(chan error, len(servers)+1)
	if envoy != nil {
		// Started first, so that its address is logged before the API's
		// "listening" line, which says the process is ready.
		if err := envoy.start(log, served); err != nil {
			return err
		}
	}
	for _, s := range servers {
		if err := s.start(log, served); err != nil {
			shutdownAll(servers, envoy, f.shutdownTimeout, log)
			return err
		}
	}
	go reloadOnSignal(ctx, hup, reload)
	if f.reloadInterval > 0 {
		go reload.watch(ctx, f.reloadInterval)
	}
	loaded.logFiles(log)
	attrs := []any{"addr", servers[0].bound, "source", sourceKind(f.source), "defaults", f.defaults, "overrides", f.overrides,
		"forward_auth", f.forwardAuth, "forward_auth_rules", fwd.Count(), "fake_clock", fake != nil, "auth", len(apiTokens) > 0 || len(adminTokens) > 0, "version", buildVersion()}
	if sourceKind(f.source) != "memory" {
		// The key format decides where buckets are in Redis: every process
		// sharing one must log the same.
		attrs = append(attrs, "redis_groups", f.redisFlags.groups)
	}
	log.Info("listening", attrs...)

	select {
	case err := <-served:
		shutdownAll(servers, envoy, f.shutdownTimeout, log)
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests", "timeout", f.shutdownTimeout)
	if err := shutdownAll(servers, envoy, f.shutdownTimeout, log); err != nil {
		return err
	}
	closeLayer()
	log.Info("stopped")
	return nil
}

// reloadOnSignal reloads the configuration on every signal from hup until
// ctx ends.
func reloadOnSignal(ctx context.Context, hup <-chan os.Signal, r *reloader) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			_ = r.Reload("SIGHUP") // failures are logged and counted
		}
	}
}

// namedServer is one listener of the process: the API, or metrics.
type namedServer struct {
	name    string
	addr    string
	handler http.Handler
	bound   string
	srv     *http.Server
}

// start listens (so a taken port fails the start at once) and serves in
// the background; the end of serving is reported on served.
func (n *namedServer) start(log *slog.Logger, served chan<- error) error {
	ln, err := listen(n.addr)
	if err != nil {
		return fmt.Errorf("%s listener: %w", n.name, err)
	}
	n.bound = ln.Addr().String()
	if ln.Addr().Network() == "unix" {
		n.bound = unixPrefix + n.bound
	}
	n.srv = &http.Server{
		Handler:           n.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if n.name != "api" {
		log.Info("listening", "server", n.name, "addr", n.bound)
	}
	go func() {
		if err := n.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			served <- fmt.Errorf("%s server: %w", n.name, err)
		}
	}()
	return nil
}

// shutdownAll stops every started server, the HTTP ones and Envoy's
// service (nil when off) at once, letting in-flight requests finish
// within timeout.
func shutdownAll(servers []*namedServer, envoy *envoyServer, timeout time.Duration, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	failed := func(name string, err error) {
		log.Warn("shutdown", "server", name, "err", err)
		mu.Lock()
		errs = append(errs, fmt.Errorf("%s shutdown: %w", name, err))
		mu.Unlock()
	}
	if envoy != nil && envoy.started {
		wg.Go(func() {
			if err := envoy.srv.Shutdown(ctx); err != nil {
				failed("grpc", err)
			}
		})
	}
	for _, s := range servers {
		if s.srv == nil {
			continue
		}
		wg.Go(func() {
			if err := s.srv.Shutdown(ctx); err != nil {
				failed(s.name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// envoyServer is Envoy's rate-limit service (gRPC) on its own listener.
type envoyServer struct {
	addr    string
	srv     *envoyapi.Server
	started bool
}

// start listens (so a taken port fails the start at once) and serves in
// the background; the end of serving is reported on served.
func (e *envoyServer) start(log *slog.Logger, served chan<- error) error {
	ln, err := net.Listen("tcp", e.addr)
	if err != nil {
		return fmt.Errorf("grpc listener: %w", err)
	}
	e.started = true
	log.Info("listening", "server", "grpc", "addr", ln.Addr().String())
	go func() {
		if err := e.srv.Serve(ln); err != nil {
			served <- fmt.Errorf("grpc server: %w", err)
		}
	}()
	return nil
}

// unixPrefix marks a listen address that is a Unix socket's path.
const unixPrefix = "unix:"

// listen opens addr: host:port over TCP, or unix:PATH, a Unix socket, for
// a proxy on the same host (nginx's upstream server unix:PATH): both sides
// are spared loopback TCP's cost on every request. A socket left at PATH
// by an earlier process is removed first; any other file there is an
// error, never overwritten. The socket is made readable and writable by
// its owner and group alone (connecting needs write permission): the
// proxy runs as the limiter's user or in its group. The listener removes
// the socket when it closes.
func listen(addr string) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, unixPrefix)
	if !ok {
		return net.Listen("tcp", addr)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, socketMode); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// socketMode is a Unix socket's permissions: owner and group.
const socketMode = 0o660
