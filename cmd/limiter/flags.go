package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/limiter-dev/limiter/envoyapi"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/redis"
)

// setting is one row of a command's flag table: a flag, the environment
// variable that stands in for it (envName of its name), the field it
// fills with its built-in default, its help, the check of its value, and
// the sources it applies to.
type setting struct {
	name  string
	bind  binding
	usage string // the help; "(env VAR)" is added
	check check  // the zero check accepts every value
	scope scope
}

// scope is the source kinds a setting applies to.
type scope int

const (
	everySource scope = iota
	memoryOnly
	redisOnly
)

// appliesTo reports whether a setting of scope sc applies to a source of
// kind (sourceKind).
func (sc scope) appliesTo(kind string) bool {
	switch sc {
	case memoryOnly:
		return kind == "memory"
	case redisOnly:
		return isRedisKind(kind)
	}
	return true
}

// register defines every setting's flag on fs. A flag's default is its
// environment variable's value when that is set, so a flag on the command
// line beats the environment, which beats the built-in default. A variable
// that does not parse is added to *bad, so the command refuses to start
// instead of guessing.
func register(fs *flag.FlagSet, settings []setting, bad *[]string) {
	for _, s := range settings {
		s.bind(fs, s.name, s.usage+" (env "+envName(s.name)+")", bad)
	}
}

// binding defines a setting's flag, bound to the field it fills.
type binding func(fs *flag.FlagSet, name, usage string, bad *[]string)

// bindVar makes a binding from one of flag.FlagSet's Var methods, the
// field, its built-in default and how the environment's text is parsed.
func bindVar[T any](define func(*flag.FlagSet, *T, string, T, string), p *T, fallback T, parse func(string) (T, error)) binding {
	return func(fs *flag.FlagSet, name, usage string, bad *[]string) {
		define(fs, p, name, envParsed(envName(name), fallback, parse, bad), usage)
	}
}

func stringVar(p *string, fallback string) binding {
	return bindVar((*flag.FlagSet).StringVar, p, fallback, func(s string) (string, error) { return s, nil })
}

func intVar(p *int, fallback int) binding {
	return bindVar((*flag.FlagSet).IntVar, p, fallback, strconv.Atoi)
}

func int64Var(p *int64, fallback int64) binding {
	return bindVar((*flag.FlagSet).Int64Var, p, fallback, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) })
}

func durationVar(p *time.Duration, fallback time.Duration) binding {
	return bindVar((*flag.FlagSet).DurationVar, p, fallback, time.ParseDuration)
}

func boolVar(p *bool, fallback bool) binding {
	return bindVar((*flag.FlagSet).BoolVar, p, fallback, strconv.ParseBool)
}

// envParsed reads an environment variable with parse, adding a bad value
// to *bad.
func envParsed[T any](name string, fallback T, parse func(string) (T, error), bad *[]string) T {
	v, ok := os.LookupEnv(name)
	if !ok {
		return fallback
	}
	parsed, err := parse(v)
	if err != nil {
		*bad = append(*bad, fmt.Sprintf("%s=%q: %v", name, v, err))
		return fallback
	}
	return parsed
}

// check is a test of a setting's value after parsing: ok says it passed,
// want what the flag takes.
type check struct {
	ok   func() bool
	want string
}

const (
	wantPositive    = "must be positive"
	wantNotNegative = "must not be negative"
)

func positive[T int | int64 | time.Duration](p *T) check {
	return check{func() bool { return *p > 0 }, wantPositive}
}

func notNegative[T int | int64 | time.Duration](p *T) check {
	return check{func() bool { return *p >= 0 }, wantNotNegative}
}

// address refuses a listen address that no start could listen on: not
// host:port with a port number or service name, nor unix:PATH where unix
// says the server listens on Unix sockets too (Envoy's gRPC service
// listens on TCP alone). Empty is allowed where the server is off when
// empty; --listen is never empty. A taken port or an unknown host is
// found only by listening, and exits 1 as a failure of this start rather
// than of its settings.
func address(p *string, optional, unix bool) check {
	want := "must be host:port"
	if unix {
		want += " or unix:PATH"
	}
	return check{func() bool {
		if *p == "" {
			return optional
		}
		if path, ok := strings.CutPrefix(*p, unixPrefix); ok {
			return unix && path != ""
		}
		// An empty port, as 0, is any free one (net.Listen).
		_, port, err := net.SplitHostPort(*p)
		if err != nil {
			return false
		}
		_, err = net.LookupPort("tcp", port)
		return err == nil
	}, want}
}

