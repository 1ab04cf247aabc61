package boundedtable

import (
	"math/rand/v2"
	"testing"
)

// Every key of 0 to 41 bytes, inline or in the arena, reads back as it
// was added, also after removals moved keys to other positions.
func TestKeyAt(t *testing.T) {
	keys, hashes := testKeys(200)
	for i := range keys {
		keys[i] += string([]byte{byte(i), 0xff, 0}[:i%4]) // bytes of every value
	}
	var k Keys
	for i := range keys {
		k.Add(keys[i], hashes[i])
	}
	check := func() {
		t.Helper()
		for p := range k.Len() {
			key := k.KeyAt(p)
			if got := k.Find(key, hashOf(keys, hashes, key)); got != p {
				t.Fatalf("KeyAt(%d) = %q, which Find places at %d", p, key, got)
			}
		}
	}
	check()
	for p := 0; p < k.Len(); p += 3 {
		k.RemoveAt(p)
	}
	check()
}

func hashOf(keys []string, hashes []uint64, key string) uint64 {
	for i := range keys {
		if keys[i] == key {
			return hashes[i]
		}
	}
	return 0
}

// A listing by pages visits every entry held from its first page to its
// last at least once, whatever is removed and added between pages, and
// never an expired one.
func TestPageSurvivesRemovals(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 50 {
		keys, hashes := testKeys(300)
		var e Expiry[struct{}]
		now := int64(1000)
		for i := range keys {
			exp := now + 1 + int64(rng.IntN(100))
			if i%10 == 0 {
				exp = now // expired: never listed
			}
			e.Add(keys[i], hashes[i], exp, struct{}{})
		}
		// The entries that stay: never removed during the listing.
		stays := map[string]bool{}
		for i := range keys {
			stays[keys[i]] = i%10 != 0 && rng.IntN(2) == 0
		}
		seen := map[string]bool{}
		before := e.Len() + 5
		for pages := 0; ; pages++ {
			if pages > 1000 {
				t.Fatal("the listing does not end")
			}
			before = e.Page(before, now, 7, 20, func(p int) {
				if e.Expires(p) <= now {
					t.Fatalf("round %d: expired entry %q listed", round, e.KeyAt(p))
				}
				seen[e.KeyAt(p)] = true
			})
			if before == 0 {
				break
			}
			// Between pages: remove a few entries that do not stay, add some.
			for range rng.IntN(6) {
				p := rng.IntN(e.Len())
				if !stays[e.KeyAt(p)] {
					e.Remove(p)
				}
			}
			for range rng.IntN(3) {
				key := "new" + string(rune('a'+rng.IntN(26))) + string(rune('a'+rng.IntN(26)))
				if e.Find(key, 7) == None {
					e.Add(key, 7, now+5, struct{}{})
				}
			}
		}
		for key, ok := range stays {
			if ok && !seen[key] {
				t.Fatalf("round %d: %q was held throughout and never listed", round, key)
			}
		}
	}
}
