package forwardauth_test

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/limiter-dev/limiter/forwardauth"
)

// rule is a rule that New accepts, to change one field of.
func rule(name string) forwardauth.Rule {
	return forwardauth.Rule{
		Name:       name,
		Limits:     []forwardauth.Entry{{Limit: "APIRequestsPerKey", Source: forwardauth.Source{Kind: forwardauth.Header, Arg: "X-Api-Key"}}},
		Cost:       1,
		Missing:    forwardauth.MissingDeny,
		DenyStatus: forwardauth.DefaultDenyStatus,
	}
}

// New keeps the rules it is given, by name, and the trusted prefixes; the
// rules are its own copies, so that changing the slices given to it later
// changes nothing in use.
func TestNewKeepsTheRules(t *testing.T) {
	api := rule("api")
	api.Limits = append(api.Limits, forwardauth.Entry{Limit: "RequestsPerClientIP", Source: forwardauth.Source{Kind: forwardauth.ClientIP}})
	site := rule("site.v2")
	site.Missing, site.DenyStatus, site.Cost = forwardauth.MissingClientIP, 403, 2
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	rs, err := forwardauth.New(trusted, []forwardauth.Rule{site, api})
	if err != nil {
		t.Fatal(err)
	}
	if rs.Count() != 2 || !slices.Equal(rs.Names(), []string{"api", "site.v2"}) {
		t.Fatalf("Count() = %d, Names() = %q; want 2, [api site.v2]", rs.Count(), rs.Names())
	}
	got, ok := rs.Rule("site.v2")
	if !ok || got.Name != "site.v2" || got.Missing != forwardauth.MissingClientIP || got.DenyStatus != 403 || got.Cost != 2 || len(got.Limits) != 1 {
		t.Errorf("Rule(site.v2) = %+v, %v", got, ok)
	}
	if _, ok := rs.Rule("API"); ok {
		t.Error("rule names are case-sensitive, as URL paths are: API found")
	}
	if _, ok := rs.Rule("nope"); ok {
		t.Error("an unknown rule was found")
	}

	api.Limits[0].Limit = "Changed"
	trusted[0] = netip.MustParsePrefix("0.0.0.0/0")
	got, _ = rs.Rule("api")
	if got.Limits[0].Limit != "APIRequestsPerKey" || len(got.Limits) != 2 {
		t.Errorf("the caller's slice reached the rule in use: %+v", got.Limits)
	}
	if tp := rs.TrustedProxies(); !slices.Equal(tp, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}) {
		t.Errorf("TrustedProxies() = %v", tp)
	}
	rs.TrustedProxies()[0] = netip.MustParsePrefix("0.0.0.0/0")
	if rs.Trusts(netip.MustParseAddr("192.0.2.1")) {
		t.Error("changing the slice TrustedProxies returned widened the trust")
	}
}