// nonEmpty refuses an empty path: an unset variable's "" would otherwise
// read as a missing file at no path.
func nonEmpty(p *string) check {
	return check{func() bool { return *p != "" }, "must name a file"}
}

// minReloadInterval is the shortest file watch: each check reads every
// configuration file's metadata, and a mistyped unit ("1ns") would make
// the process poll the files flat out.
const minReloadInterval = 10 * time.Millisecond

func offOrAtLeast(p *time.Duration, least time.Duration) check {
	return check{func() bool { return *p == 0 || *p >= least }, "must be 0 (off) or at least " + least.String()}
}

// configFlags are the file flags serve and check-config share.
type configFlags struct {
	defaults    string
	overrides   string
	descriptors string
	forwardAuth string
	// named marks the files whose path a flag or the environment gave:
	// such a file must exist, where one at its built-in path may be
	// absent (the defaults file excepted, which must always exist).
	named [fileRoles]bool
	// loose marks a rules file read from its built-in path beside limit
	// files the operator named: it is used when it fits them, and left
	// out, with a warning, when it does not (parseRules).
	loose [fileRoles]bool
}

// paths are the files' paths, by role.
func (c *configFlags) paths() [fileRoles]string {
	return [fileRoles]string{c.defaults, c.overrides, c.descriptors, c.forwardAuth}
}

// resolve records, after parsing, which files the operator named, and
// marks the built-in descriptors and forward-auth paths as loose when the
// limit files are not the built-in ones: the bundled
// config/descriptors.yaml and config/forward-auth.yaml name the bundled
// limits, and other limit files may well lack them. Such a file is still
// read, and used if it fits (a directory laid out like the repository's,
// with its own files in config/), but it cannot stop serving or a reload.
// A rules file named with --descriptors, --forward-auth or their
// variables must always load.
func (c *configFlags) resolve(set settings) {
	for role := range fileRoles {
		c.named[role] = set.given(role.flag())
	}
	limitFilesGiven := c.named[defaultsFile] || c.named[overridesFile]
	c.loose[descriptorsFile] = limitFilesGiven && !c.named[descriptorsFile]
	c.loose[forwardAuthFile] = limitFilesGiven && !c.named[forwardAuthFile]
}

func (c *configFlags) settings() []setting {
	return []setting{
		{name: "defaults", bind: stringVar(&c.defaults, "config/defaults.yaml"), check: nonEmpty(&c.defaults), usage: "defaults file"},
		{name: "overrides", bind: stringVar(&c.overrides, "config/overrides.yaml"), usage: "overrides file; a missing file at the default path means no overrides, a named one must exist"},
		{name: "descriptors", bind: stringVar(&c.descriptors, "config/descriptors.yaml"),
			usage: "descriptors file: the rules that map the descriptors of Envoy's rate-limit requests (--grpc-listen) to limits; a missing file at the default path means no rules, a named one must exist"},
		{name: "forward-auth", bind: stringVar(&c.forwardAuth, "config/forward-auth.yaml"),
			usage: "forward-auth rules file: what /v1/forward-auth/{rule} counts for reverse proxies (nginx auth_request, Traefik ForwardAuth, Caddy forward_auth); a missing file at the default path means no rules, a named one must exist"},
	}
}

