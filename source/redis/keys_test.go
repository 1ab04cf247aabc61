package redis_test

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/source/redis"
)

// Slot agrees with the cluster's own CLUSTER KEYSLOT, hash tags and their
// odd cases included.
func TestSlotMatchesClusterKeyslot(t *testing.T) {
	addr := redistest.SharedCluster(t).Addrs()[0]
	keys := []string{
		"", "a", "123456789", "lim:v1:{3:12345678}", "lim:v1:ns:{3:12345678}",
		"{}", "{}x", "a{}b{c}", "{a}", "x{a}y", "{a}{b}", "{{a}}", "a{b", "a}b{", "}{a}",
		"lim:v1:{101:a}b}", "lim:v1:{101:{x}", "lim:v1:{102:2001:db8::1}",
		"\x00\xff binary \r\n", "ünïcödé",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = "ab{}:0123456789"[rng.IntN(15)]
		}
		keys = append(keys, string(b))
	}
	for _, k := range keys {
		got, err := redistest.Do(addr, "CLUSTER", "KEYSLOT", k)
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
		}
		want, err := strconv.Atoi(got)
		if err != nil {
			t.Fatal(err)
		}
		if s := redis.Slot(k); s != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", k, s, want)
		}
	}
}

// The key layout is versioned and wraps the bucket key in a hash tag, so
// the slot of a bucket depends on the bucket key alone, never on the
// namespace.
func TestKeyLayout(t *testing.T) {
	for _, bucket := range []string{"3:12345678", "101:alice", "102:2001:db8::1"} {
		a := redis.Slot(redis.KeyPrefix + "{" + bucket + "}")
		b := redis.Slot(redis.KeyPrefix + "tenant-7:" + "{" + bucket + "}")
		if a != b || a != redis.Slot(bucket) {
			t.Errorf("bucket %q: slots %d (no namespace), %d (namespace), %d (bare): want equal", bucket, a, b, redis.Slot(bucket))
		}
	}
	if redis.KeyPrefix != "lim:v1:" {
		t.Fatalf("KeyPrefix %q: changing it changes the stored format; bump the version and docs/redis.md", redis.KeyPrefix)
	}
}
