package main

import (
	"errors"
	"flag"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/envoyapi"
)

// Every flag reads the environment variable envName derives from it, so
// that messages naming the variable name the right one. The help text lists
// each flag ("  -name type") followed by its usage, which names the
// variable.
func TestEnvNameMatchesEveryFlag(t *testing.T) {
	var help strings.Builder
	if _, err := parseServeFlags([]string{"--help"}, &help, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	entries := regexp.MustCompile(`(?m)^  --(\S+)`).FindAllStringSubmatchIndex(help.String(), -1)
	if len(entries) < 20 {
		t.Fatalf("%d flags in the help:\n%s", len(entries), help.String())
	}
	for i, e := range entries {
		end := len(help.String())
		if i+1 < len(entries) {
			end = entries[i+1][0]
		}
		name, usage := help.String()[e[2]:e[3]], help.String()[e[1]:end]
		if want := "(env " + envName(name) + ")"; !strings.Contains(strings.Join(strings.Fields(usage), " "), want) {
			t.Errorf("-%s: usage %q does not name %s", name, usage, want)
		}
	}
}

// A bad value is named alone, with the value given, as a flag or as the
// environment variable it came from; the flags that are fine are not
// mentioned.
func TestServeFlagsNameTheBadValue(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string // every one must appear
	}{
		{"max-buckets", []string{"--max-buckets=0"}, nil, []string{"--max-buckets=0: must be positive"}},
		{"max-body-bytes", []string{"--max-body-bytes=-1"}, nil, []string{"--max-body-bytes=-1: must be positive"}},
		{"max-batch", []string{"--max-batch=0"}, nil, []string{"--max-batch=0: must be positive"}},
		{"source-timeout", []string{"--source-timeout=0s"}, nil, []string{"--source-timeout=0s: must be positive"}},
		{"shutdown-timeout", []string{"--shutdown-timeout=-1s"}, nil, []string{"--shutdown-timeout=-1s: must be positive"}},
		{"reload-interval", []string{"--reload-interval=-1s"}, nil, []string{"--reload-interval=-1s: must be 0 (off) or at least 10ms"}},
		{"reload-interval too short", []string{"--reload-interval=1ns"}, nil, []string{"--reload-interval=1ns: must be 0 (off) or at least 10ms"}},
		{"an empty defaults path", []string{"--defaults="}, nil, []string{"--defaults=: must name a file"}},
		{"gc-heap-floor-mib", []string{"--gc-heap-floor-mib=-1"}, nil, []string{"--gc-heap-floor-mib=-1: must not be negative"}},
		{"grpc-max-concurrent-streams", []string{"--grpc-max-concurrent-streams=0"}, nil, []string{"--grpc-max-concurrent-streams=0: must be positive"}},
		{"grpc-call-timeout from the environment", nil, map[string]string{"LIMITER_GRPC_CALL_TIMEOUT": "0s"},
			[]string{"LIMITER_GRPC_CALL_TIMEOUT=0s (--grpc-call-timeout): must be positive"}},
		{"grpc-max-header-bytes", []string{"--grpc-max-header-bytes=0"}, nil, []string{"--grpc-max-header-bytes=0: must be positive"}},
		{"grpc-max-connection-age-grace", []string{"--grpc-max-connection-age-grace=-1s"}, nil, []string{"--grpc-max-connection-age-grace=-1s: must be positive"}},
		{"two at once", []string{"--max-batch=0", "--shutdown-timeout=0s"}, nil,
			[]string{"--max-batch=0: must be positive", "--shutdown-timeout=0s: must be positive"}},
		{"from the environment", nil, map[string]string{"LIMITER_MAX_BATCH": "0"},
			[]string{"LIMITER_MAX_BATCH=0 (--max-batch): must be positive"}},
		{"the flag beats a good environment value", []string{"--max-batch=0"}, map[string]string{"LIMITER_MAX_BATCH": "5"},
			[]string{"--max-batch=0: must be positive"}},
		{"redis pool size", []string{"--source=redis://h:1", "--redis-pool-size=-1"}, nil,
			[]string{"--redis-pool-size=-1: must not be negative"}},
		{"redis read timeout", []string{"--source=redis://h:1", "--redis-read-timeout=0s"}, nil,
			[]string{"--redis-read-timeout=0s: must be positive"}},
		{"redis dial timeout from the environment", []string{"--source=redis://h:1"}, map[string]string{"LIMITER_REDIS_DIAL_TIMEOUT": "0s"},
			[]string{"LIMITER_REDIS_DIAL_TIMEOUT=0s (--redis-dial-timeout): must be positive"}},
		{"redis write timeout", []string{"--source=rediss://h:1", "--redis-write-timeout=-5ms"}, nil,
			[]string{"--redis-write-timeout=-5ms: must be positive"}},
		{"redis expiry margin", []string{"--source=redis-cluster://h:1", "--redis-expiry-margin=0s"}, nil,
			[]string{"--redis-expiry-margin=0s: must be positive"}},
		{"redis groups below", []string{"--source=redis://h:1", "--redis-groups=-1"}, nil,
			[]string{"--redis-groups=-1: want 0 (a key per bucket) to 16777216"}},
		{"redis groups above", []string{"--source=redis://h:1", "--redis-groups=16777217"}, nil,
			[]string{"--redis-groups=16777217: want 0"}},
		{"redis coalesce window below", []string{"--source=redis://h:1", "--redis-coalesce-window=-1ms"}, nil,
			[]string{"--redis-coalesce-window=-1ms: want 0 to 10ms"}},
		{"listen without a port", []string{"--listen=localhost"}, nil, []string{"--listen=localhost: must be host:port or unix:PATH"}},
		{"listen empty", []string{"--listen="}, nil, []string{"--listen=: must be host:port or unix:PATH"}},
		{"metrics-listen past the last port", []string{"--metrics-listen=127.0.0.1:65536"}, nil,
			[]string{"--metrics-listen=127.0.0.1:65536: must be host:port or unix:PATH"}},
		{"grpc-listen a socket without a path", []string{"--grpc-listen=unix:"}, nil, []string{"--grpc-listen=unix:: must be host:port"}},
		{"grpc-listen a socket, which gRPC does not serve on", []string{"--grpc-listen=unix:/run/limiter/grpc.sock"}, nil,
			[]string{"--grpc-listen=unix:/run/limiter/grpc.sock: must be host:port"}},
		{"pprof-listen from the environment", nil, map[string]string{"LIMITER_PPROF_LISTEN": "abc"},
			[]string{"LIMITER_PPROF_LISTEN=abc (--pprof-listen): must be host:port or unix:PATH"}},
		{"redis coalesce window above", []string{"--source=redis://h:1"}, map[string]string{"LIMITER_REDIS_COALESCE_WINDOW": "1s"},
			[]string{"LIMITER_REDIS_COALESCE_WINDOW=1s (--redis-coalesce-window): want 0 to 10ms"}},
	}
	allChecked := []string{"max-buckets", "max-body-bytes", "max-batch", "source-timeout", "shutdown-timeout", "reload-interval",
		"gc-heap-floor-mib", "grpc-max-concurrent-streams", "grpc-max-header-bytes", "grpc-call-timeout", "grpc-keepalive-min-time", "grpc-max-connection-idle",
		"grpc-max-connection-age", "grpc-max-connection-age-grace", "redis-pool-size", "redis-dial-timeout", "redis-read-timeout", "redis-write-timeout", "redis-expiry-margin", "redis-groups", "redis-coalesce-window",
		"listen", "grpc-listen", "metrics-listen", "pprof-listen"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := parseServeFlags(tt.args, io.Discard, io.Discard)
			if !errors.Is(err, errBadSetting) {
				t.Fatalf("%v: error %v, want a bad setting", tt.args, err)
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			for _, name := range allChecked {
				mentioned := strings.Contains(msg, "--"+name+"=") || strings.Contains(msg, "(--"+name+")")
				wanted := false
				for _, w := range tt.want {
					wanted = wanted || strings.Contains(w, "--"+name+"=") || strings.Contains(w, "(--"+name+")")
				}
				if mentioned && !wanted {
					t.Errorf("error %q names --%s, which is fine", msg, name)
				}
			}
		})
	}
}

