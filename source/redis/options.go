package redis

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// DefaultTimeout is the dial, read and write timeout used when none is
// given. It is short on purpose: a limiter that waits seconds for Redis is
// worse than none, and the service answers 503 (or fails open) instead.
const DefaultTimeout = 100 * time.Millisecond

// DefaultExpiryMargin is how long at least a key outlives the moment its
// bucket is full again (up to half as long again: expiries are rounded up
// to half-margin steps), when no margin is given. It must exceed the clock skew
// between the limiter processes and Redis: a key that expires early reads
// as a full bucket to a process whose clock is behind.
const DefaultExpiryMargin = time.Minute

// ErrBadURL means a source URL could not be parsed.
var ErrBadURL = errors.New("redis source: bad URL")

// Options says where Redis is and how to talk to it.
type Options struct {
	// Addrs is one host:port for a single Redis, or the seed nodes of a
	// cluster (any reachable master or replica; the rest are discovered).
	Addrs []string
	// Cluster selects the Redis Cluster protocol.
	Cluster bool
	// DB is the database of a single Redis (a cluster has only 0).
	DB int
	// Username and Password authenticate (Redis ACL, or requirepass with
	// an empty Username).
	Username, Password string
	// TLS, when set, makes every connection use TLS with this config.
	TLS *tls.Config
	// PoolSize is the most idle connections kept per node (0: go-redis's
	// default of ten per CPU).
	PoolSize int
	// DialTimeout, ReadTimeout and WriteTimeout bound each network step
	// (0: DefaultTimeout). Every call is also bounded by its context.
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// ExpiryMargin is how long at least a key lives past the moment its
	// bucket is full again, at most one and a half times that (0:
	// DefaultExpiryMargin). A service on a fake clock needs
	// a long one, since its clock does not follow Redis's.
	ExpiryMargin time.Duration
	// Namespace goes between KeyPrefix and the bucket, so that several
	// independent services (or tests) can share one Redis. It may not
	// contain braces, which would change the keys' hash slots.
	Namespace string
	// Groups selects the key format. 0 keeps every bucket in a key of its
	// own (format v1). A positive number, at most MaxGroups, makes buckets
	// fields of that many hashes (format v2), which takes a third of the
	// memory or less once the hashes hold ten buckets or more each. Every process
	// sharing a Redis must use the same format and number: a bucket's
	// place in Redis depends on both.
	Groups int
	// BinaryTATs makes the script write a GCRA bucket's TAT in 10 bytes of
	// binary instead of 19 decimal digits, which takes Redis a tenth less
	// CPU per decision. This release reads both forms, whatever the
	// setting; earlier ones read only text and fail the decisions of a
	// bucket stored in binary. Set it once every process sharing the
	// Redis runs a release that reads binary TATs (docs/redis.md,
	// "Binary TATs").
	BinaryTATs bool
	// CoalesceWindow is how long a call that would go to Redis alone, with
	// nothing in flight to its node, waits for others to share its round
	// trip and script run (0, the default: it goes at once). The calls
	// that arrive while a round trip is in flight share the next one
	// anyway; a window also gathers the calls of a moderately loaded
	// process, which otherwise mostly go one by one, each paying Redis's
	// fixed cost of a script call. Each call it delays waits at most the
	// window longer. At most MaxCoalesceWindow.
	CoalesceWindow time.Duration
}

// MaxCoalesceWindow bounds Options.CoalesceWindow: a decision that waits
// longer than a few Redis round trips for company costs more than it
// saves, and a larger value is more likely a slip of the unit.
const MaxCoalesceWindow = 10 * time.Millisecond

// ParseURL reads a source URL:
//
//	redis://[user:password@]host:port[/db]          one Redis
//	rediss://...                                    the same over TLS
//	redis-cluster://[user:password@]host:port[,host:port...]   a cluster
//	rediss-cluster://...                            the same over TLS
//
// A missing port means 6379. User and password are URL-encoded. Timeouts,
// pool size and TLS settings come from Options fields (the service's
// flags), not from the URL, which therefore takes no query.
func ParseURL(raw string) (Options, error) {
	var o Options
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return o, fmt.Errorf("%w: %q has no scheme", ErrBadURL, redactURL(raw))
	}
	switch scheme {
	case "redis":
	case "rediss":
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	case "redis-cluster":
		o.Cluster = true
	case "rediss-cluster":
		o.Cluster = true
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	default:
		return o, fmt.Errorf("%w: scheme %q: want redis, rediss, redis-cluster or rediss-cluster", ErrBadURL, scheme)
	}
	if strings.ContainsAny(rest, "?#") {
		return o, fmt.Errorf("%w: %s: no query or fragment is taken; use the --redis-* flags", ErrBadURL, redactURL(raw))
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		user, pass, hasPass := strings.Cut(rest[:at], ":")
		var err error
		if o.Username, err = url.PathUnescape(user); err != nil {
			return o, fmt.Errorf("%w: user name: %w", ErrBadURL, err)
		}
		if hasPass {
			if o.Password, err = url.PathUnescape(pass); err != nil {
				return o, fmt.Errorf("%w: password is not URL-encoded correctly", ErrBadURL)
			}
		}
		rest = rest[at+1:]
	}
	hosts, path, _ := strings.Cut(rest, "/")
	for h := range strings.SplitSeq(hosts, ",") {
		addr, err := hostPort(h)
		if err != nil {
			return o, err
		}
		o.Addrs = append(o.Addrs, addr)
	}
	if path != "" {
		db, err := strconv.Atoi(path)
		if err != nil || db < 0 {
			return o, fmt.Errorf("%w: database %q: want a number >= 0", ErrBadURL, path)
		}
		o.DB = db
	}
	if err := o.validate(); err != nil {
		return o, err
	}
	return o, nil
}

