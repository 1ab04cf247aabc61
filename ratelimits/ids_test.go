package ratelimits

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// The hex SHA-256 of "example.com,www.example.com", computed outside the
// package (sha256sum), so the test does not restate the implementation.
const exampleSetHash = "65825d50db221df1768452c68de1c2870728a93bbfc9ca90648b733b7bb6b046"

// TestIDsCanonicalize walks every id kind through inputs that are valid (with
// the canonical form they must take, so two spellings of one subscriber share
// one bucket) and inputs that must be refused with ErrInvalidID.
func TestIDsCanonicalize(t *testing.T) {
	type valid struct{ in, bucket, override string }
	cases := []struct {
		kind    IDKind
		valid   []valid
		invalid []string
	}{
		{
			kind: KindIP,
			valid: []valid{
				{"192.0.2.1", "192.0.2.1", "192.0.2.1"},
				{"10.0.0.2", "10.0.0.2", "10.0.0.2"},
				{"::ffff:10.0.0.2", "10.0.0.2", "10.0.0.2"}, // IPv4-mapped becomes IPv4
				{"2001:DB8::1", "2001:db8::1", "2001:db8::1"},
				{"2001:db8:0::1", "2001:db8::1", "2001:db8::1"},
				{"2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1", "2001:db8::1"},
				{"::1", "::1", "::1"},
			},
			invalid: []string{"", "192.0.2", "192.0.2.256", "010.0.0.1", "192.0.2.1/32", "fe80::1%eth0",
				"2001:db8::g", " 192.0.2.1", "example.com", "1.2.3.4.5"},
		},
		{
			kind: KindIPv6Range,
			valid: []valid{
				{"2001:db8:abcd::/48", "2001:db8:abcd::/48", "2001:db8:abcd::/48"},
				{"2001:DB8:ABCD:12::1/48", "2001:db8:abcd::/48", "2001:db8:abcd::/48"}, // masked
			},
			invalid: []string{"", "2001:db8:abcd::", "2001:db8::/64", "2001:db8::/32", "192.0.2.0/24",
				"::ffff:192.0.2.1/48", "2001:db8:abcd::/048", "garbage/48"},
		},
		{
			kind: KindAccount,
			valid: []valid{
				{"1", "1", "1"},
				{"12345", "12345", "12345"},
				{"9223372036854775807", "9223372036854775807", "9223372036854775807"},
			},
			invalid: []string{"", "0", "007", "-1", "+1", "1.0", "1e3", " 1", "12a",
				"9223372036854775808", "99999999999999999999999"},
		},
		{
			kind: KindDomain,
			valid: []valid{
				{"example.com", "example.com", "example.com"},
				{"WWW.Example.COM", "www.example.com", "www.example.com"},
				{"xn--bcher-kva.example", "xn--bcher-kva.example", "xn--bcher-kva.example"},
				{"a-b.c0.example", "a-b.c0.example", "a-b.c0.example"},
				{"localhost", "localhost", "localhost"},
				{strings.Repeat("a", 63) + ".com", strings.Repeat("a", 63) + ".com", strings.Repeat("a", 63) + ".com"},
			},
			invalid: []string{"", "example.com.", ".example.com", "a..example.com", "*.example.com",
				"_acme.example.com", "-a.example.com", "a-.example.com", strings.Repeat("a", 64) + ".com",
				strings.Repeat("abcdefghi.", 25) + "abcd", // 254 characters
				"exa mple.com", "bücher.example", "192.0.2.1", "example.com:443"},
		},
		{
			kind: KindString,
			valid: []valid{
				{"alice", "alice", "alice"},
				{"Alice Smith", "Alice Smith", "Alice Smith"}, // not lowered, spaces are printable
				{"ünïcødé ✓", "ünïcødé ✓", "ünïcødé ✓"},
				{strings.Repeat("x", 256), strings.Repeat("x", 256), strings.Repeat("x", 256)},
			},
			invalid: []string{"", strings.Repeat("x", 257), "tab\there", "new\nline", "nul\x00",
				"bad\xffutf8", "zero\u200bwidth", "bidi\u202eoverride"},
		},
		{
			kind: KindAccountDomain,
			valid: []valid{
				{"12345:example.com", "12345:example.com", "12345"},
				{"12345:WWW.Example.com", "12345:www.example.com", "12345"},
			},
			invalid: []string{"", "12345", "example.com", ":example.com", "12345:", "0:example.com",
				"012:example.com", "12345:*.example.com", "12345:example.com:1", "abc:example.com"},
		},
		{
			kind: KindDomainOrIPPrefix,
			valid: []valid{
				{"example.com", "example.com", "example.com"},
				{"Example.COM", "example.com", "example.com"},
				{"192.0.2.1/32", "192.0.2.1/32", "192.0.2.1/32"},
				{"2001:db8:1:2::/64", "2001:db8:1:2::/64", "2001:db8:1:2::/64"},
				{"2001:DB8:1:2:3:4:5:6/64", "2001:db8:1:2::/64", "2001:db8:1:2::/64"}, // masked
			},
			invalid: []string{"", "192.0.2.1", "2001:db8::1", "192.0.2.0/24", "2001:db8::/48",
				"::ffff:192.0.2.1/128", "*.example.com", "example.com/32"},
		},
		{
			kind: KindFQDNSet,
			valid: []valid{
				{exampleSetHash, exampleSetHash, exampleSetHash},
				{strings.ToUpper(exampleSetHash), exampleSetHash, exampleSetHash},
				// Names are lowered, de-duplicated and sorted before hashing.
				{"example.com,www.example.com", exampleSetHash, exampleSetHash},
				{"WWW.example.com,example.com,www.example.com", exampleSetHash, exampleSetHash},
				{"example.com", "a379a6f6eeafb9a55e378c118034e2751e682fab9f2d30ab13d2125586ce1947", "a379a6f6eeafb9a55e378c118034e2751e682fab9f2d30ab13d2125586ce1947"},
			},
			invalid: []string{"", exampleSetHash[:63], exampleSetHash + "0", strings.Replace(exampleSetHash, "6", "g", 1),
				"example.com,,www.example.com", "example.com, www.example.com", "example.com,", "localhost",
				"*.example.com"},
		},
	}
	for _, c := range cases {
		for _, v := range c.valid {
			bucket, override, err := c.kind.Canonicalize(v.in)
			if err != nil || bucket != v.bucket || override != v.override {
				t.Errorf("%s.Canonicalize(%q) = %q, %q, %v; want %q, %q, nil", c.kind, v.in, bucket, override, err, v.bucket, v.override)
			}
		}
		for _, in := range c.invalid {
			bucket, override, err := c.kind.Canonicalize(in)
			if !errors.Is(err, ErrInvalidID) || bucket != "" || override != "" {
				t.Errorf("%s.Canonicalize(%q) = %q, %q, %v; want an ErrInvalidID", c.kind, in, bucket, override, err)
			}
		}
	}
}