// A setting for another source: on the command line it stops the start,
// from the environment it is a warning; the password's value is never
// repeated.
func TestServeFlagsForAnotherSource(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		wantErr  string // empty: no error
		wantWarn string // empty: no warning
	}{
		{"redis flag with memory", []string{"--redis-pool-size=5"}, nil, "--redis-pool-size applies only to a Redis source", ""},
		{"redis password flag with memory", []string{"--redis-password=hunter2"}, nil, "--redis-password applies only to a Redis source", ""},
		{"redis env with memory", nil, map[string]string{"LIMITER_REDIS_PASSWORD": "hunter2"}, "",
			"LIMITER_REDIS_PASSWORD is set but ignored: it applies only to a Redis source"},
		{"max-buckets flag with redis", []string{"--source=redis://h:1", "--max-buckets=10"}, nil,
			"--max-buckets applies only to the memory source, and --source is redis", ""},
		{"max-buckets env with a cluster", []string{"--source=redis-cluster://h:1"}, map[string]string{"LIMITER_MAX_BUCKETS": "10"}, "",
			"LIMITER_MAX_BUCKETS is set but ignored: it applies only to the memory source, and --source is redis-cluster"},
		{"redis flag with redis", []string{"--source=redis://h:1", "--redis-pool-size=5"}, nil, "", ""},
		{"max-buckets with memory", []string{"--max-buckets=10"}, map[string]string{"LIMITER_MAX_BUCKETS": "20"}, "", ""},
		{"an empty variable is not a setting", nil, map[string]string{"LIMITER_REDIS_PASSWORD": ""}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			f, err := parseServeFlags(tt.args, io.Discard, io.Discard)
			if tt.wantErr != "" {
				if !errors.Is(err, errBadSetting) || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			warnings := strings.Join(f.warnings, "\n")
			if tt.wantWarn == "" && warnings != "" || !strings.Contains(warnings, tt.wantWarn) || strings.Contains(warnings, "hunter2") {
				t.Fatalf("warnings %q, want %q", warnings, tt.wantWarn)
			}
		})
	}
}