// settings is serve's flag table. The order is the order in which bad
// environment values are reported.
func (f *serveFlags) settings() []setting {
	rows := append(f.configFlags.settings(), f.redisFlags.settings()...)
	return append(rows, []setting{
		{name: "listen", bind: stringVar(&f.listen, "127.0.0.1:8080"), check: address(&f.listen, false, true), usage: "address to serve HTTP on: host:port, or unix:PATH for a Unix socket (a proxy on the same host)"},
		{name: "grpc-listen", bind: stringVar(&f.grpcListen, ""), check: address(&f.grpcListen, true, false),
			usage: "serve Envoy's rate-limit service (gRPC, envoy.service.ratelimit.v3), with gRPC health and reflection, on this address; off when empty"},
		{name: "grpc-max-concurrent-streams", bind: intVar(&f.grpcBounds.MaxConcurrentStreams, envoyapi.DefaultMaxConcurrentStreams), check: positive(&f.grpcBounds.MaxConcurrentStreams),
			usage: "most gRPC calls one connection may have under way at once, and so most goroutines and memory it holds; calls beyond are refused (REFUSED_STREAM), and Envoy opens another connection"},
		{name: "grpc-max-header-bytes", bind: intVar(&f.grpcBounds.MaxHeaderBytes, envoyapi.DefaultMaxHeaderBytes), check: positive(&f.grpcBounds.MaxHeaderBytes),
			usage: "largest size of one gRPC call's headers (metadata), as HTTP/2 counts them; a call with larger ones is reset"},
		{name: "grpc-call-timeout", bind: durationVar(&f.grpcBounds.CallTimeout, envoyapi.DefaultCallTimeout), check: positive(&f.grpcBounds.CallTimeout),
			usage: "longest a gRPC call may last from its headers, its request's arrival included, before it ends with DEADLINE_EXCEEDED (for a health watch or reflection, the wait for its first request); keep it above --source-timeout"},
		{name: "grpc-keepalive-min-time", bind: durationVar(&f.grpcBounds.KeepaliveMinTime, envoyapi.DefaultKeepaliveMinTime), check: positive(&f.grpcBounds.KeepaliveMinTime),
			usage: "shortest time between a gRPC client's pings, with or without calls under way; a client pinging more often is disconnected (GOAWAY too_many_pings)"},
		{name: "grpc-max-connection-idle", bind: durationVar(&f.grpcBounds.MaxConnectionIdle, envoyapi.DefaultMaxConnectionIdle), check: positive(&f.grpcBounds.MaxConnectionIdle),
			usage: "close a gRPC connection (GOAWAY) that has had no call under way for this long"},
		{name: "grpc-max-connection-age", bind: durationVar(&f.grpcBounds.MaxConnectionAge, envoyapi.DefaultMaxConnectionAge), check: positive(&f.grpcBounds.MaxConnectionAge),
			usage: "close a gRPC connection (GOAWAY; the client reconnects) once it is this old, give or take a tenth"},
		{name: "grpc-max-connection-age-grace", bind: durationVar(&f.grpcBounds.MaxConnectionAgeGrace, envoyapi.DefaultMaxConnectionAgeGrace), check: positive(&f.grpcBounds.MaxConnectionAgeGrace),
			usage: "how long calls under way on a gRPC connection closed for its age may finish before it is cut"},
		{name: "grpc-limit-name-header", bind: boolVar(&f.grpcLimitName, false),
			usage: "have every OVER_LIMIT answer of Envoy's rate-limit service ask Envoy to add x-ratelimit-limit-name, the limit that denied the request, to the client's response; off by default, since it shows clients the limits' names"},
		{name: "source", bind: stringVar(&f.source, "memory"),
			usage: "bucket source: memory, redis://host:port[/db] (rediss:// for TLS), or redis-cluster://host:port[,host:port...] (rediss-cluster:// for TLS)"},
		{name: "max-buckets", bind: intVar(&f.maxBuckets, 1_000_000), check: positive(&f.maxBuckets), scope: memoryOnly,
			usage: "most buckets and window counters the memory source holds together; beyond it, a new one evicts one that no longer counts anything or, failing that, the one with least time left, and limiter_memory_evictions_not_full_total counts those that still counted (rate counters and penalty boxes are bounded by their limit's capacity instead)"},
		{name: "max-body-bytes", bind: int64Var(&f.maxBodyBytes, httpapi.DefaultMaxBodyBytes), check: positive(&f.maxBodyBytes),
			usage: "largest request body accepted"},
		{name: "max-batch", bind: intVar(&f.maxBatch, httpapi.DefaultMaxBatch), check: positive(&f.maxBatch),
			usage: "most transactions in one request"},
		{name: "source-timeout", bind: durationVar(&f.sourceTimeout, 100*time.Millisecond), check: positive(&f.sourceTimeout),
			usage: "longest wait for a Redis source before answering 503; the memory source never waits and gets no deadline"},
		{name: "shutdown-timeout", bind: durationVar(&f.shutdownTimeout, 15*time.Second), check: positive(&f.shutdownTimeout),
			usage: "how long in-flight requests may finish after SIGINT/SIGTERM"},
		{name: "fail-open", bind: boolVar(&f.failOpen, false),
			usage: "when the source fails, answer spends and checks allowed with \"degraded\": true instead of 503"},
		{name: "log-format", bind: stringVar(&f.logFormat, "text"), usage: "log format: text or json"},
		{name: "log-level", bind: stringVar(&f.logLevel, "info"), usage: "log level: debug, info, warn or error"},
		{name: "access-log", bind: boolVar(&f.accessLog, false), usage: "log one line per request: method, route, status, duration"},
		{name: "api-token-file", bind: stringVar(&f.apiTokenFile, ""),
			usage: "file of bearer tokens, one per line, required on every /v1/ call when set"},
		{name: "admin-token-file", bind: stringVar(&f.adminTokenFile, ""),
			usage: "file of admin bearer tokens, required on reset, reload, sync and penalty-box removal when set; needed to listen beyond loopback (see --insecure-no-admin-token)"},
		{name: "insecure-no-admin-token", bind: boolVar(&f.insecureNoAdminToken, false),
			usage: "serve --listen on an address beyond loopback without --admin-token-file, so that anyone who reaches it may reset any limit, reload and sync (only for a network that trusted callers alone reach)"},
		{name: "metrics-listen", bind: stringVar(&f.metricsListen, ""), check: address(&f.metricsListen, true, true), usage: "serve /metrics on this address instead of --listen"},
		{name: "reload-interval", bind: durationVar(&f.reloadInterval, time.Second), check: offOrAtLeast(&f.reloadInterval, minReloadInterval),
			usage: "how often the config files are checked for changes, at least 10ms; 0 turns watching off (SIGHUP and the admin endpoint still reload)"},
		{name: "pprof-listen", bind: stringVar(&f.pprofListen, ""), check: address(&f.pprofListen, true, true),
			usage: "serve Go's /debug/pprof/ profiles on this address (keep it private; off when empty)"},
		{name: "gc-heap-floor-mib", bind: intVar(&f.gcHeapFloorMiB, defaultGCHeapFloorMiB), check: notNegative(&f.gcHeapFloorMiB),
			usage: "let the Go heap grow to this many MiB before collecting garbage, for fewer collections while the live heap is small; at most a quarter of a container's memory limit; 0 leaves Go's default, and so does setting GOGC"},
		{name: "idempotency-ttl", bind: durationVar(&f.idempotencyTTL, ratelimits.DefaultIdempotencyTTL), check: positive(&f.idempotencyTTL),
			usage: "how long a spend or refund sent with an Idempotency-Key header is remembered, so that its retries are answered without applying it again"},
	}...)
}