// A prefix with bits set past its length trusts its network, as it is
// checked against addresses.
func TestNewMasksTrustedPrefixes(t *testing.T) {
	rs, err := forwardauth.New([]netip.Prefix{netip.MustParsePrefix("10.1.2.3/8")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tp := rs.TrustedProxies(); len(tp) != 1 || tp[0] != netip.MustParsePrefix("10.0.0.0/8") {
		t.Errorf("TrustedProxies() = %v; want [10.0.0.0/8]", tp)
	}
	if !rs.Trusts(netip.MustParseAddr("10.200.0.1")) {
		t.Error("10.200.0.1 is in 10.0.0.0/8 and not trusted")
	}
}

// New refuses every rule the handler could not serve, each with
// ErrInvalidRules and a message naming the rule and what is wrong.
func TestNewRefusals(t *testing.T) {
	with := func(name string, change func(*forwardauth.Rule)) []forwardauth.Rule {
		r := rule(name)
		change(&r)
		return []forwardauth.Rule{r}
	}
	header := forwardauth.Source{Kind: forwardauth.Header, Arg: "X-Api-Key"}
	tests := []struct {
		name    string
		trusted []netip.Prefix
		rules   []forwardauth.Rule
		want    string
	}{
		{"an invalid trusted prefix", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), {}}, nil, "an invalid trusted proxy prefix"},
		{"an empty name", nil, with("", func(*forwardauth.Rule) {}), `rule name ""`},
		{"a name with a slash", nil, with("a/b", func(*forwardauth.Rule) {}), `rule name "a/b"`},
		{"a name too long", nil, with(strings.Repeat("r", forwardauth.MaxNameLength+1), func(*forwardauth.Rule) {}), "want 1 to 64"},
		{"a dot-segment name", nil, with("..", func(*forwardauth.Rule) {}), `rule name ".."`},
		{"a rule given twice", nil, []forwardauth.Rule{rule("api"), rule("site"), rule("api")}, `rule "api" is given twice`},
		{"no limits", nil, with("api", func(r *forwardauth.Rule) { r.Limits = nil }), `rule "api" has no limits`},
		{"cost 0", nil, with("api", func(r *forwardauth.Rule) { r.Cost = 0 }), "cost 0 is below 1"},
		{"a negative cost", nil, with("api", func(r *forwardauth.Rule) { r.Cost = -3 }), "cost -3 is below 1"},
		{"a missing action past the last", nil, with("api", func(r *forwardauth.Rule) { r.Missing = forwardauth.MissingClientIP + 1 }), "unknown missing action 3"},
		{"a negative missing action", nil, with("api", func(r *forwardauth.Rule) { r.Missing = -1 }), "unknown missing action -1"},
		{"deny status 399", nil, with("api", func(r *forwardauth.Rule) { r.DenyStatus = 399 }), "deny status 399 is not a 4xx"},
		{"deny status 500", nil, with("api", func(r *forwardauth.Rule) { r.DenyStatus = 500 }), "deny status 500 is not a 4xx"},
		{"deny status 200", nil, with("api", func(r *forwardauth.Rule) { r.DenyStatus = 200 }), "deny status 200 is not a 4xx"},
		{"no deny status", nil, with("api", func(r *forwardauth.Rule) { r.DenyStatus = 0 }), "deny status 0 is not a 4xx"},
		{"an expose value past the last", nil, with("api", func(r *forwardauth.Rule) { r.Expose = forwardauth.ExposeAll + 1 }), "unknown expose value 3"},
		{"a negative expose value", nil, with("api", func(r *forwardauth.Rule) { r.Expose = -1 }), "unknown expose value -1"},
		{"an entry without a limit name", nil, with("api", func(r *forwardauth.Rule) { r.Limits = []forwardauth.Entry{{Source: header}} }),
			`rule "api", limit 1: a limit name and an id source are needed`},
		{"an entry without a source", nil, with("api", func(r *forwardauth.Rule) {
			r.Limits = append(r.Limits, forwardauth.Entry{Limit: "RequestsPerClientIP"})
		}), `rule "api", limit 2: a limit name and an id source are needed`},
		{"an entry with a source past the last", nil, with("api", func(r *forwardauth.Rule) {
			r.Limits = []forwardauth.Entry{{Limit: "RequestsPerClientIP", Source: forwardauth.Source{Kind: forwardauth.Const + 1}}}
		}), `rule "api", limit 1: a limit name and an id source are needed`},
		{"a limit twice", nil, with("api", func(r *forwardauth.Rule) {
			r.Limits = append(r.Limits, forwardauth.Entry{Limit: "RequestsPerClientIP", Source: forwardauth.Source{Kind: forwardauth.ClientIP}},
				forwardauth.Entry{Limit: "APIRequestsPerKey", Source: forwardauth.Source{Kind: forwardauth.Cookie, Arg: "key"}})
		}), `rule "api": limit APIRequestsPerKey is given twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := forwardauth.New(tt.trusted, tt.rules)
			if !errors.Is(err, forwardauth.ErrInvalidRules) || rs != nil {
				t.Fatalf("New = %v, %v; want nil and ErrInvalidRules", rs, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q; want it to say %q", err, tt.want)
			}
		})
	}
}

// The edges New accepts: a rule of no more than 64 characters, every
// 4xx, each missing action, each expose value.
func TestNewAcceptsTheEdges(t *testing.T) {
	var rules []forwardauth.Rule
	for i, status := range []int{400, 401, 403, 429, 499} {
		r := rule(strings.Repeat("x", i+1))
		r.DenyStatus = status
		r.Missing = forwardauth.Missing(i % 3)
		r.Expose = forwardauth.Expose(i % 3)
		rules = append(rules, r)
	}
	rules = append(rules, rule(strings.Repeat("n", forwardauth.MaxNameLength)))
	rs, err := forwardauth.New(nil, rules)
	if err != nil || rs.Count() != len(rules) {
		t.Fatalf("New = %v, %v; want %d rules", rs, err, len(rules))
	}
	if len(rs.TrustedProxies()) != 0 || rs.Trusts(netip.MustParseAddr("127.0.0.1")) {
		t.Error("rules without trusted proxies trust someone")
	}
}

// A rule name is one plain path segment: ASCII letters, digits, '-', '_'
// and '.', 1 to 64 of them, and neither "." nor "..", which a client or
// proxy would resolve away.
func TestValidName(t *testing.T) {
	for _, tt := range []struct {
		name string
		want bool
	}{
		{"api", true},
		{"API-v2_beta.1", true},
		{"a", true},
		{"0", true},
		{"...", true},
		{".well-known", true},
		{strings.Repeat("a", 64), true},
		{"", false},
		{".", false},
		{"..", false},
		{strings.Repeat("a", 65), false},
		{"a/b", false},
		{"a b", false},
		{"a%2Fb", false},
		{"a?b", false},
		{"a#b", false},
		{"a:b", false},
		{"a~b", false},
		{"règle", false},
		{"api\n", false},
		{"api\x00", false},
	} {
		if got := forwardauth.ValidName(tt.name); got != tt.want {
			t.Errorf("ValidName(%q) = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// Trusts tells the trusted proxies from everyone else, for IPv4 and IPv6
// prefixes and single hosts; an IPv4 address written as IPv6 is the IPv4
// address; an invalid address is never trusted.
func TestTrusts(t *testing.T) {
	rs, err := forwardauth.New([]netip.Prefix{
		netip.MustParsePrefix("127.0.0.1/32"),
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("2001:db8:100::/40"),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.0.0.2", false},
		{"10.0.0.0", true},
		{"10.255.255.255", true},
		{"11.0.0.0", false},
		{"9.255.255.255", false},
		{"::ffff:10.1.2.3", true},
		{"::ffff:127.0.0.1", true},
		{"::ffff:192.0.2.1", false},
		{"::1", true},
		{"::2", false},
		{"2001:db8:100::1", true},
		{"2001:db8:1ff:ffff::1", true},
		{"2001:db8:200::1", false},
		{"fe80::1%eth0", false},
		{"::a00:1", false}, // 10.0.0.1's bits as IPv6, not mapped: another address
	} {
		if got := rs.Trusts(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("Trusts(%s) = %v; want %v", tt.addr, got, tt.want)
		}
	}
	if rs.Trusts(netip.Addr{}) {
		t.Error("the invalid address is trusted")
	}
}

// nil Rules are no rules: nothing found, nothing trusted, nothing to
// list; the zero Rules too.
func TestNilRules(t *testing.T) {
	for _, rs := range []*forwardauth.Rules{nil, {}} {
		if _, ok := rs.Rule("api"); ok {
			t.Errorf("%v: a rule found", rs)
		}
		if rs.Count() != 0 || len(rs.Names()) != 0 || len(rs.TrustedProxies()) != 0 {
			t.Errorf("%v: Count %d, Names %q, TrustedProxies %v", rs, rs.Count(), rs.Names(), rs.TrustedProxies())
		}
		if rs.Trusts(netip.MustParseAddr("127.0.0.1")) {
			t.Errorf("%v trusts 127.0.0.1", rs)
		}
	}
}

// The three expose values, as the rules file spells them, read and print
// back; anything else, other cases included, is refused. The zero value
// is the default, so that a rule built without one shows the deciding
// limit only.
func TestParseExpose(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want forwardauth.Expose
	}{
		{"deciding", forwardauth.ExposeDeciding},
		{"none", forwardauth.ExposeNone},
		{"all", forwardauth.ExposeAll},
	} {
		got, ok := forwardauth.ParseExpose(tt.in)
		if !ok || got != tt.want {
			t.Errorf("ParseExpose(%q) = %v, %v; want %v", tt.in, got, ok, tt.want)
		}
		if got.String() != tt.in {
			t.Errorf("%v.String() = %q; want %q", got, got.String(), tt.in)
		}
	}
	if forwardauth.ExposeDeciding != 0 {
		t.Error("the zero Expose is not deciding: a rule built without one would show more")
	}
	for _, bad := range []string{"", "None", "ALL", "deciding-only", "some", "false", "null"} {
		if got, ok := forwardauth.ParseExpose(bad); ok {
			t.Errorf("ParseExpose(%q) = %v, true; want it refused", bad, got)
		}
	}
	if got := forwardauth.Expose(7).String(); got != "Expose(7)" {
		t.Errorf("Expose(7).String() = %q", got)
	}
}