// The table's scopes: every Redis flag applies to Redis sources only,
// --max-buckets to the memory source only, and the rest to every source.
func TestSettingScopes(t *testing.T) {
	var f serveFlags
	rows := f.settings()
	if len(rows) < 30 {
		t.Fatalf("%d rows in serve's table", len(rows))
	}
	for _, row := range rows {
		want := everySource
		switch {
		case strings.HasPrefix(row.name, "redis-"):
			want = redisOnly
		case row.name == "max-buckets":
			want = memoryOnly
		}
		if row.scope != want {
			t.Errorf("--%s has scope %d, want %d", row.name, row.scope, want)
		}
	}
}

// The flags of Envoy's rate-limit service: the gRPC listener is off unless
// given, the descriptors file is the bundled one unless given; the
// environment gives either, and a flag beats the environment.
func TestServeFlagsForEnvoy(t *testing.T) {
	tests := []struct {
		name            string
		args            []string
		env             map[string]string
		wantGRPC        string
		wantDescriptors string
	}{
		{"defaults", nil, nil, "", "config/descriptors.yaml"},
		{"flags", []string{"--grpc-listen=127.0.0.1:8081", "--descriptors=/etc/limiter/descriptors.yaml"}, nil,
			"127.0.0.1:8081", "/etc/limiter/descriptors.yaml"},
		{"environment", nil, map[string]string{"LIMITER_GRPC_LISTEN": ":8081", "LIMITER_DESCRIPTORS": "rules.yaml"}, ":8081", "rules.yaml"},
		{"a flag beats the environment", []string{"--grpc-listen=:9000", "--descriptors="},
			map[string]string{"LIMITER_GRPC_LISTEN": ":8081", "LIMITER_DESCRIPTORS": "rules.yaml"}, ":9000", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			f, err := parseServeFlags(tt.args, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if f.grpcListen != tt.wantGRPC || f.descriptors != tt.wantDescriptors {
				t.Errorf("grpcListen %q, descriptors %q; want %q, %q", f.grpcListen, f.descriptors, tt.wantGRPC, tt.wantDescriptors)
			}
		})
	}
}

