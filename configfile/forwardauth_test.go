package configfile_test

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/forwardauth"
	"github.com/limiter-dev/limiter/ratelimits"
)

const faFile = "forward-auth.yaml"

// faDefaults are the limits the rules files below name: one of every id
// kind a client address fits or does not, and one of every algorithm, for
// the cost bounds. NewOrdersPerAccount (account) and CertificatesPerDomain
// (domain-or-ip-prefix, no default) are built in.
const faDefaults = `NewOrdersPerAccount:
  burst: 20
  count: 20
  period: 1s
APIRequestsPerKey:
  enum: 102
  id: string
  burst: 100
  count: 100
  period: 1s
PasswordResetsPerIP:
  enum: 103
  id: ip
  burst: 3
  count: 3
  period: 1h
APIRequestsPerConsumer:
  enum: 104
  id: string
  algorithm: sliding-window
  count: 50
  period: 1m
RequestsPerClientIP:
  enum: 106
  id: ip
  algorithm: rate-counter
  window: 10s
  rate: 100
  penalty: 15m
RequestsPerRange:
  enum: 110
  id: ipv6-range
  burst: 10
  count: 10
  period: 1s
RequestsPerDomain:
  enum: 111
  id: domain
  burst: 10
  count: 10
  period: 1s
`

