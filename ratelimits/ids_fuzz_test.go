package ratelimits

import "testing"

// FuzzCanonicalize: a canonical id is a fixed point. Canonicalising what
// Canonicalize returned gives it back unchanged, with the same override
// id; otherwise one subscriber could end up with two buckets.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		"192.0.2.1", "::ffff:192.0.2.1", "2001:DB8::1", "2001:db8:abcd::/48", "12345", "007",
		"Example.COM", "42:Example.com", "192.0.2.1/32", "2001:db8::/64", "a.example,b.example,A.example",
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789ABCDEF", "alice", "al\u0000ice",
	} {
		f.Add(s)
	}
	kinds := []IDKind{KindIP, KindIPv6Range, KindAccount, KindDomain, KindString, KindAccountDomain, KindDomainOrIPPrefix, KindFQDNSet}
	f.Fuzz(func(t *testing.T, id string) {
		for _, k := range kinds {
			bucketID, overrideID, err := k.Canonicalize(id)
			if err != nil {
				continue
			}
			again, againOverride, err := k.Canonicalize(bucketID)
			if err != nil || again != bucketID || againOverride != overrideID {
				t.Fatalf("%s: %q -> %q (override %q), but that -> %q (override %q), %v", k, id, bucketID, overrideID, again, againOverride, err)
			}
		}
	})
}
