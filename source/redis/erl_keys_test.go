package redis_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/source/redis"
)

// offline opens a source that is never called, to read its key names.
func offline(t *testing.T, groups int) *redis.Source {
	t.Helper()
	src, err := redis.New(redis.Options{Addrs: []string{"127.0.0.1:1"}, Groups: groups})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	return src
}

// The counters, buckets and box entries of one id share a hash slot,
// whatever their limit, so an ERL call and a batch of one id are one
// script call on a cluster; ids the braces would otherwise break (empty,
// starting with '}') still get a tag of their own. Every name is distinct.
// The names are pinned: they are the stored format.
func TestEntryKeysShareTheirIDsSlot(t *testing.T) {
	v1, v2 := offline(t, 0), offline(t, 65536)
	pinned := map[string][2]string{
		"130:alice": {"lim:v1:{alice}130", "lim:v1:{alice}130!"},
		"130:}x":    {"lim:v1:{~}x}130", "lim:v1:{~}x}130!"},
		"130:":      {"lim:v1:{~}130", "lim:v1:{~}130!"},
		"130:~y":    {"lim:v1:{~~y}130", "lim:v1:{~~y}130!"},
		"130:a}b":   {"lim:v1:{a}b}130", "lim:v1:{a}b}130!"},
		"130:{q}":   {"lim:v1:{{q}}130", "lim:v1:{{q}}130!"},
	}
	for key, want := range pinned {
		k, _ := v1.EntryKey(key)
		b, _ := v1.BoxKey(key)
		if k != want[0] || b != want[1] {
			t.Errorf("%q: entry %q, box %q; want %q, %q", key, k, b, want[0], want[1])
		}
	}
	// The group is the id's (alice's), where 101:alice's bucket without a
	// box is in the group of the whole key, 19059.
	if k, f := v2.EntryKey("101:alice"); k != "lim:v2:{2292}" || f != "101:alice" {
		t.Errorf("v2 entry of 101:alice: field %q of %q", f, k)
	}
	if k, f := v2.BoxKey("101:alice"); k != "lim:v2:{2292}" || f != "!101:alice" {
		t.Errorf("v2 box entry of 101:alice: field %q of %q", f, k)
	}
	// A bucket of a limit without a box keeps its name.
	if k := v1.Key("130:alice"); k != "lim:v1:{130:alice}" {
		t.Errorf("bucket without a box: %q", k)
	}
	ids := []string{"alice", "bob", "}x", "~}x", "", "~", "~~", "a}b", "{q}", "2001:db8::7", "12345:example.com"}
	for _, src := range []*redis.Source{v1, v2} {
		seen := map[string]string{}
		for _, id := range ids {
			slot := -1
			for _, enum := range []string{"130", "131", "7"} {
				key := enum + ":" + id
				ek, ef := src.EntryKey(key)
				bk, bf := src.BoxKey(key)
				for _, name := range []string{ek + "|" + ef, bk + "|" + bf} {
					if other, dup := seen[name]; dup {
						t.Errorf("%q and %q share the name %q", key, other, name)
					}
					seen[name] = key
				}
				for _, k := range []string{ek, bk} {
					if slot == -1 {
						slot = redis.Slot(k)
					}
					if redis.Slot(k) != slot {
						t.Errorf("id %q: %q is in slot %d, not %d", id, k, redis.Slot(k), slot)
					}
				}
			}
		}
	}
}

// In key format v2 a sweep drops rate counters that count nothing and box
// entries whose time is up, and keeps those that still count.
func TestSweepDropsRateCountersAndBoxes(t *testing.T) {
	src, c, hash := oneHash(t)
	ctx := context.Background()
	until := now + secs(120)
	for i := range 10 {
		k := fmt.Sprintf("130:old%d", i)
		spend(t, src, now, rateOp(k, 1, 1, 2, until)) // boxed until now + 2 min
	}
	later := now + secs(90)
	spend(t, src, later, rateOp("130:kept", 10, 100, 1, later+secs(600)))
	call(t, src, later, bucket.Call{Box: "135:kept", Action: bucket.BoxReplace, Until: later + secs(600)})
	// Three minutes on, the old counters (a minute) and boxes (two) are
	// done; the kept counter's hit is 90 s old, its box still on.
	at := now + secs(180) - 1
	for i := range 40 {
		spend(t, src, at, daily(fmt.Sprintf("new:%d", i), 1))
	}
	fields, err := c.HKeys(ctx, hash).Result()
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, f := range fields {
		left[f] = true
	}
	for i := range 10 {
		k := fmt.Sprintf("130:old%d", i)
		if left[k] || left["!"+k] {
			t.Errorf("%s kept by the sweep: %v", k, fields)
		}
	}
	if !left["!135:kept"] {
		t.Errorf("a box entry still on was swept: %v", fields)
	}
	if left["130:kept"] {
		t.Errorf("a counter 90 s past its hit was kept: %v", fields)
	}
}
