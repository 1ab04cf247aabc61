package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
	"github.com/limiter-dev/limiter/source/redis"
)

// fakeClockExpiryMargin is the Redis expiry margin under LIMITER_FAKECLOCK:
// a fake clock does not follow Redis's, so keys must outlive any test.
const fakeClockExpiryMargin = 24 * time.Hour

// options turns a redis URL and the flags into the source's options. The
// flags' values are checked when serve parses them.
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
	o.BinaryTATs = r.binaryTATs
	o.CoalesceWindow = r.window
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
	return nil, errUnknownSource(f.source)
}

// errUnknownSource is the error of a --source that is no source kind;
// parseServeFlags refuses it before anything starts.
func errUnknownSource(source string) error {
	return fmt.Errorf("--source %q: want memory, redis://host:port[/db] or redis-cluster://host:port[,host:port...] (rediss:// and rediss-cluster:// for TLS)", redactSource(source))
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
