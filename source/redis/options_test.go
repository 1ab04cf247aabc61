package redis_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/source/redis"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		url     string
		addrs   []string
		cluster bool
		tls     bool
		db      int
		user    string
		pass    string
	}{
		{url: "redis://127.0.0.1:6380", addrs: []string{"127.0.0.1:6380"}},
		{url: "redis://localhost", addrs: []string{"localhost:6379"}},
		{url: "redis://10.0.0.1:6379/3", addrs: []string{"10.0.0.1:6379"}, db: 3},
		{url: "redis://10.0.0.1:6379/", addrs: []string{"10.0.0.1:6379"}},
		{url: "redis://:s3cret@h:1", addrs: []string{"h:1"}, pass: "s3cret"},
		{url: "redis://limiter:p%40ss%3Aw0rd@h:1/2", addrs: []string{"h:1"}, db: 2, user: "limiter", pass: "p@ss:w0rd"},
		{url: "redis://limiter@h:1", addrs: []string{"h:1"}, user: "limiter"},
		{url: "redis://[::1]:7000", addrs: []string{"[::1]:7000"}},
		{url: "redis://[::1]", addrs: []string{"[::1]:6379"}},
		{url: "rediss://cache.example:6380", addrs: []string{"cache.example:6380"}, tls: true},
		{url: "redis-cluster://a:7000,b:7001,c:7002", addrs: []string{"a:7000", "b:7001", "c:7002"}, cluster: true},
		{url: "redis-cluster://a:7000", addrs: []string{"a:7000"}, cluster: true},
		{url: "redis-cluster://u:p@a:7000,[::1]:7001", addrs: []string{"a:7000", "[::1]:7001"}, cluster: true, user: "u", pass: "p"},
		{url: "rediss-cluster://a:7000,b", addrs: []string{"a:7000", "b:6379"}, cluster: true, tls: true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			o, err := redis.ParseURL(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(o.Addrs, tt.addrs) || o.Cluster != tt.cluster || (o.TLS != nil) != tt.tls ||
				o.DB != tt.db || o.Username != tt.user || o.Password != tt.pass {
				t.Fatalf("got addrs %v cluster %v tls %v db %d user %q pass %q", o.Addrs, o.Cluster, o.TLS != nil, o.DB, o.Username, o.Password)
			}
		})
	}
}

func TestParseURLRefuses(t *testing.T) {
	for _, raw := range []string{
		"127.0.0.1:6379",
		"memcache://h:1",
		"redis://",
		"redis://h:1,h:2", // two addresses for one Redis
		"redis://h:notaport",
		"redis://h:0",
		"redis://h:70000",
		"redis://h:1/x",
		"redis://h:1/-1",
		"redis://h:1/0/1",
		"redis://h:1?pool_size=3",  // options are flags, not query
		"redis-cluster://a:1,,b:2", // empty address
		"redis-cluster://a:1/2",    // a cluster has only db 0
		"redis://u:p%zz@h:1",
	} {
		if _, err := redis.ParseURL(raw); !errors.Is(err, redis.ErrBadURL) {
			t.Errorf("ParseURL(%q) = %v, want ErrBadURL", raw, err)
		}
	}
}

// A password never appears in an error message.
func TestParseURLRedactsPassword(t *testing.T) {
	_, err := redis.ParseURL("redis://u:hunter2@h:1?x=1")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v: want an error without the password", err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	for name, o := range map[string]redis.Options{
		"no address":         {},
		"brace in namespace": {Addrs: []string{"h:1"}, Namespace: "a{b"},
		"negative timeout":   {Addrs: []string{"h:1"}, ReadTimeout: -1},
		"negative margin":    {Addrs: []string{"h:1"}, ExpiryMargin: -1},
		"db on a cluster":    {Addrs: []string{"h:1"}, Cluster: true, DB: 1},
		"negative window":    {Addrs: []string{"h:1"}, CoalesceWindow: -1},
		"window too long":    {Addrs: []string{"h:1"}, CoalesceWindow: redis.MaxCoalesceWindow + 1},
	} {
		if src, err := redis.New(o); err == nil {
			src.Close()
			t.Errorf("%s: New accepted %+v", name, o)
		}
	}
	// The bounds themselves are taken.
	for _, w := range []time.Duration{0, time.Microsecond, redis.MaxCoalesceWindow} {
		src, err := redis.New(redis.Options{Addrs: []string{"h:1"}, CoalesceWindow: w})
		if err != nil {
			t.Fatalf("coalesce window %v: %v", w, err)
		}
		src.Close()
	}
}