// TestIDsErrorMessages checks that a refused id says what was expected, in
// words an API client can act on, without echoing the id.
func TestIDsErrorMessages(t *testing.T) {
	cases := []struct {
		kind IDKind
		in   string
		want string
	}{
		{KindIP, "nope", "want an IPv4 or IPv6 address"},
		{KindIP, "fe80::1%eth0", "zone"},
		{KindIPv6Range, "2001:db8::/64", "prefix length must be 48"},
		{KindAccount, "007", "positive integer without leading zeros"},
		{KindAccount, "9223372036854775808", "too large"},
		{KindDomain, "example.com.", "must not end with a dot"},
		{KindDomain, "*.example.com", "wildcards are not allowed"},
		{KindDomain, "a_b.example.com", "only contain letters, digits, hyphens and dots"},
		{KindString, "a\x00b", "non-printable"},
		{KindString, "\xff", "not valid UTF-8"},
		{KindAccountDomain, "example.com", "want <account>:<domain>"},
		{KindDomainOrIPPrefix, "192.0.2.1", "a /32 for IPv4"},
		{KindFQDNSet, "localhost", "fully qualified domain names"},
		{kindInvalid, "x", "no valid id kind"},
	}
	for _, c := range cases {
		_, _, err := c.kind.Canonicalize(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "invalid id: ") {
			t.Errorf("%s.Canonicalize(%q) error = %v; want it to start with \"invalid id: \" and contain %q", c.kind, c.in, err, c.want)
		}
	}
}