// The bounds on gRPC clients are envoyapi's defaults unless given; the
// environment gives them, and a flag beats the environment.
func TestServeFlagsBoundGRPCClients(t *testing.T) {
	defaults := envoyapi.Bounds{
		MaxConcurrentStreams:  envoyapi.DefaultMaxConcurrentStreams,
		MaxHeaderBytes:        envoyapi.DefaultMaxHeaderBytes,
		CallTimeout:           envoyapi.DefaultCallTimeout,
		KeepaliveMinTime:      envoyapi.DefaultKeepaliveMinTime,
		MaxConnectionIdle:     envoyapi.DefaultMaxConnectionIdle,
		MaxConnectionAge:      envoyapi.DefaultMaxConnectionAge,
		MaxConnectionAgeGrace: envoyapi.DefaultMaxConnectionAgeGrace,
	}
	given := envoyapi.Bounds{
		MaxConcurrentStreams:  50,
		MaxHeaderBytes:        4096,
		CallTimeout:           time.Second,
		KeepaliveMinTime:      10 * time.Second,
		MaxConnectionIdle:     time.Minute,
		MaxConnectionAge:      time.Hour,
		MaxConnectionAgeGrace: 20 * time.Second,
	}
	env := map[string]string{
		"LIMITER_GRPC_MAX_CONCURRENT_STREAMS":   "50",
		"LIMITER_GRPC_MAX_HEADER_BYTES":         "4096",
		"LIMITER_GRPC_CALL_TIMEOUT":             "1s",
		"LIMITER_GRPC_KEEPALIVE_MIN_TIME":       "10s",
		"LIMITER_GRPC_MAX_CONNECTION_IDLE":      "1m",
		"LIMITER_GRPC_MAX_CONNECTION_AGE":       "1h",
		"LIMITER_GRPC_MAX_CONNECTION_AGE_GRACE": "20s",
	}
	flags := []string{"--grpc-max-concurrent-streams=50", "--grpc-max-header-bytes=4096", "--grpc-call-timeout=1s", "--grpc-keepalive-min-time=10s",
		"--grpc-max-connection-idle=1m", "--grpc-max-connection-age=1h", "--grpc-max-connection-age-grace=20s"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want envoyapi.Bounds
	}{
		{"defaults", nil, nil, defaults},
		{"flags", flags, nil, given},
		{"environment", nil, env, given},
		{"a flag beats the environment", []string{"--grpc-max-concurrent-streams=50"}, map[string]string{"LIMITER_GRPC_MAX_CONCURRENT_STREAMS": "7000"},
			func() envoyapi.Bounds { b := defaults; b.MaxConcurrentStreams = 50; return b }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			f, err := parseServeFlags(tt.args, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if f.grpcBounds != tt.want {
				t.Errorf("bounds %+v, want %+v", f.grpcBounds, tt.want)
			}
		})
	}
}

// A value that does not parse and another that parses but is out of
// range are both named in one start's message.
func TestServeFlagsNameEveryBadValueAtOnce(t *testing.T) {
	t.Setenv("LIMITER_MAX_BATCH", "abc")
	t.Setenv("LIMITER_MAX_BODY_BYTES", "-1")
	_, err := parseServeFlags(nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `LIMITER_MAX_BATCH="abc"`) || !strings.Contains(err.Error(), "LIMITER_MAX_BODY_BYTES=-1 (--max-body-bytes): must be positive") {
		t.Errorf("parseServeFlags = %v; want both bad values named", err)
	}
}

// Listen addresses net.Listen takes are settings serve takes: an empty
// port or a service name for a port, IPv6 in brackets, every interface.
func TestServeFlagsTakeListenAddresses(t *testing.T) {
	for _, args := range [][]string{
		{"--listen=127.0.0.1:", "--metrics-listen=[::1]:0", "--grpc-listen=localhost:http", "--pprof-listen=unix:/tmp/pprof.sock"},
		{"--listen=unix:/tmp/limiter.sock", "--metrics-listen=:9090", "--grpc-listen=127.0.0.1:0"},
	} {
		if _, err := parseServeFlags(args, io.Discard, io.Discard); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}
