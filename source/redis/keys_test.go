package redis_test

import (
	"math"
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

// Key format v2 names a bucket's hash by its group, and keeps the bucket
// key as the field. The groups below are pinned: every process sharing a
// Redis must place a bucket in the same hash, in every version of the
// service, so a change of groupOf must fail here (and be a format v3).
// The numbers were checked against an independent computation of the
// documented function (FNV-1a 64, MurmurHash3's fmix64, remainder).
func TestGroupedKeyLayout(t *testing.T) {
	pinned := []struct {
		bucket string
		groups int
		key    string
	}{
		{"3:12345678", 65536, "lim:v2:{61142}"},
		{"101:alice", 65536, "lim:v2:{19059}"},
		{"102:2001:db8::1", 65536, "lim:v2:{906}"},
		{"101:alice", 1000, "lim:v2:{403}"},
		{"101:alice", 1, "lim:v2:{0}"},
		{"101:alice", redis.MaxGroups, "lim:v2:{9259635}"},
	}
	for _, p := range pinned {
		src, err := redis.New(redis.Options{Addrs: []string{"127.0.0.1:1"}, Groups: p.groups})
		if err != nil {
			t.Fatal(err)
		}
		if k, f := src.Key(p.bucket), src.Field(p.bucket); k != p.key || f != p.bucket {
			t.Errorf("%d groups: bucket %q is field %q of %q, want field %q of %q", p.groups, p.bucket, f, k, p.bucket, p.key)
		}
		_ = src.Close()
	}
	// The namespace goes before the group, outside the hash tag.
	src, err := redis.New(redis.Options{Addrs: []string{"127.0.0.1:1"}, Groups: 65536, Namespace: "tenant-7:"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if k := src.Key("101:alice"); k != "lim:v2:tenant-7:{19059}" {
		t.Errorf("namespaced key %q", k)
	}
	if redis.GroupedKeyPrefix != "lim:v2:" {
		t.Fatalf("GroupedKeyPrefix %q: changing it changes the stored format", redis.GroupedKeyPrefix)
	}
}

// Buckets spread evenly over the groups, for any number of them: a hash
// holding far more than its share would leave Redis's compact encoding
// first (hash-max-listpack-entries).
func TestGroupsAreEven(t *testing.T) {
	const buckets = 1_000_000
	for _, groups := range []int{1000, 65536} {
		src, err := redis.New(redis.Options{Addrs: []string{"127.0.0.1:1"}, Groups: groups})
		if err != nil {
			t.Fatal(err)
		}
		size := map[string]int{}
		for i := range buckets {
			size[src.Key("3:"+strconv.Itoa(123000000+i))]++
		}
		_ = src.Close()
		mean := float64(buckets) / float64(groups)
		largest := 0
		for _, n := range size {
			largest = max(largest, n)
		}
		// Poisson with this mean: about groups*e^-mean groups unused, none
		// past mean + 7 sigma. The keys are fixed, so this passes or fails
		// every time.
		unused := groups - len(size)
		if float64(unused) > 3*float64(groups)*math.Exp(-mean)+2 || float64(largest) > mean+7*math.Sqrt(mean) {
			t.Errorf("%d groups: %d used, largest holds %d (mean %.1f)", groups, len(size), largest, mean)
		}
	}
}

// In key format v2 the script splits a bucket's name at its first '}',
// which is always the group's: a bucket key holding braces of its own is
// still one whole field of its hash, spent and stored as any other.
func TestGroupedBracesInID(t *testing.T) {
	opts := standalone(t)
	opts.Groups = 4
	src := newSource(t, opts)
	c := rawClient(t, opts)
	for _, bucket := range []string{"101:a}b", "101:{x}", "101:}{", "101:a}b}"} {
		if f := src.Field(bucket); f != bucket {
			t.Fatalf("bucket %q has field %q", bucket, f)
		}
		out := spend(t, src, now, hourly(bucket, 3))[0]
		if v, ok := stored(t, c, src, bucket); !ok || v != strconv.FormatInt(out.New.TAT, 10) {
			t.Fatalf("bucket %q holds %q (%v), want %d", bucket, v, ok, out.New.TAT)
		}
		if got := spend(t, src, now, hourly(bucket, 0))[0]; got.Remaining != 97 {
			t.Fatalf("bucket %q reads %d remaining, want 97", bucket, got.Remaining)
		}
	}
}