func faConfig(t testing.TB) *ratelimits.Config {
	t.Helper()
	cfg, err := configfile.Parse("defaults.yaml", []byte(faDefaults), "overrides.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A file using every field, and every id source: the rules come out as
// written, in canonical form, with the defaults where a field is left
// out (cost 1, missing deny, deny_status 429, expose deciding); trusted proxies are
// prefixes, a bare address one host, an IPv4-mapped address or prefix its
// IPv4 form.
func TestForwardAuthGoodFile(t *testing.T) {
	const file = `# The proxies in front.
trusted_proxies:
  - 127.0.0.1/32
  - "::1/128"
  - 10.0.0.0/8
  - 192.0.2.10
  - 2001:db8::5
  - ::ffff:172.16.0.0/108
  - unix
rules:
  api:
    limits:
      - limit: APIRequestsPerKey
        id: header:x-api-key
      - limit: RequestsPerClientIP
        id: client_ip
    cost: 2
    missing: allow
    deny_status: 403
    expose: none
  plain:
    limits:
      - {limit: PasswordResetsPerIP, id: client_ip}
  everything.v2:
    limits:
      - {limit: APIRequestsPerConsumer, id: cookie:session}
      - {limit: APIRequestsPerKey, id: method}
      - {limit: RequestsPerClientIP, id: host}
      - {limit: NewOrdersPerAccount, id: const:42}
      - {limit: CertificatesPerDomain, id: path}
      - {limit: RequestsPerRange, id: client_ip}
    missing: client_ip
    deny_status: 429
    expose: all
  consts:
    limits:
      - {limit: RequestsPerDomain, id: "const:Example.COM"}
    missing: deny
    expose: deciding
`
	rs, err := configfile.ParseForwardAuth(faFile, []byte(file), faConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	wantTrusted := []netip.Prefix{
		netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.0.2.10/32"), netip.MustParsePrefix("2001:db8::5/128"), netip.MustParsePrefix("172.16.0.0/12"),
	}
	if got := rs.TrustedProxies(); !slices.Equal(got, wantTrusted) {
		t.Errorf("TrustedProxies() = %v; want %v", got, wantTrusted)
	}
	if !rs.TrustsUnixSockets() {
		t.Error("unix in trusted_proxies: calls over a Unix socket are not trusted")
	}
	if !slices.Equal(rs.Names(), []string{"api", "consts", "everything.v2", "plain"}) {
		t.Fatalf("Names() = %q", rs.Names())
	}
	src := func(s string) forwardauth.Source {
		t.Helper()
		v, err := forwardauth.ParseSource(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := map[string]forwardauth.Rule{
		"api": {Name: "api", Cost: 2, Missing: forwardauth.MissingAllow, DenyStatus: 403, Expose: forwardauth.ExposeNone, Limits: []forwardauth.Entry{
			{Limit: "APIRequestsPerKey", Source: forwardauth.Source{Kind: forwardauth.Header, Arg: "X-Api-Key"}},
			{Limit: "RequestsPerClientIP", Source: forwardauth.Source{Kind: forwardauth.ClientIP}},
		}},
		"plain": {Name: "plain", Cost: 1, Missing: forwardauth.MissingDeny, DenyStatus: 429, Limits: []forwardauth.Entry{
			{Limit: "PasswordResetsPerIP", Source: src("client_ip")},
		}},
		"everything.v2": {Name: "everything.v2", Cost: 1, Missing: forwardauth.MissingClientIP, DenyStatus: 429, Expose: forwardauth.ExposeAll, Limits: []forwardauth.Entry{
			{Limit: "APIRequestsPerConsumer", Source: src("cookie:session")},
			{Limit: "APIRequestsPerKey", Source: src("method")},
			{Limit: "RequestsPerClientIP", Source: src("host")},
			{Limit: "NewOrdersPerAccount", Source: src("const:42")},
			{Limit: "CertificatesPerDomain", Source: src("path")},
			{Limit: "RequestsPerRange", Source: src("client_ip")},
		}},
		"consts": {Name: "consts", Cost: 1, Missing: forwardauth.MissingDeny, DenyStatus: 429, Limits: []forwardauth.Entry{
			{Limit: "RequestsPerDomain", Source: src("const:Example.COM")},
		}},
	}
	for name, w := range want {
		got, ok := rs.Rule(name)
		if !ok {
			t.Errorf("rule %s not loaded", name)
			continue
		}
		if got.Name != w.Name || got.Cost != w.Cost || got.Missing != w.Missing || got.DenyStatus != w.DenyStatus || got.Expose != w.Expose || !slices.Equal(got.Limits, w.Limits) {
			t.Errorf("rule %s =\n %+v\nwant\n %+v", name, *got, w)
		}
	}
}

// Nothing, comments only, null, and a mapping without rules are a file
// without rules.
func TestForwardAuthEmptyFile(t *testing.T) {
	for _, data := range []string{"", "\n", "# no proxy in front yet\n", "~\n", "null\n", "---\n", "{}\n",
		"rules: {}\n", "trusted_proxies:\nrules: {}\n", "[]\n", "rules:\n", "trusted_proxies: []\nrules: ~\n", "trusted_proxies:\n"} {
		rs, err := configfile.ParseForwardAuth(faFile, []byte(data), faConfig(t))
		if err != nil || rs == nil || rs.Count() != 0 {
			t.Errorf("%q: %v, %v; want rules without any", data, rs, err)
		}
	}
}

// faProblem is one problem expected of a file: its line, the limit it
// names (if any), and a part of its message.
type faProblem struct {
	line  int
	limit string
	msg   string
}

// faProblems parses data and returns its problems; it fails the test if
// the file loads or the error is not an *Error of the file.
func faProblems(t *testing.T, data string, cfg *ratelimits.Config) []configfile.Problem {
	t.Helper()
	rs, err := configfile.ParseForwardAuth(faFile, []byte(data), cfg)
	var ce *configfile.Error
	if !errors.As(err, &ce) || rs != nil || len(ce.Problems) == 0 || !errors.Is(err, ratelimits.ErrInvalidConfig) {
		t.Fatalf("ParseForwardAuth = %v, %v; want an *Error with problems", rs, err)
	}
	for _, p := range ce.Problems {
		if p.File != faFile {
			t.Errorf("problem %q names file %q", p, p.File)
		}
	}
	return ce.Problems
}

// checkProblems compares problems with want, in order.
func checkProblems(t *testing.T, got []configfile.Problem, want []faProblem) {
	t.Helper()
	if len(got) != len(want) {
		var b strings.Builder
		for _, p := range got {
			fmt.Fprintln(&b, p)
		}
		t.Fatalf("%d problems:\n%swant %d: %+v", len(got), b.String(), len(want), want)
	}
	for i, w := range want {
		p := got[i]
		if p.Line != w.line || p.Limit != w.limit || !strings.Contains(p.Message, w.msg) {
			t.Errorf("problem %d = %q (line %d, limit %q); want line %d, limit %q, a message with %q", i, p, p.Line, p.Limit, w.line, w.limit, w.msg)
		}
	}
}

// Every problem is told at its line, with the limit it concerns, and
// nothing loads: the structure (unknown fields at each level, with where
// a misplaced one belongs), the trusted proxies, the rule names, the
// limits and their sources, and the rule's settings, each checked against
// the limits in use.
func TestForwardAuthProblems(t *testing.T) {
	rule := func(body string) string { return "rules:\n  api:\n" + body }
	key := "    limits:\n      - limit: APIRequestsPerKey\n        id: header:X-Api-Key\n"
	tests := []struct {
		name string
		file string
		want []faProblem
	}{
		// The shape of the file.
		{"not a mapping", "- api\n", []faProblem{{1, "", "the forward-auth file must be a mapping"}}},
		{"a YAML syntax error", "rules:\n  api: [\n", []faProblem{{2, "", "YAML syntax error"}}},
		{"two documents", "rules: {}\n---\nrules: {}\n", []faProblem{{2, "", "more than one YAML document"}}},
		{"an unknown top-level field", "trusted_proxies: []\nrule:\n  api: {}\nrules: {}\n", []faProblem{{2, "", `unknown field "rule" (allowed: trusted_proxies, rules)`}}},
		{"a rule at the top level", "api:\n" + key, []faProblem{{1, "", `unknown field "api"`}}},
		{"a top-level field twice", "rules: {}\nrules: {}\n", []faProblem{{2, "", `duplicate field "rules" (first at line 1)`}}},
		{"rules not a mapping", "rules:\n  - api\n", []faProblem{{2, "", "rules must be a mapping of rule names to rules, got a list"}}},
		{"a rule not a mapping", "rules:\n  api: [x]\n", []faProblem{{2, "", `rule "api" must be a mapping`}}},
		{"a rule of null", "rules:\n  api:\n", []faProblem{{2, "", `rule "api" must be a mapping`}}},

		// Fields of a rule.
		{"an unknown field of a rule", rule(key + "    costs: 2\n"), []faProblem{{6, "", `unknown field "costs" (allowed: limits, cost, missing, deny_status, expose)`}}},
		{"limit written on the rule", rule("    limit: APIRequestsPerKey\n    id: client_ip\n"), []faProblem{
			{3, "", "a rule lists its limits under limits:"},
			{3, "", `rule "api": missing limits`}, // at the rule's first line
			{4, "", "each limit of a rule has its own id source"},
		}},
		{"status for deny_status", rule(key + "    status: 403\n"), []faProblem{{6, "", "the status of a denial is deny_status"}}},
		{"a rule field twice", rule(key + "    cost: 1\n    cost: 2\n"), []faProblem{{7, "", `duplicate field "cost" (first at line 6)`}}},

		// Fields of a limit.
		{"an unknown field of a limit", rule(key + "        name: x\n"), []faProblem{{6, "", `unknown field "name" (allowed: limit, id)`}}},
		{"source for id", rule("    limits:\n      - limit: APIRequestsPerKey\n        source: client_ip\n"), []faProblem{
			{4, "", "missing id"},
			{5, "", "the id source is given as id"},
		}},
		{"cost on a limit", rule(key + "        cost: 2\n"), []faProblem{{6, "", "cost belongs to the rule"}}},
		{"missing on a limit", rule(key + "        missing: allow\n"), []faProblem{{6, "", "missing belongs to the rule"}}},
		{"deny_status on a limit", rule(key + "        deny_status: 403\n"), []faProblem{{6, "", "deny_status belongs to the rule"}}},
		{"expose on a limit", rule(key + "        expose: none\n"), []faProblem{{6, "", "expose belongs to the rule"}}},
		{"a limit without its name", rule("    limits:\n      - id: client_ip\n"), []faProblem{{4, "", "missing limit"}}},
		{"a limit name that is not a string", rule("    limits:\n      - {limit: [a], id: client_ip}\n"), []faProblem{{4, "", "limit must be a limit name, got a list"}}},
		{"an empty limit name", rule("    limits:\n      - {limit: '', id: client_ip}\n"), []faProblem{{4, "", `limit must be a limit name, got the string ""`}}},
		{"an id that is not a string", rule("    limits:\n      - limit: APIRequestsPerKey\n        id: 7\n"), []faProblem{{5, "", "id must be an id source such as client_ip or header:X-Api-Key, got the integer 7"}}},
		{"a limit that is not a mapping", rule("    limits:\n      - APIRequestsPerKey\n"), []faProblem{{4, "", "each limit of a rule must be a mapping"}}},

		// Trusted proxies.
		{"trusted_proxies not a list", "trusted_proxies: 10.0.0.0/8\nrules: {}\n", []faProblem{{1, "", "trusted_proxies must be a list of CIDR prefixes"}}},
		{"a bad CIDR", "trusted_proxies:\n  - 10.0.0.0/8\n  - 10.0.0.0/33\nrules: {}\n", []faProblem{{3, "", `trusted proxy "10.0.0.0/33": not a CIDR prefix`}}},
		{"not an address", "trusted_proxies: [proxy.internal]\nrules: {}\n", []faProblem{{1, "", `trusted proxy "proxy.internal": not a CIDR prefix`}}},
		{"host bits set", "trusted_proxies:\n  - 10.1.2.3/8\nrules: {}\n", []faProblem{{2, "", "has bits set after its first 8: did you mean 10.0.0.0/8, or 10.1.2.3 alone?"}}},
		{"IPv6 host bits set", "trusted_proxies:\n  - 2001:db8::1/64\nrules: {}\n", []faProblem{{2, "", "did you mean 2001:db8::/64, or 2001:db8::1 alone?"}}},
		{"a zone", "trusted_proxies:\n  - fe80::1%eth0\nrules: {}\n", []faProblem{{2, "", "an address with a zone cannot be trusted"}}},
		{"a trusted proxy that is not a string", "trusted_proxies:\n  - {cidr: 10.0.0.0/8}\n  - 10\nrules: {}\n", []faProblem{
			{2, "", "each trusted proxy must be a CIDR prefix such as 10.0.0.0/8, an address, or unix, got a mapping"},
			{3, "", "got the integer 10"},
		}},

		// Rule names.
		{"a slash in a rule name", "rules:\n  a/b:\n" + key, []faProblem{{2, "", `rule name the string "a/b": want 1 to 64 letters, digits`}}},
		{"an empty rule name", "rules:\n  '':\n" + key, []faProblem{{2, "", `rule name the string ""`}}},
		{"a dot-segment rule name", "rules:\n  '..':\n" + key, []faProblem{{2, "", `rule name the string ".."`}}},
		{"a rule name too long", "rules:\n  " + strings.Repeat("r", 65) + ":\n" + key, []faProblem{{2, "", "want 1 to 64"}}},
		{"a rule name that is a number", "rules:\n  7:\n" + key, []faProblem{{2, "", "rule name the integer 7 (quote it)"}}},
		{"a rule given twice", "rules:\n  api:\n" + key + "  api:\n" + key, []faProblem{{6, "", `rule "api" is given twice (first at line 2)`}}},
		{"a rule given twice, the second with a problem of its own", "rules:\n  api:\n" + key + "  api:\n" + key + "    colour: red\n",
			[]faProblem{{6, "", `rule "api" is given twice (first at line 2)`}, {10, "", `unknown field "colour"`}}},

		// Limits.
		{"no limits", rule("    cost: 1\n"), []faProblem{{3, "", `rule "api": missing limits`}}},
		{"empty limits", rule("    limits: []\n"), []faProblem{{3, "", "limits is empty"}}},
		{"limits not a list", rule("    limits: APIRequestsPerKey\n"), []faProblem{{3, "", "limits must be a list of {limit: NAME, id: SOURCE}"}}},
		{"a limit twice", rule(key + "      - limit: APIRequestsPerKey\n        id: client_ip\n"), []faProblem{
			{6, "APIRequestsPerKey", "the limit is given twice in this rule (first at line 4)"}}},
		{"an unknown limit", rule("    limits:\n      - limit: APIRequestPerKey\n        id: header:X-Api-Key\n"), []faProblem{
			{4, "APIRequestPerKey", "unknown limit name"}}},
		{"an unknown limit, with a guess", rule("    limits:\n      - limit: APIRequestPerKey\n        id: header:X-Api-Key\n"), []faProblem{
			{4, "APIRequestPerKey", "did you mean APIRequestsPerKey?"}}},
		{"a bad source", rule("    limits:\n      - limit: APIRequestsPerKey\n        id: query:key\n"), []faProblem{
			{5, "", `invalid id source "query:key"`}}},
		{"a bad header name", rule("    limits:\n      - limit: APIRequestsPerKey\n        id: 'header:X Api Key'\n"), []faProblem{
			{5, "", "a header name is a non-empty HTTP token"}}},
		{"an empty const", rule("    limits:\n      - limit: APIRequestsPerKey\n        id: 'const:'\n"), []faProblem{
			{5, "", "const needs a value"}}},
		{"client_ip on an account limit", rule("    limits:\n      - limit: NewOrdersPerAccount\n        id: client_ip\n"), []faProblem{
			{5, "NewOrdersPerAccount", "client_ip gives addresses, and the ids of this limit are of kind account"}}},
		{"client_ip on a domain limit", rule("    limits:\n      - limit: RequestsPerDomain\n        id: client_ip\n"), []faProblem{
			{5, "RequestsPerDomain", "of kind domain"}}},
		{"a const that is not an account", rule("    limits:\n      - limit: NewOrdersPerAccount\n        id: const:abc\n"), []faProblem{
			{5, "NewOrdersPerAccount", `"abc" is not an id of this limit (kind account)`}}},
		{"a const that is not an IPv6 range", rule("    limits:\n      - limit: RequestsPerRange\n        id: const:10.0.0.0/8\n"), []faProblem{
			{5, "RequestsPerRange", `"10.0.0.0/8" is not an id of this limit (kind ipv6-range)`}}},
		{"a const that is not an address", rule("    limits:\n      - limit: PasswordResetsPerIP\n        id: const:global\n"), []faProblem{
			{5, "PasswordResetsPerIP", "(kind ip)"}}},

		// missing.
		{"missing: client_ip with a header of an account limit", rule("    limits:\n      - {limit: NewOrdersPerAccount, id: header:X-Account}\n    missing: client_ip\n"), []faProblem{
			{2, "NewOrdersPerAccount", `rule "api" has missing: client_ip, and the ids of this limit are of kind account, not addresses`}}},
		{"missing: client_ip with a cookie of a domain limit", rule("    limits:\n      - {limit: RequestsPerDomain, id: cookie:site}\n    missing: client_ip\n"), []faProblem{
			{2, "RequestsPerDomain", "of kind domain, not addresses"}}},
		{"missing: bogus", rule(key + "    missing: bogus\n"), []faProblem{{6, "", `missing must be deny, allow or client_ip, got the string "bogus"`}}},
		{"missing: Deny", rule(key + "    missing: Deny\n"), []faProblem{{6, "", "missing must be deny, allow or client_ip"}}},
		{"missing: a list", rule(key + "    missing: [deny]\n"), []faProblem{{6, "", "got a list"}}},
		{"missing: null", rule(key + "    missing:\n"), []faProblem{{6, "", "got no value"}}},

		// cost.
		{"cost 0", rule(key + "    cost: 0\n"), []faProblem{{6, "", "cost must be greater than 0, got 0"}}},
		{"a negative cost", rule(key + "    cost: -1\n"), []faProblem{{6, "", "cost must be greater than 0, got -1"}}},
		{"a fractional cost", rule(key + "    cost: 1.5\n"), []faProblem{{6, "", "cost must be an integer"}}},
		{"a cost as a string", rule(key + "    cost: '1'\n"), []faProblem{{6, "", "cost must be an integer"}}},
		{"a cost above the burst", rule("    limits:\n      - {limit: PasswordResetsPerIP, id: client_ip}\n    cost: 4\n"), []faProblem{
			{2, "PasswordResetsPerIP", `rule "api" has cost 4, above the 3 this limit allows in one request`}}},
		{"a cost above a window's count", rule("    limits:\n      - {limit: APIRequestsPerConsumer, id: header:X-Consumer}\n    cost: 51\n"), []faProblem{
			{2, "APIRequestsPerConsumer", "above the 50 this limit allows"}}},
		{"a cost above a rate counter's most", rule("    limits:\n      - {limit: RequestsPerClientIP, id: client_ip}\n    cost: 100001\n"), []faProblem{
			{2, "RequestsPerClientIP", "above the 100000 this limit allows"}}},
		{"a cost above the smallest burst of two", rule("    limits:\n      - {limit: APIRequestsPerKey, id: header:X-Api-Key}\n      - {limit: PasswordResetsPerIP, id: client_ip}\n    cost: 50\n"), []faProblem{
			{2, "PasswordResetsPerIP", "above the 3"}}},

		// deny_status.
		{"deny_status 399", rule(key + "    deny_status: 399\n"), []faProblem{{6, "", "deny_status must be a 4xx status such as 429 (Traefik, Caddy) or 403 (nginx"}}},
		{"deny_status 500", rule(key + "    deny_status: 500\n"), []faProblem{{6, "", "got the integer 500"}}},
		{"deny_status 200", rule(key + "    deny_status: 200\n"), []faProblem{{6, "", "got the integer 200"}}},
		{`deny_status "429"`, rule(key + "    deny_status: \"429\"\n"), []faProblem{{6, "", `got the string "429"`}}},
		{"deny_status 429.5", rule(key + "    deny_status: 429.5\n"), []faProblem{{6, "", "got the number 429.5"}}},
		{"deny_status 429.0", rule(key + "    deny_status: 429.0\n"), []faProblem{{6, "", "got the number 429.0"}}},
		{"deny_status null", rule(key + "    deny_status:\n"), []faProblem{{6, "", "got no value"}}},
		{"deny_status true", rule(key + "    deny_status: true\n"), []faProblem{{6, "", "got the boolean true"}}},

		// expose.
		{"expose: bogus", rule(key + "    expose: bogus\n"), []faProblem{{6, "", `expose must be deciding (the deciding limit only), none (nothing but Retry-After on a refusal) or all (every decision, for debugging), got the string "bogus"`}}},
		{"expose: None", rule(key + "    expose: None\n"), []faProblem{{6, "", `got the string "None"`}}},
		{"expose: an empty string", rule(key + "    expose: ''\n"), []faProblem{{6, "", `got the string ""`}}},
		{"expose: false", rule(key + "    expose: false\n"), []faProblem{{6, "", "got the boolean false"}}},
		{"expose: 0", rule(key + "    expose: 0\n"), []faProblem{{6, "", "got the integer 0"}}},
		{"expose: a list", rule(key + "    expose: [all]\n"), []faProblem{{6, "", "got a list"}}},
		{"expose: null", rule(key + "    expose:\n"), []faProblem{{6, "", "got no value"}}},
		{"expose twice", rule(key + "    expose: none\n    expose: all\n"), []faProblem{{7, "", `duplicate field "expose" (first at line 6)`}}},
	}
	cfg := faConfig(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkProblems(t, faProblems(t, tt.file, cfg), tt.want)
		})
	}
}

// The edges of what loads: cost up to the smallest bound of its limits,
// a limit without a default (no bound), every 4xx, missing: client_ip
// where only sources that cannot be missing feed a non-address limit.
func TestForwardAuthEdges(t *testing.T) {
	const file = `rules:
  burst:
    limits: [{limit: PasswordResetsPerIP, id: client_ip}]
    cost: 3
  window:
    limits: [{limit: APIRequestsPerConsumer, id: header:X-Consumer}]
    cost: 50
  counter:
    limits: [{limit: RequestsPerClientIP, id: client_ip}]
    cost: 100000
  unbounded:
    limits: [{limit: CertificatesPerDomain, id: host}]
    cost: 1000000
  s400: {limits: [{limit: APIRequestsPerKey, id: client_ip}], deny_status: 400}
  s499: {limits: [{limit: APIRequestsPerKey, id: client_ip}], deny_status: 499}
  const-account:
    limits:
      - {limit: NewOrdersPerAccount, id: const:7}
      - {limit: APIRequestsPerKey, id: header:X-Api-Key}
    missing: client_ip
`
	rs, err := configfile.ParseForwardAuth(faFile, []byte(file), faConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, cost := range map[string]int64{"burst": 3, "window": 50, "counter": 100000, "unbounded": 1000000} {
		if r, ok := rs.Rule(name); !ok || r.Cost != cost {
			t.Errorf("rule %s: %+v, %v; want cost %d", name, r, ok, cost)
		}
	}
	for name, status := range map[string]int{"s400": 400, "s499": 499} {
		if r, ok := rs.Rule(name); !ok || r.DenyStatus != status {
			t.Errorf("rule %s: %+v, %v; want deny_status %d", name, r, ok, status)
		}
	}
	if r, ok := rs.Rule("const-account"); !ok || r.Missing != forwardauth.MissingClientIP {
		t.Errorf("rule const-account: %+v, %v", r, ok)
	}
}

// One run tells every problem of the file, in line order, and the good
// rules beside the bad ones do not load either.
func TestForwardAuthManyProblems(t *testing.T) {
	const file = `trusted_proxies:
  - 10.0.0.0/33
  - 127.0.0.1
rules:
  good:
    limits: [{limit: APIRequestsPerKey, id: header:X-Api-Key}]
  bad:
    limits:
      - {limit: NewOrdersPerAccount, id: client_ip}
      - {limit: APIRequestPerKey, id: cookie:session}
      - {limit: PasswordResetsPerIP, id: ip}
    cost: 0
    missing: maybe
    deny_status: 503
  worse:
    limits: []
  a/b:
    limits: [{limit: APIRequestsPerKey, id: "header:"}]
  good:
    limits: [{limit: APIRequestsPerKey, id: method}]
  costly:
    limits: [{limit: PasswordResetsPerIP, id: client_ip}]
    cost: 4
    missing: maybe
    expose: some
typo: 1
`
	checkProblems(t, faProblems(t, file, faConfig(t)), []faProblem{
		{2, "", "trusted proxy"},
		{9, "NewOrdersPerAccount", "client_ip gives addresses"},
		{10, "APIRequestPerKey", "did you mean APIRequestsPerKey?"},
		{11, "", `invalid id source "ip"`},
		{12, "", "cost must be greater than 0"},
		{13, "", "missing must be deny, allow or client_ip"},
		{14, "", "deny_status must be a 4xx status"},
		{16, "", "limits is empty"},
		{17, "", `rule name the string "a/b"`},
		{18, "", `invalid id source "header:"`},
		{19, "", `rule "good" is given twice (first at line 5)`},
		{21, "PasswordResetsPerIP", "cost 4, above the 3"},
		{24, "", "missing must be deny, allow or client_ip"},
		{25, "", "expose must be deciding"},
		{26, "", `unknown field "typo"`},
	})
}

// Without a configuration (the limit files did not load), everything but
// the limits is checked: unknown names, the kinds of client_ip and
// constants, and the cost bounds are left alone; the structure, the
// sources, the trusted proxies and the settings are not.
func TestForwardAuthWithoutConfig(t *testing.T) {
	const unchecked = `rules:
  api:
    limits:
      - {limit: NoSuchLimit, id: client_ip}
      - {limit: NewOrdersPerAccount, id: const:abc}
      - {limit: RequestsPerDomain, id: header:X-Site}
    cost: 1000000
    missing: client_ip
`
	rs, err := configfile.ParseForwardAuth(faFile, []byte(unchecked), nil)
	if err != nil || rs.Count() != 1 {
		t.Fatalf("ParseForwardAuth with no configuration = %v, %v; want the rule", rs, err)
	}
	checkProblems(t, faProblems(t, "trusted_proxies: [10.0.0.1/8]\nrules:\n  api:\n    limits: [{limit: NoSuchLimit, id: ip}]\n    deny_status: 302\n    expose: everything\n", nil), []faProblem{
		{1, "", "has bits set"},
		{4, "", `invalid id source "ip"`},
		{5, "", "deny_status must be a 4xx status"},
		{6, "", "expose must be deciding"},
	})
}

// The bundled rules file loads against the bundled limit files, and has
// a rule for each proxy its comments name; the password-reset form's
// answers show nothing of its limits.
func TestForwardAuthBundledFile(t *testing.T) {
	var data [3][]byte
	for i, path := range []string{"../config/defaults.yaml", "../config/overrides.yaml", "../config/forward-auth.yaml"} {
		var err error
		if data[i], err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := configfile.Parse("defaults.yaml", data[0], "overrides.yaml", data[1])
	if err != nil {
		t.Fatal(err)
	}
	rs, err := configfile.ParseForwardAuth("forward-auth.yaml", data[2], cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Count() == 0 {
		t.Fatal("the bundled forward-auth file has no rules")
	}
	for _, name := range []string{"api", "api-nginx"} {
		r, ok := rs.Rule(name)
		if !ok {
			t.Errorf("no rule %s", name)
			continue
		}
		if name == "api-nginx" && r.DenyStatus != 403 {
			t.Errorf("rule api-nginx answers %d; nginx's auth_request needs 403", r.DenyStatus)
		}
	}
	if r, ok := rs.Rule("password-reset"); !ok || r.Expose != forwardauth.ExposeNone {
		t.Errorf("rule password-reset: %+v, %v; want expose: none", r, ok)
	}
	if !rs.Trusts(netip.MustParseAddr("127.0.0.1")) || !rs.Trusts(netip.MustParseAddr("::1")) || rs.Trusts(netip.MustParseAddr("192.0.2.1")) {
		t.Errorf("the bundled file trusts %v; want loopback only", rs.TrustedProxies())
	}
}

// A rule's cost must fit every override of its limits too: an id whose
// override allows less in one request would have every request refused
// with an error, not a decision.
func TestForwardAuthCostAboveAnOverride(t *testing.T) {
	const overrides = `
- APIRequestsPerKey:
    burst: 4
    count: 4
    period: 1s
    ids: [{id: small}, {id: tiny-key}]
- APIRequestsPerConsumer:
    count: 8
    period: 1m
    ids: [{id: partner}]
`
	cfg, err := configfile.Parse("defaults.yaml", []byte(faDefaults), "overrides.yaml", []byte(overrides))
	if err != nil {
		t.Fatal(err)
	}
	rule := func(limit, src string, cost int) string {
		return fmt.Sprintf("rules:\n  api:\n    limits:\n      - {limit: %s, id: %s}\n    cost: %d\n", limit, src, cost)
	}
	checkProblems(t, faProblems(t, rule("APIRequestsPerKey", "header:X-Api-Key", 5), cfg), []faProblem{
		{2, "APIRequestsPerKey", `rule "api" has cost 5, above the 4 the override of id "small" allows in one request`}})
	checkProblems(t, faProblems(t, rule("APIRequestsPerConsumer", "header:X-Consumer", 9), cfg), []faProblem{
		{2, "APIRequestsPerConsumer", `above the 8 the override of id "partner" allows`}})
	for _, ok := range []string{rule("APIRequestsPerKey", "header:X-Api-Key", 4), rule("APIRequestsPerConsumer", "header:X-Consumer", 8)} {
		if _, err := configfile.ParseForwardAuth(faFile, []byte(ok), cfg); err != nil {
			t.Errorf("%q: %v; a cost every override allows loads", ok, err)
		}
	}
}