// TestIDsOverrideID checks the ids accepted in the overrides file: the same
// as transaction ids, except that the per-account-and-domain kinds take the
// account alone.
func TestIDsOverrideID(t *testing.T) {
	cases := []struct {
		kind IDKind
		in   string
		want string // "" means refused
	}{
		{KindAccountDomain, "12345", "12345"},
		{KindAccountDomain, "12345:example.com", ""},
		{KindAccountDomain, "007", ""},
		{KindIP, "::ffff:10.0.0.2", "10.0.0.2"},
		{KindFQDNSet, "www.example.com,example.com", exampleSetHash},
		{KindDomainOrIPPrefix, "EXAMPLE.com", "example.com"},
		{KindString, "alice", "alice"},
	}
	for _, c := range cases {
		got, err := c.kind.CanonicalOverrideID(c.in)
		if c.want == "" {
			if !errors.Is(err, ErrInvalidID) {
				t.Errorf("%s override id %q = %q, %v; want an ErrInvalidID", c.kind, c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s override id %q = %q, %v; want %q", c.kind, c.in, got, err, c.want)
		}
	}
}

// TestIDsCanonicalInputDoesNotAllocate guards the hot path: an id that is
// already canonical is returned as it is, without allocating.
func TestIDsCanonicalInputDoesNotAllocate(t *testing.T) {
	cases := []struct {
		kind IDKind
		in   string
	}{
		{KindIP, "192.0.2.1"},
		{KindIP, "2001:db8::1"},
		{KindIPv6Range, "2001:db8:abcd::/48"},
		{KindAccount, "12345"},
		{KindDomain, "www.example.com"},
		{KindString, "alice ✓"},
		{KindAccountDomain, "12345:example.com"},
		{KindDomainOrIPPrefix, "example.com"},
		{KindDomainOrIPPrefix, "192.0.2.1/32"},
		{KindDomainOrIPPrefix, "2001:db8:1:2::/64"},
		{KindFQDNSet, exampleSetHash},
	}
	for _, c := range cases {
		allocs := testing.AllocsPerRun(100, func() {
			if _, _, err := c.kind.Canonicalize(c.in); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s.Canonicalize(%q) allocates %v times; want 0", c.kind, c.in, allocs)
		}
	}
}

// TestIDsKindStrings pins the spelling of every kind, which is the config
// file syntax, and that parsing a spelling gives the kind back.
func TestIDsKindStrings(t *testing.T) {
	want := map[IDKind]string{
		KindIP: "ip", KindIPv6Range: "ipv6-range", KindAccount: "account", KindDomain: "domain",
		KindString: "string", KindAccountDomain: "account:domain",
		KindDomainOrIPPrefix: "domain-or-ip-prefix", KindFQDNSet: "fqdn-set",
	}
	for k, s := range want {
		if k.String() != s {
			t.Errorf("IDKind(%d).String() = %q; want %q", int(k), k.String(), s)
		}
		if got, ok := ParseIDKind(s); !ok || got != k {
			t.Errorf("ParseIDKind(%q) = %v, %v; want %v", s, got, ok, k)
		}
		declarable := k <= KindString
		if k.Declarable() != declarable {
			t.Errorf("%s.Declarable() = %v; want %v", k, k.Declarable(), declarable)
		}
	}
	if got := IDKind(42).String(); got != "IDKind(42)" {
		t.Errorf("IDKind(42).String() = %q", got)
	}
	if _, ok := ParseIDKind("IP"); ok {
		t.Error(`ParseIDKind("IP") accepted; kinds are case-sensitive`)
	}
}

// TestIDsTakesAddresses pins which kinds a client's address can be an id
// of: the address kinds, the prefix kinds (through AddressID) and string;
// never an account, a domain or a set of names.
func TestIDsTakesAddresses(t *testing.T) {
	want := map[IDKind]bool{
		KindIP: true, KindIPv6Range: true, KindDomainOrIPPrefix: true, KindString: true,
		KindAccount: false, KindDomain: false, KindAccountDomain: false, KindFQDNSet: false,
		kindInvalid: false, IDKind(42): false,
	}
	for k, w := range want {
		if got := k.TakesAddresses(); got != w {
			t.Errorf("%s.TakesAddresses() = %v; want %v", k, got, w)
		}
	}
}

// TestIDsAddressID walks every kind through the ids AddressID gives a
// client's address: the address itself (IPv4-mapped addresses as IPv4),
// or the prefix the kind is made of. For a kind that takes addresses, the
// id is already canonical, so the client lands in the bucket an explicit
// id of that prefix would name; an IPv4 client of an IPv6 range has no id
// (the limit does not apply to it); for the other kinds, Canonicalize
// refuses the address.
func TestIDsAddressID(t *testing.T) {
	tests := []struct {
		kind   IDKind
		addr   string
		want   string
		usable bool // Canonicalize accepts want
	}{
		{KindIP, "192.0.2.1", "192.0.2.1", true},
		{KindIP, "::ffff:192.0.2.1", "192.0.2.1", true},
		{KindIP, "2001:db8::1", "2001:db8::1", true},
		{KindString, "192.0.2.1", "192.0.2.1", true},
		{KindString, "2001:db8::1", "2001:db8::1", true},
		{KindString, "::ffff:192.0.2.1", "192.0.2.1", true},
		{KindIPv6Range, "2001:db8:abcd:12::1", "2001:db8:abcd::/48", true},
		{KindIPv6Range, "2001:db8:abcd:ffff:ffff:ffff:ffff:ffff", "2001:db8:abcd::/48", true},
		{KindIPv6Range, "192.0.2.1", "", false},
		{KindIPv6Range, "::ffff:192.0.2.1", "", false},
		{KindDomainOrIPPrefix, "192.0.2.1", "192.0.2.1/32", true},
		{KindDomainOrIPPrefix, "::ffff:192.0.2.1", "192.0.2.1/32", true},
		{KindDomainOrIPPrefix, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64", true},
		{KindAccount, "192.0.2.1", "192.0.2.1", false},
		{KindDomain, "192.0.2.1", "192.0.2.1", false},
		{KindAccountDomain, "192.0.2.1", "192.0.2.1", false},
		{KindFQDNSet, "2001:db8::1", "2001:db8::1", false},
	}
	for _, tt := range tests {
		got, applies := tt.kind.AddressID(netip.MustParseAddr(tt.addr))
		if got != tt.want || applies != (tt.want != "") {
			t.Errorf("%s.AddressID(%s) = %q, %v; want %q", tt.kind, tt.addr, got, applies, tt.want)
			continue
		}
		if !applies {
			continue
		}
		if tt.usable != tt.kind.TakesAddresses() && tt.kind != KindIPv6Range {
			t.Errorf("%s: usable %v but TakesAddresses %v", tt.kind, tt.usable, tt.kind.TakesAddresses())
		}
		bucketID, _, err := tt.kind.Canonicalize(got)
		switch {
		case tt.usable && (err != nil || bucketID != got):
			t.Errorf("%s.Canonicalize(%q) = %q, %v; want it unchanged", tt.kind, got, bucketID, err)
		case !tt.usable && !errors.Is(err, ErrInvalidID):
			t.Errorf("%s.Canonicalize(%q) = %q, %v; want ErrInvalidID", tt.kind, got, bucketID, err)
		}
	}
}
