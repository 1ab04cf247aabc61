package main

import (
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
	"github.com/limiter-dev/limiter/source/redis"
)

// fakeClockExpiryMargin is the Redis expiry margin under LIMITER_FAKECLOCK:
// a fake clock does not follow Redis's, so keys must outlive any test.
const fakeClockExpiryMargin = 24 * time.Hour

// redisFlags are serve's Redis settings, each also read from the
// environment. The URL gives addresses, database, credentials and TLS on
// or off; these flags give the rest, and a non-empty user name or password
// here overrides the URL's.
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
}

func (r *redisFlags) register(fs *flag.FlagSet, bad *[]string) {
	margin := redis.DefaultExpiryMargin
	if os.Getenv("LIMITER_FAKECLOCK") != "" {
		margin = fakeClockExpiryMargin
	}
	fs.IntVar(&r.poolSize, "redis-pool-size", envParsed("LIMITER_REDIS_POOL_SIZE", 0, parseInt, bad), "Redis connections kept per node; 0 means 10 per CPU (env LIMITER_REDIS_POOL_SIZE)")
	fs.DurationVar(&r.dialTimeout, "redis-dial-timeout", envParsed("LIMITER_REDIS_DIAL_TIMEOUT", redis.DefaultTimeout, time.ParseDuration, bad), "longest wait to connect to Redis (env LIMITER_REDIS_DIAL_TIMEOUT)")
	fs.DurationVar(&r.readTimeout, "redis-read-timeout", envParsed("LIMITER_REDIS_READ_TIMEOUT", redis.DefaultTimeout, time.ParseDuration, bad), "longest wait for a Redis reply (env LIMITER_REDIS_READ_TIMEOUT)")
	fs.DurationVar(&r.writeTimeout, "redis-write-timeout", envParsed("LIMITER_REDIS_WRITE_TIMEOUT", redis.DefaultTimeout, time.ParseDuration, bad), "longest wait to send a Redis command (env LIMITER_REDIS_WRITE_TIMEOUT)")
	fs.StringVar(&r.username, "redis-username", envString("LIMITER_REDIS_USERNAME", ""), "Redis ACL user name, overriding the URL's (env LIMITER_REDIS_USERNAME)")
	fs.StringVar(&r.password, "redis-password", envString("LIMITER_REDIS_PASSWORD", ""), "Redis password, overriding the URL's; prefer the environment, which other users cannot see in the process list (env LIMITER_REDIS_PASSWORD)")
	fs.StringVar(&r.tlsCA, "redis-tls-ca", envString("LIMITER_REDIS_TLS_CA", ""), "PEM file of the CAs that sign Redis's certificate, for rediss:// and rediss-cluster:// (default: the system's) (env LIMITER_REDIS_TLS_CA)")
	fs.BoolVar(&r.tlsInsecure, "redis-tls-insecure", envParsed("LIMITER_REDIS_TLS_INSECURE", false, strconv.ParseBool, bad), "do not verify Redis's TLS certificate (testing only) (env LIMITER_REDIS_TLS_INSECURE)")
	fs.DurationVar(&r.expiryMargin, "redis-expiry-margin", envParsed("LIMITER_REDIS_EXPIRY_MARGIN", margin, time.ParseDuration, bad), "how long a Redis key outlives the moment its bucket is full again; more than the clock skew between hosts (default 1m, 24h under LIMITER_FAKECLOCK) (env LIMITER_REDIS_EXPIRY_MARGIN)")
	fs.StringVar(&r.namespace, "redis-namespace", envString("LIMITER_REDIS_NAMESPACE", ""), "text put between the key prefix and the bucket, so independent services can share one Redis; no braces (env LIMITER_REDIS_NAMESPACE)")
	fs.IntVar(&r.groups, "redis-groups", envParsed("LIMITER_REDIS_GROUPS", 0, parseInt, bad), fmt.Sprintf("key format: 0 keeps each bucket in a Redis key of its own (v1); 1 to %d keeps buckets as fields of that many Redis hashes (v2, a third of the memory or less at ten or more buckets per hash); every process sharing a Redis must use the same (env LIMITER_REDIS_GROUPS)", redis.MaxGroups))
}

// rules are the checks of the Redis flags' values, made when the source is
// a Redis one.
func (r *redisFlags) rules() []rule {
	return []rule{
		{"redis-pool-size", r.poolSize < 0, wantNotNegative + " (0 means 10 per CPU)"},
		{"redis-dial-timeout", r.dialTimeout <= 0, wantPositive},
		{"redis-read-timeout", r.readTimeout <= 0, wantPositive},
		{"redis-write-timeout", r.writeTimeout <= 0, wantPositive},
		{"redis-expiry-margin", r.expiryMargin <= 0, wantPositive},
		{"redis-groups", r.groups < 0 || r.groups > redis.MaxGroups, fmt.Sprintf("want 0 (a key per bucket) to %d", redis.MaxGroups)},
	}
}

// options turns a redis URL and the flags into the source's options. The
// flags' values are checked by rules, when serve parses them.
func (r *redisFlags) options(url string) (redis.Options, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return o, err
	}
	o.PoolSize = r.poolSize
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = r.dialTimeout, r.readTimeout, r.writeTimeout
	o.ExpiryMargin = r.expiryMargin
	o.Namespace = r.namespace
	o.Groups = r.groups
	if r.username != "" {
		o.Username = r.username
	}
	if r.password != "" {
		o.Password = r.password
	}
	if r.tlsCA != "" || r.tlsInsecure {
		if o.TLS == nil {
			return o, errors.New("--redis-tls-ca and --redis-tls-insecure need a rediss:// or rediss-cluster:// source")
		}
		o.TLS.InsecureSkipVerify = r.tlsInsecure
		if r.tlsCA != "" {
			pem, err := os.ReadFile(r.tlsCA)
			if err != nil {
				return o, fmt.Errorf("--redis-tls-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return o, fmt.Errorf("--redis-tls-ca %s: no PEM certificate in it", r.tlsCA)
			}
			o.TLS.RootCAs = pool
		}
	}
	return o, nil
}

// openSource builds the bucket source --source names. A memory source
// logs a warning on log the first time it evicts a bucket that was not
// full: from then on the bound costs subscribers tokens they spent.
func openSource(f *serveFlags, log *slog.Logger) (ratelimits.Source, error) {
	switch kind := sourceKind(f.source); kind {
	case "memory":
		return memory.New(f.maxBuckets, memory.OnFirstNotFullEviction(func() {
			log.Warn("memory source evicting buckets that are not full: --max-buckets is too small for the active buckets; see limiter_memory_evictions_not_full_total",
				"max_buckets", f.maxBuckets)
		})), nil
	case "redis", "rediss", "redis-cluster", "rediss-cluster":
		opts, err := f.redisFlags.options(f.source)
		if err != nil {
			return nil, err
		}
		return redis.New(opts)
	}
	return nil, fmt.Errorf("--source %q: want memory, redis://host:port[/db] or redis-cluster://host:port[,host:port...]", redactSource(f.source))
}

// redactSource hides credentials of a source URL in messages.
func redactSource(source string) string {
	if at := strings.LastIndexByte(source, '@'); at >= 0 {
		return sourceKind(source) + "://REDACTED@" + source[at+1:]
	}
	return source
}

// sourceKind is the scheme of a source URL ("memory" for memory), safe to
// log: it carries no address or credentials.
func sourceKind(source string) string {
	if source == "memory" {
		return source
	}
	if scheme, _, ok := strings.Cut(source, "://"); ok {
		return scheme
	}
	return "unknown"
}
