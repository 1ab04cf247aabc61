package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

func parseRedisFlags(t *testing.T, args ...string) *redisFlags {
	t.Helper()
	var bad []string
	r := &redisFlags{}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	register(fs, r.settings(), &bad)
	if err := fs.Parse(args); err != nil || len(bad) > 0 {
		t.Fatalf("parse %v: %v %v", args, err, bad)
	}
	return r
}

func TestRedisFlagsOptions(t *testing.T) {
	t.Setenv("LIMITER_REDIS_PASSWORD", "from-env")
	r := parseRedisFlags(t, "--redis-pool-size=7", "--redis-read-timeout=250ms", "--redis-namespace=a:", "--redis-groups=4096")
	o, err := r.options("redis://u:from-url@h:1/2")
	if err != nil {
		t.Fatal(err)
	}
	if o.Password != "from-env" || o.Username != "u" || o.PoolSize != 7 || o.ReadTimeout != 250*time.Millisecond ||
		o.DialTimeout != 100*time.Millisecond || o.DB != 2 || o.Namespace != "a:" || o.ExpiryMargin != time.Minute || o.Groups != 4096 {
		t.Fatalf("options %+v", o)
	}
	if o, err := parseRedisFlags(t).options("redis://:from-url@h:1"); err != nil || o.Password != "from-env" {
		t.Fatalf("env password does not override the URL's: %+v %v", o, err)
	}
}

func TestRedisFlagsFakeClockMargin(t *testing.T) {
	t.Setenv("LIMITER_FAKECLOCK", "2026-11-22T00:00:00Z")
	if m := parseRedisFlags(t).expiryMargin; m != fakeClockExpiryMargin {
		t.Fatalf("margin under a fake clock %v, want %v", m, fakeClockExpiryMargin)
	}
	if m := parseRedisFlags(t, "--redis-expiry-margin=5s").expiryMargin; m != 5*time.Second {
		t.Fatalf("explicit margin %v, want 5s", m)
	}
}

func TestRedisFlagsTLS(t *testing.T) {
	if _, err := parseRedisFlags(t, "--redis-tls-insecure").options("redis://h:1"); err == nil {
		t.Fatal("TLS flags accepted without a rediss URL")
	}
	o, err := parseRedisFlags(t, "--redis-tls-insecure").options("rediss-cluster://a:1,b:2")
	if err != nil || o.TLS == nil || !o.TLS.InsecureSkipVerify || !o.Cluster {
		t.Fatalf("rediss-cluster with --redis-tls-insecure: %+v %v", o, err)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := parseRedisFlags(t, "--redis-tls-ca="+notPEM).options("rediss://h:1"); err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Fatalf("a CA file without a certificate: %v", err)
	}
}

// An unknown scheme's error never shows the password.
func TestOpenSourceRedactsPassword(t *testing.T) {
	_, err := openSource(&serveFlags{source: "redis+x://u:hunter2@h:1"}, slog.New(slog.DiscardHandler))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v", err)
	}
}

func TestRedisGroupsFromEnv(t *testing.T) {
	t.Setenv("LIMITER_REDIS_GROUPS", "8")
	if o, err := parseRedisFlags(t).options("redis://h:1"); err != nil || o.Groups != 8 {
		t.Fatalf("LIMITER_REDIS_GROUPS=8: %+v %v", o, err)
	}
}

// Binary TATs are off unless asked for: a release that reads both forms
// must run everywhere before any process writes them.
func TestRedisBinaryTATsFromEnv(t *testing.T) {
	if o, err := parseRedisFlags(t).options("redis://h:1"); err != nil || o.BinaryTATs {
		t.Fatalf("by default: BinaryTATs %v, %v; want false", o.BinaryTATs, err)
	}
	t.Setenv("LIMITER_REDIS_BINARY_TATS", "true")
	if o, err := parseRedisFlags(t).options("redis://h:1"); err != nil || !o.BinaryTATs {
		t.Fatalf("LIMITER_REDIS_BINARY_TATS=true: BinaryTATs %v, %v", o.BinaryTATs, err)
	}
}

// The coalescing window is off unless asked for, and then the source's.
func TestRedisCoalesceWindowFromEnv(t *testing.T) {
	if o, err := parseRedisFlags(t).options("redis://h:1"); err != nil || o.CoalesceWindow != 0 {
		t.Fatalf("by default: CoalesceWindow %v, %v; want 0", o.CoalesceWindow, err)
	}
	t.Setenv("LIMITER_REDIS_COALESCE_WINDOW", "500us")
	if o, err := parseRedisFlags(t).options("redis://h:1"); err != nil || o.CoalesceWindow != 500*time.Microsecond {
		t.Fatalf("LIMITER_REDIS_COALESCE_WINDOW=500us: CoalesceWindow %v, %v", o.CoalesceWindow, err)
	}
}

// The memory source logs one warning, at the first eviction of a bucket
// that was not full, and none while there is room.
func TestMemorySourceWarnsOnceAtTheFirstNotFullEviction(t *testing.T) {
	var logs bytes.Buffer
	src, err := openSource(&serveFlags{source: "memory", maxBuckets: 2}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ei := int64(time.Minute)
	out := make([]bucket.Outcome, 1)
	for i := range 5 {
		op := bucket.Op{Key: fmt.Sprint("1:", i), EmissionInterval: ei, BurstOffset: 5 * ei, Cost: 1}
		if err := src.Spend(context.Background(), 1_000, []bucket.Op{op}, out); err != nil {
			t.Fatal(err)
		}
		if want := max(0, i-1); strings.Count(logs.String(), "level=WARN") != min(want, 1) {
			t.Fatalf("after %d spends on new ids against a bound of 2:\n%s", i+1, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "max_buckets=2") {
		t.Fatalf("the warning does not give the bound:\n%s", logs.String())
	}
}

// A --source URL of a Redis scheme that does not parse is a value serve
// does not take, a usage error (exit 2) as an unknown scheme is: starting
// again would fail again.
func TestBadRedisURLIsAUsageError(t *testing.T) {
	for _, url := range []string{"redis://127.0.0.1:1/abc", "redis://127.0.0.1:1/0?x=1", "redis-cluster://"} {
		var stderr strings.Builder
		code := run([]string{"serve", "--listen", "127.0.0.1:0", "--defaults", "../../config/defaults.yaml",
			"--overrides", "../../config/overrides.yaml", "--source", url}, io.Discard, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "bad URL") {
			t.Errorf("--source %s: exit %d, %q; want 2 and the URL's problem", url, code, stderr.String())
		}
	}
}