// redisFlags are serve's Redis settings. The URL gives addresses,
// database, credentials and TLS on or off; these flags give the rest, and a
// non-empty user name or password here overrides the URL's.
type redisFlags struct {
	poolSize     int
	dialTimeout  time.Duration
	readTimeout  time.Duration
	writeTimeout time.Duration
	username     string
	password     string
	tlsCA        string
	tlsInsecure  bool
	expiryMargin time.Duration
	namespace    string
	groups       int
	binaryTATs   bool
	window       time.Duration
	topPush      time.Duration
}

func (r *redisFlags) settings() []setting {
	margin := redis.DefaultExpiryMargin
	if os.Getenv("LIMITER_FAKECLOCK") != "" {
		margin = fakeClockExpiryMargin
	}
	return []setting{
		{name: "redis-pool-size", bind: intVar(&r.poolSize, 0), scope: redisOnly,
			check: check{func() bool { return r.poolSize >= 0 }, wantNotNegative + " (0 means 10 per CPU)"},
			usage: "Redis connections kept per node; 0 means 10 per CPU"},
		{name: "redis-dial-timeout", bind: durationVar(&r.dialTimeout, redis.DefaultTimeout), check: positive(&r.dialTimeout), scope: redisOnly,
			usage: "longest wait to connect to Redis"},
		{name: "redis-read-timeout", bind: durationVar(&r.readTimeout, redis.DefaultTimeout), check: positive(&r.readTimeout), scope: redisOnly,
			usage: "longest wait for a Redis reply"},
		{name: "redis-write-timeout", bind: durationVar(&r.writeTimeout, redis.DefaultTimeout), check: positive(&r.writeTimeout), scope: redisOnly,
			usage: "longest wait to send a Redis command"},
		{name: "redis-username", bind: stringVar(&r.username, ""), scope: redisOnly,
			usage: "Redis ACL user name, overriding the URL's"},
		{name: "redis-password", bind: stringVar(&r.password, ""), scope: redisOnly,
			usage: "Redis password, overriding the URL's; prefer the environment, which other users cannot see in the process list"},
		{name: "redis-tls-ca", bind: stringVar(&r.tlsCA, ""), scope: redisOnly,
			usage: "PEM file of the CAs that sign Redis's certificate, for rediss:// and rediss-cluster:// (default: the system's)"},
		{name: "redis-tls-insecure", bind: boolVar(&r.tlsInsecure, false), scope: redisOnly,
			usage: "do not verify Redis's TLS certificate (testing only)"},
		{name: "redis-expiry-margin", bind: durationVar(&r.expiryMargin, margin), check: positive(&r.expiryMargin), scope: redisOnly,
			usage: "how long at least a Redis key outlives the moment its bucket is full again (at most 1.5 times that); more than the clock skew between hosts (default 1m, 24h under LIMITER_FAKECLOCK)"},
		{name: "redis-namespace", bind: stringVar(&r.namespace, ""), scope: redisOnly,
			usage: "text put between the key prefix and the bucket, so independent services can share one Redis; no braces"},
		{name: "redis-top-push-interval", bind: durationVar(&r.topPush, 10*time.Second), check: positive(&r.topPush), scope: redisOnly,
			usage: "how often this process pushes its top denied ids to Redis, where GET /v1/admin/top of any process merges every live process's; a push expires after three intervals, so a stopped process drops out"},
		{name: "redis-groups", bind: intVar(&r.groups, 0), scope: redisOnly,
			check: check{func() bool { return r.groups >= 0 && r.groups <= redis.MaxGroups }, fmt.Sprintf("want 0 (a key per bucket) to %d", redis.MaxGroups)},
			usage: fmt.Sprintf("key format: 0 keeps each bucket in a Redis key of its own (v1); 1 to %d keeps buckets as fields of that many Redis hashes (v2, a third of the memory or less at ten or more buckets per hash); every process sharing a Redis must use the same", redis.MaxGroups)},
		{name: "redis-binary-tats", bind: boolVar(&r.binaryTATs, false), scope: redisOnly,
			usage: "write GCRA buckets' TATs in 10 bytes of binary rather than 19 digits, for a tenth less Redis CPU per decision; this release reads both, earlier ones only digits, so set it once every process sharing the Redis runs this release or a later one"},
		{name: "redis-coalesce-window", bind: durationVar(&r.window, 0), scope: redisOnly,
			check: check{func() bool { return r.window >= 0 && r.window <= redis.MaxCoalesceWindow }, fmt.Sprintf("want 0 to %v", redis.MaxCoalesceWindow)},
			usage: fmt.Sprintf("how long a decision that would go to Redis alone waits for others to share its script call; 0 sends it at once (calls that arrive during a round trip share the next one anyway); up to %v, added to such a decision's latency, for less Redis CPU per decision under moderate load", redis.MaxCoalesceWindow)},
	}
}