// hostPort checks one host[:port], adding the default port.
func hostPort(h string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("%w: empty address", ErrBadURL)
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port: the whole thing is the host (bracketed when IPv6).
		host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), "6379"
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return "", fmt.Errorf("%w: port %q in %q", ErrBadURL, port, h)
	}
	if host == "" || strings.ContainsAny(host, "[]/@ ") {
		return "", fmt.Errorf("%w: host in %q", ErrBadURL, h)
	}
	return net.JoinHostPort(host, port), nil
}

// redactURL drops credentials from a URL for error messages.
func redactURL(raw string) string {
	if at := strings.LastIndexByte(raw, '@'); at >= 0 {
		if scheme, _, ok := strings.Cut(raw[:at], "://"); ok {
			return scheme + "://REDACTED@" + raw[at+1:]
		}
		return "REDACTED@" + raw[at+1:]
	}
	return raw
}

// validate reports options no source can work with.
func (o *Options) validate() error {
	switch {
	case len(o.Addrs) == 0:
		return fmt.Errorf("%w: no address", ErrBadURL)
	case !o.Cluster && len(o.Addrs) > 1:
		return fmt.Errorf("%w: %d addresses for one Redis; use redis-cluster:// for a cluster", ErrBadURL, len(o.Addrs))
	case o.Cluster && o.DB != 0:
		return fmt.Errorf("%w: a Redis Cluster has only database 0", ErrBadURL)
	case o.DB < 0 || o.PoolSize < 0:
		return errors.New("redis source: database and pool size must not be negative")
	case o.DialTimeout < 0 || o.ReadTimeout < 0 || o.WriteTimeout < 0 || o.ExpiryMargin < 0:
		return errors.New("redis source: timeouts and the expiry margin must not be negative")
	case strings.ContainsAny(o.Namespace, "{}"):
		return fmt.Errorf("redis source: namespace %q may not contain braces", o.Namespace)
	case o.Groups < 0 || o.Groups > MaxGroups:
		return fmt.Errorf("redis source: %d groups: want 0 (a key per bucket) to %d", o.Groups, MaxGroups)
	case o.CoalesceWindow < 0 || o.CoalesceWindow > MaxCoalesceWindow:
		return fmt.Errorf("redis source: coalesce window %v: want 0 to %v", o.CoalesceWindow, MaxCoalesceWindow)
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func (o *Options) expiryMargin() time.Duration {
	return orDefault(o.ExpiryMargin, DefaultExpiryMargin)
}

// rollbackTimeout gives a multi-slot give-back one full exchange.
func (o *Options) rollbackTimeout() time.Duration {
	return orDefault(o.DialTimeout, DefaultTimeout) + orDefault(o.WriteTimeout, DefaultTimeout) + orDefault(o.ReadTimeout, DefaultTimeout)
}

// Shared connection settings. Retries are off: a retried call would
// outlive the caller's deadline, and the caller answers 503 at once
// instead. One dial attempt per call, for the same reason; the pool
// redials by itself when Redis returns. The client follows context
// deadlines, and skips handshake extras older servers reject.
const (
	noRetries   = -1
	dialRetries = 1
)

func (o *Options) clientOptions() *goredis.Options { return o.universal().Simple() }

// clusterStateReload is how old the cluster client lets its slot map get
// before it reads it again. Errors other than a redirect (a master gone
// dead, a failover) make the source ask for a reload at once (eval), so
// this only bounds how long a map stays stale while nothing fails; at one
// CLUSTER SLOTS per process every few seconds, it costs nothing.
const clusterStateReload = 5 * time.Second

func (o *Options) clusterOptions() *goredis.ClusterOptions {
	c := o.universal().Cluster()
	c.ClusterStateReloadInterval = clusterStateReload
	return c
}

// universal holds the settings both kinds of client share; go-redis turns
// them into a standalone client's options (Addrs[0], DB) or a cluster's.
func (o *Options) universal() *goredis.UniversalOptions {
	return &goredis.UniversalOptions{
		Addrs:                    o.Addrs,
		DB:                       o.DB,
		Username:                 o.Username,
		Password:                 o.Password,
		TLSConfig:                o.TLS,
		PoolSize:                 o.PoolSize,
		PoolTimeout:              o.readWrite(),
		DialTimeout:              orDefault(o.DialTimeout, DefaultTimeout),
		ReadTimeout:              orDefault(o.ReadTimeout, DefaultTimeout),
		WriteTimeout:             orDefault(o.WriteTimeout, DefaultTimeout),
		ContextTimeoutEnabled:    true,
		MaxRetries:               noRetries,
		DialerRetries:            dialRetries,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// readWrite is how long a call may wait for a free connection: no longer
// than one exchange would take.
func (o *Options) readWrite() time.Duration {
	return orDefault(o.ReadTimeout, DefaultTimeout) + orDefault(o.WriteTimeout, DefaultTimeout)
}
