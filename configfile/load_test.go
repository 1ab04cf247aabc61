package configfile

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
)

// testDefaults is a valid defaults file with a built-in and a declared name,
// which the overrides cases below build on.
const testDefaults = `NewOrdersPerAccount:
  burst: 20
  count: 20
  period: 1s
LoginAttemptsPerUser:
  enum: 101
  id: string
  burst: 5
  count: 5
  period: 15m
`

// goodDefaults adds a declared ip name, and restates a built-in's enum and
// id kind, which is allowed when they do not change.
const goodDefaults = testDefaults + `PasswordResetsPerIP:
  enum: 103
  id: ip
  burst: 3
  count: 3
  period: 1h
CertificatesPerDomain:
  enum: 5
  id: domain-or-ip-prefix
  burst: 50
  count: 50
  period: 168h
`

// goodOverrides uses every form: a name without default, one name in two
// entries, ids to canonicalise, an account override of an account:domain
// name, and an FQDN set given by its names.
const goodOverrides = `# comment
- NewRegistrationsPerIPAddress:
    burst: 40
    count: 40
    period: 1s
    ids:
      - id: 2001:DB8::1
        comment: partner
      - id: ::ffff:10.0.0.2
- NewOrdersPerAccount:
    burst: 100
    count: 100
    period: 1s
    ids:
      - id: 12345
        comment: 10057
- NewOrdersPerAccount:
    burst: 200
    count: 200
    period: 2s
    ids:
      - id: "67890"
- CertificatesPerDomainPerAccount:
    burst: 300
    count: 300
    period: 168h
    ids:
      - id: 12345
- CertificatesPerFQDNSet:
    burst: 20
    count: 20
    period: 168h
    ids:
      - id: www.example.com,Example.com
- LoginAttemptsPerUser:
    burst: 10
    count: 10
    period: 15m
    ids:
      - id: Alice Smith
`

func mustLimit(t *testing.T, burst, count int64, period time.Duration, override bool) ratelimits.Limit {
	t.Helper()
	l, err := ratelimits.NewLimit(burst, count, period)
	if err != nil {
		t.Fatal(err)
	}
	l.Override = override
	return l
}

// TestConfigGoodFiles loads valid files and checks what the Limiter will
// ask: names, defaults, and overrides that win only for their own ids, found
// through the canonical id whatever spelling the file used.
func TestConfigGoodFiles(t *testing.T) {
	c, err := Parse("defaults.yaml", []byte(goodDefaults), "overrides.yaml", []byte(goodOverrides))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("Lookup", func(t *testing.T) {
		cases := []struct {
			name     string
			want     ratelimits.Name
			kind     ratelimits.IDKind
			declared bool
		}{
			{"NewOrdersPerAccount", ratelimits.NewOrdersPerAccount, ratelimits.KindAccount, false},
			{"CertificatesPerFQDNSet", ratelimits.CertificatesPerFQDNSet, ratelimits.KindFQDNSet, false},
			{"LimitOverrideRequestsPerIPAddress", ratelimits.LimitOverrideRequestsPerIPAddress, ratelimits.KindIP, false}, // built in, not in any file
			{"LoginAttemptsPerUser", 101, ratelimits.KindString, true},
			{"PasswordResetsPerIP", 103, ratelimits.KindIP, true},
		}
		for _, tc := range cases {
			info, ok := c.Lookup(tc.name)
			if !ok || info.Name != tc.want || info.Kind != tc.kind || info.Declared != tc.declared || info.Limit != tc.name {
				t.Errorf("Lookup(%q) = %+v, %v; want enum %d kind %s declared %v", tc.name, info, ok, tc.want, tc.kind, tc.declared)
			}
		}
		for _, unknown := range []string{"", "APIRequestsPerKey", "neworderSPERACCOUNT"} {
			if info, ok := c.Lookup(unknown); ok {
				t.Errorf("Lookup(%q) = %+v, true; want unknown", unknown, info)
			}
		}
		if info, _ := c.Lookup("LoginAttemptsPerUser"); info.BucketKey("alice") != "101:alice" {
			t.Errorf("declared BucketKey = %q; want 101:alice", info.BucketKey("alice"))
		}
	})

	t.Run("Names", func(t *testing.T) {
		names := c.Names()
		var got []ratelimits.Name
		for _, n := range names {
			got = append(got, n.Name)
		}
		want := []ratelimits.Name{1, 2, 3, 4, 5, 6, 7, 8, 9, 101, 103}
		if len(got) != len(want) {
			t.Fatalf("Names() = %v; want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("Names() = %v; want %v", got, want)
			}
		}
		names[0].Limit = "changed"
		if c.Names()[0].Limit != "NewRegistrationsPerIPAddress" {
			t.Error("changing the slice from Names() changed the Config")
		}
	})

	t.Run("Limit", func(t *testing.T) {
		cases := []struct {
			desc string
			name ratelimits.Name
			id   string // a transaction id, canonicalised first as the Limiter does
			want ratelimits.Limit
			ok   bool
		}{
			{"default for an id without override", ratelimits.NewOrdersPerAccount, "999", mustLimit(t, 20, 20, time.Second, false), true},
			{"override in the first entry", ratelimits.NewOrdersPerAccount, "12345", mustLimit(t, 100, 100, time.Second, true), true},
			{"override in the second entry of the same name", ratelimits.NewOrdersPerAccount, "67890", mustLimit(t, 200, 200, 2*time.Second, true), true},
			{"override listed as 2001:DB8::1, asked as 2001:db8::1", ratelimits.NewRegistrationsPerIPAddress, "2001:db8::1", mustLimit(t, 40, 40, time.Second, true), true},
			{"override listed as 2001:DB8::1, asked as 2001:db8:0::1", ratelimits.NewRegistrationsPerIPAddress, "2001:db8:0::1", mustLimit(t, 40, 40, time.Second, true), true},
			{"override listed as ::ffff:10.0.0.2, asked as 10.0.0.2", ratelimits.NewRegistrationsPerIPAddress, "10.0.0.2", mustLimit(t, 40, 40, time.Second, true), true},
			{"no default and no override: unlimited", ratelimits.NewRegistrationsPerIPAddress, "10.0.0.3", ratelimits.Limit{}, false},
			{"account override of a per-account name", ratelimits.CertificatesPerDomainPerAccount, "12345", mustLimit(t, 300, 300, 168*time.Hour, true), true},
			{"other account of an override-only name: unlimited", ratelimits.CertificatesPerDomainPerAccount, "54321", ratelimits.Limit{}, false},
			{"FQDN set listed by names, asked by names in another order", ratelimits.CertificatesPerFQDNSet, "example.com,www.example.com", mustLimit(t, 20, 20, 168*time.Hour, true), true},
			{"FQDN set listed by names, asked by hash", ratelimits.CertificatesPerFQDNSet, exampleSetHash, mustLimit(t, 20, 20, 168*time.Hour, true), true},
			{"declared name override", 101, "Alice Smith", mustLimit(t, 10, 10, 15*time.Minute, true), true},
			{"declared name, string ids are not lowered", 101, "alice smith", mustLimit(t, 5, 5, 15*time.Minute, false), true},
			{"declared name without overrides", 103, "192.0.2.1", mustLimit(t, 3, 3, time.Hour, false), true},
			{"built-in restating its enum and id kind", ratelimits.CertificatesPerDomain, "example.com", mustLimit(t, 50, 50, 168*time.Hour, false), true},
			{"known name in no file", ratelimits.LimitOverrideRequestsPerIPAddress, "192.0.2.1", ratelimits.Limit{}, false},
		}
		for _, tc := range cases {
			info := c.Names()[0]
			for _, n := range c.Names() {
				if n.Name == tc.name {
					info = n
				}
			}
			_, overrideID, err := info.Kind.Canonicalize(tc.id)
			if err != nil {
				t.Fatalf("%s: %v", tc.desc, err)
			}
			got, ok := c.Limit(tc.name, overrideID)
			if got != tc.want || ok != tc.ok {
				t.Errorf("%s: Limit(%d, %q) = %+v, %v; want %+v, %v", tc.desc, tc.name, overrideID, got, ok, tc.want, tc.ok)
			}
		}
		if _, ok := c.Limit(ratelimits.Name(999), "x"); ok {
			t.Error("Limit of an unknown enum found a limit")
		}
	})

	t.Run("DefaultAndOverrideCount", func(t *testing.T) {
		cases := []struct {
			name      ratelimits.Name
			def       ratelimits.Limit
			hasDef    bool
			overrides int
		}{
			{ratelimits.NewOrdersPerAccount, mustLimit(t, 20, 20, time.Second, false), true, 2},
			{ratelimits.NewRegistrationsPerIPAddress, ratelimits.Limit{}, false, 2},
			{ratelimits.CertificatesPerDomainPerAccount, ratelimits.Limit{}, false, 1},
			{ratelimits.CertificatesPerFQDNSet, ratelimits.Limit{}, false, 1},
			{101, mustLimit(t, 5, 5, 15*time.Minute, false), true, 1},
			{103, mustLimit(t, 3, 3, time.Hour, false), true, 0},
			{ratelimits.LimitOverrideRequestsPerIPAddress, ratelimits.Limit{}, false, 0},
		}
		for _, tc := range cases {
			def, ok := c.Default(tc.name)
			if def != tc.def || ok != tc.hasDef {
				t.Errorf("Default(%d) = %+v, %v; want %+v, %v", tc.name, def, ok, tc.def, tc.hasDef)
			}
			if n := c.OverrideCount(tc.name); n != tc.overrides {
				t.Errorf("OverrideCount(%d) = %d; want %d", tc.name, n, tc.overrides)
			}
		}
	})
}

// TestConfigEmptyOverrides checks the three spellings of "no overrides".
func TestConfigEmptyOverrides(t *testing.T) {
	for _, overrides := range []string{"", "# nothing yet\n", "[]\n", "---\n"} {
		c, err := Parse("defaults.yaml", []byte(testDefaults), "overrides.yaml", []byte(overrides))
		if err != nil {
			t.Errorf("overrides %q: %v", overrides, err)
			continue
		}
		if n := c.OverrideCount(ratelimits.NewOrdersPerAccount); n != 0 {
			t.Errorf("overrides %q: OverrideCount = %d", overrides, n)
		}
	}
}

// TestConfigBundledFiles loads the example files shipped in config/.
func TestConfigBundledFiles(t *testing.T) {
	c := bundledConfig(t)
	for _, d := range []struct {
		name string
		enum ratelimits.Name
		kind ratelimits.IDKind
	}{
		{"LoginAttemptsPerUser", 101, ratelimits.KindString},
		{"APIRequestsPerKey", 102, ratelimits.KindString},
		{"PasswordResetsPerIP", 103, ratelimits.KindIP},
		{"APIRequestsPerConsumer", 104, ratelimits.KindString},
		{"LoginAttemptsPerAccount", 105, ratelimits.KindAccount},
		{"RequestsPerClientIP", 106, ratelimits.KindIP},
		{"SearchRequestsPerKey", 107, ratelimits.KindString},
	} {
		info, ok := c.Lookup(d.name)
		if !ok || info.Name != d.enum || info.Kind != d.kind || !info.Declared {
			t.Errorf("Lookup(%q) = %+v, %v", d.name, info, ok)
		}
		if _, ok := c.Default(d.enum); !ok {
			t.Errorf("%s has no default", d.name)
		}
	}
	if l, ok := c.Default(ratelimits.NewRegistrationsPerIPAddress); !ok || l != mustLimit(t, 10, 10, 3*time.Hour, false) {
		t.Errorf("NewRegistrationsPerIPAddress default = %+v, %v", l, ok)
	}
	if l, ok := c.Limit(107, "key-1:search"); !ok || !l.Shadow || !c.Shadow(107) || c.Shadow(102) {
		t.Errorf("SearchRequestsPerKey default = %+v, %v; want the only shadow limit", l, ok)
	}
	if _, ok := c.Default(ratelimits.CertificatesPerDomainPerAccount); ok {
		t.Error("CertificatesPerDomainPerAccount has a default; it is meant to be override only")
	}
	if l, ok := c.Limit(ratelimits.NewRegistrationsPerIPAddress, "192.0.2.10"); !ok || !l.Override {
		t.Errorf("bundled override for 192.0.2.10 = %+v, %v", l, ok)
	}
	sliding := func(count int64, override bool) ratelimits.Limit {
		l, err := ratelimits.NewWindowLimit(ratelimits.SlidingWindow, count, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		l.Override = override
		return l
	}
	if l, ok := c.Limit(104, "anyone"); !ok || l != sliding(100, false) || c.SyncRate(104) != 0 {
		t.Errorf("APIRequestsPerConsumer default = %+v, %v", l, ok)
	}
	if l, ok := c.Limit(104, "consumer-reporting"); !ok || l != sliding(1000, true) {
		t.Errorf("APIRequestsPerConsumer override = %+v, %v", l, ok)
	}
	lockout := set(withPenalty(t, mustLimit(t, 5, 5, 15*time.Minute, false), 15*time.Minute), false, 0, 0)
	if l, ok := c.Limit(105, "42"); !ok || l != lockout || !c.HasBox(105) {
		t.Errorf("LoginAttemptsPerAccount default = %+v, %v", l, ok)
	}
	perIP := set(mustRateCounter(t, 10*time.Second, 100, 15*time.Minute), false, 0, 200_000)
	if l, ok := c.Limit(106, "192.0.2.1"); !ok || l != perIP || !c.HasBox(106) || c.Algorithm(106) != ratelimits.RateCounter {
		t.Errorf("RequestsPerClientIP default = %+v, %v", l, ok)
	}
	if l, ok := c.Limit(106, "198.51.100.20"); !ok || l != set(mustRateCounter(t, 10*time.Second, 1000, time.Minute), true, 0, 200_000) {
		t.Errorf("RequestsPerClientIP override = %+v, %v", l, ok)
	}
}

// wantProblem is a problem a bad file must report: exact file, line and
// limit, and a substring of the message.
type wantProblem struct {
	file  string
	line  int
	limit string
	msg   string
}

// checkProblems asserts that err is a *Error with exactly the wanted
// problems, in order: none missing, none extra.
func checkProblems(t *testing.T, err error, want []wantProblem) {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v; want a *Error", err)
	}
	if !errors.Is(err, ratelimits.ErrInvalidConfig) {
		t.Errorf("errors.Is(err, ratelimits.ErrInvalidConfig) = false")
	}
	if len(ce.Problems) != len(want) {
		t.Fatalf("%d problems; want %d:\n%v", len(ce.Problems), len(want), err)
	}
	for i, w := range want {
		p := ce.Problems[i]
		if p.File != w.file || p.Line != w.line || p.Limit != w.limit || !strings.Contains(p.Message, w.msg) {
			t.Errorf("problem %d = %q; want %s:%d, limit %q, message containing %q", i, p.String(), w.file, w.line, w.limit, w.msg)
		}
	}
}

// exampleSetHash is the id of the FQDN set {example.com, www.example.com}.
const exampleSetHash = "65825d50db221df1768452c68de1c2870728a93bbfc9ca90648b733b7bb6b046"

const (
	dfile = "defaults.yaml"
	ofile = "overrides.yaml"
)

// TestConfigBadDefaults feeds defaults files with one mistake each and
// checks that the problem names the right file, line and limit.
func TestConfigBadDefaults(t *testing.T) {
	const orders = "NewOrdersPerAccount"
	cases := []struct {
		desc     string
		defaults string
		want     []wantProblem
	}{
		{"bad period", "NewOrdersPerAccount:\n  burst: 20\n  count: 20\n  period: 1 second\n",
			[]wantProblem{{dfile, 4, orders, `period "1 second" is not a valid duration`}}},
		{"period not a string", "NewOrdersPerAccount:\n  burst: 20\n  count: 20\n  period: 10\n",
			[]wantProblem{{dfile, 4, orders, "period must be a duration such as 1s, 15m or 3h, got the integer 10"}}},
		{"negative period", "NewOrdersPerAccount:\n  burst: 20\n  count: 20\n  period: -1s\n",
			[]wantProblem{{dfile, 4, orders, "period must be greater than 0"}}},
		{"zero burst", "NewOrdersPerAccount:\n  burst: 0\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 2, orders, "burst must be greater than 0, got 0"}}},
		{"negative count", "NewOrdersPerAccount:\n  burst: 20\n  count: -5\n  period: 1s\n",
			[]wantProblem{{dfile, 3, orders, "count must be greater than 0, got -5"}}},
		{"fractional burst", "NewOrdersPerAccount:\n  burst: 1.5\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 2, orders, "burst must be an integer, got the number 1.5"}}},
		{"a byte that is not UTF-8", "NewOrdersPerAccount:\n  burst: 5\n  count: 5 # caf\xe9\n  period: 1s\n",
			[]wantProblem{{dfile, 3, "", "not valid UTF-8 (the byte 0xe9): save the file as UTF-8"}}},
		{"quoted burst", "NewOrdersPerAccount:\n  burst: \"5\"\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 2, orders, `burst must be an integer, got the string "5"`}}},
		{"boolean count", "NewOrdersPerAccount:\n  burst: 5\n  count: true\n  period: 1s\n",
			[]wantProblem{{dfile, 3, orders, "count must be an integer, got the boolean true"}}},
		{"burst beyond int64", "NewOrdersPerAccount:\n  burst: 99999999999999999999\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 2, orders, "out of range"}}},
		{"burst beyond int64, within uint64", "NewOrdersPerAccount:\n  burst: 18446744073709551615\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 2, orders, "out of range"}}},
		{"emission interval 0", "NewOrdersPerAccount:\n  burst: 2\n  count: 2\n  period: 1ns\n",
			[]wantProblem{{dfile, 1, orders, "emission interval is 0"}}},
		{"burst offset overflow", "NewOrdersPerAccount:\n  burst: 9223372036854775807\n  count: 1\n  period: 1s\n",
			[]wantProblem{{dfile, 1, orders, "burst offset overflows"}}},
		{"missing fields", "NewOrdersPerAccount:\n  burst: 20\n",
			[]wantProblem{{dfile, 1, orders, "missing count"}, {dfile, 1, orders, "missing period"}}},
		{"unknown field", "NewOrdersPerAccount:\n  burst: 20\n  burts: 20\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 3, orders, `unknown field "burts" (allowed: burst, count, period, window, rate, penalty, enum, id, algorithm, sync_rate, capacity, shadow, timezone)`}}},
		{"duplicate field", "NewOrdersPerAccount:\n  burst: 20\n  count: 20\n  burst: 30\n  period: 1s\n",
			[]wantProblem{{dfile, 4, orders, `duplicate field "burst" (first at line 2)`}}},
		{"duplicate name", testDefaults + "NewOrdersPerAccount:\n  burst: 1\n  count: 1\n  period: 1s\n",
			[]wantProblem{{dfile, 11, orders, "duplicate limit name (first defined at line 1)"}}},
		{"unknown name, a typo of a built-in", "NewOrdersPerAcount:\n  burst: 20\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 1, "NewOrdersPerAcount", "unknown limit name: to add a limit, declare it in the defaults file with an enum"}}},
		{"unknown name gets a suggestion", "neworderSperaccount:\n  burst: 20\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 1, "neworderSperaccount", "did you mean NewOrdersPerAccount?"}}},
		{"name with an id kind but no enum", "Custom:\n  id: string\n  burst: 20\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 1, "Custom", "unknown limit name"}}},
		{"invalid name", "Bad-Name:\n  enum: 100\n  id: string\n  burst: 20\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 1, "", `invalid limit name "Bad-Name"`}}},
		{"name not a string", "42:\n  burst: 20\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 1, "", "a limit name must be a plain string, got the integer 42"}}},
		{"missing id kind", "Custom:\n  enum: 100\n  burst: 20\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 1, "Custom", "missing id: a declared limit needs an id kind (ip, ipv6-range, account, domain or string)"}}},
		{"bad id kind", "Custom:\n  enum: 100\n  id: email\n  burst: 20\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 3, "Custom", `unknown id kind "email"`}}},
		{"built-in-only id kind", "Custom:\n  enum: 100\n  id: fqdn-set\n  burst: 20\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 3, "Custom", "id kind fqdn-set is reserved for built-in limits"}}},
		{"enum below 100", "Custom:\n  enum: 42\n  id: string\n  burst: 20\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 2, "Custom", "enum must be 100 or more"}}},
		{"enum too large", "Custom:\n  enum: 2147483648\n  id: string\n  burst: 20\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 2, "Custom", "enum must be at most 2147483647"}}},
		{"enum not an integer", "Custom:\n  enum: \"101\"\n  id: string\n  burst: 20\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 2, "Custom", "enum must be an integer"}}},
		{"duplicate enum", testDefaults + "Other:\n  enum: 101\n  id: account\n  burst: 1\n  count: 1\n  period: 1s\n",
			[]wantProblem{{dfile, 12, "Other", "enum 101 is already used by LoginAttemptsPerUser (line 6)"}}},
		{"duplicate enum beside a bad id kind", testDefaults + "Other:\n  enum: 101\n  id: email\n  burst: 1\n  count: 1\n  period: 1s\n",
			[]wantProblem{{dfile, 12, "Other", "enum 101 is already used by LoginAttemptsPerUser (line 6)"}, {dfile, 13, "Other", `unknown id kind "email"`}}},
		{"built-in enum changed", "NewOrdersPerAccount:\n  enum: 103\n  burst: 20\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 2, orders, "a built-in limit's enum cannot be changed: it is 3, got 103"}}},
		{"built-in id kind changed", "NewOrdersPerAccount:\n  id: string\n  burst: 20\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 2, orders, "a built-in limit's id kind cannot be changed: it is account"}}},
		{"limit not a mapping", "NewOrdersPerAccount: 20\n",
			[]wantProblem{{dfile, 1, orders, "a limit must be a mapping with burst, count and period (or algorithm, count and period for a window; algorithm, window, rate and penalty for a rate counter; algorithm, count, period and timezone for a calendar limit), got the integer 20"}}},
		{"alias of a value of the wrong type", "NewOrdersPerAccount:\n  burst: &b 20\n  count: 20\n  period: *b\n",
			[]wantProblem{{dfile, 4, orders, "period"}}},
		{"merge key of a scalar", "NewOrdersPerAccount:\n  <<: 20\n  burst: 20\n  count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 2, "", "a merge key (<<) takes a mapping or a list of mappings, got the integer 20"}}},
		{"an alias inside its own anchor's list", "NewOrdersPerAccount: &a [*a]\n",
			[]wantProblem{{dfile, 1, "", "the alias *a is inside the value of its own anchor &a"}}},
		{"an alias inside its own anchor's mapping", "NewOrdersPerAccount: &a\n  burst: 1\n  count: 1\n  period: 1s\n  x: *a\n",
			[]wantProblem{{dfile, 5, "", "the alias *a is inside the value of its own anchor &a"}}},
		{"a merge of its own anchor", "NewOrdersPerAccount: &a\n  <<: *a\n  burst: 1\n  count: 1\n  period: 1s\n",
			[]wantProblem{{dfile, 2, "", "the alias *a is inside the value of its own anchor &a"}}},
		{"aliases expanding beyond the bound", laughs(),
			[]wantProblem{{dfile, 1, "", "the file's aliases expand it to more than 1048576 values"}}},
		{"empty file", "", []wantProblem{{dfile, 0, "", "the defaults file is empty"}}},
		{"comments only", "# nothing\n\n# here\n", []wantProblem{{dfile, 0, "", "the defaults file is empty"}}},
		{"empty mapping", "{}\n", []wantProblem{{dfile, 1, "", "the defaults file defines no limits"}}},
		{"not a mapping", "- NewOrdersPerAccount\n", []wantProblem{{dfile, 1, "", "the defaults file must be a mapping from limit name to limit, got a list"}}},
		{"two documents", testDefaults + "---\nOther: 1\n", []wantProblem{{dfile, 11, "", "more than one YAML document"}}},
		{"YAML syntax error", "NewOrdersPerAccount:\n  burst: 20\n   count: 20\n  period: 1s\n",
			[]wantProblem{{dfile, 3, "", "YAML syntax error: mapping values are not allowed in this context"}}},
		{"YAML syntax error, unclosed flow", "NewOrdersPerAccount: {burst: 20, count: 20, period: 1s\n",
			[]wantProblem{{dfile, 1, "", "YAML syntax error: did not find expected ',' or '}'"}}},
		// yaml.v3 words a parser error at the line before the block it was
		// in (here line 3's): the problem is the line that breaks it.
		{"YAML syntax error, a key out of its block", "# limits\n\nNewOrdersPerAccount:\n  burst: 20\n  count: 20\n bad: 1\n  period: 1s\n",
			[]wantProblem{{dfile, 6, "", "YAML syntax error: did not find expected key"}}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			_, err := Parse(dfile, []byte(c.defaults), ofile, nil)
			checkProblems(t, err, c.want)
		})
	}
}

// laughs is a defaults file whose aliases of aliases name billions of
// values.
func laughs() string {
	var b strings.Builder
	b.WriteString("a: &a [x, x, x, x, x, x, x, x, x, x]\n")
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		fmt.Fprintf(&b, "%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", name, name, prev, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = name
	}
	return b.String()
}

// Anchors, aliases and merge keys are read as YAML defines them, as
// Boulder's loader (yaml.v3 decoding into Go values) reads them, in the
// defaults and overrides files alike: written keys win over merged ones.
func TestConfigAliasesAndMergeKeys(t *testing.T) {
	defaults := "NewRegistrationsPerIPAddress: &std\n  burst: 10\n  count: 10\n  period: 3h\n" +
		"NewOrdersPerAccount: *std\n" +
		"CertificatesPerDomain:\n  <<: *std\n  burst: 50\n" +
		"FailedAuthorizationsPerDomainPerAccount:\n  <<: [{count: 7}, *std]\n"
	overrides := "- NewOrdersPerAccount: &o\n    burst: 3\n    count: 3\n    period: 1h\n    ids: [{id: \"42\"}]\n" +
		"- NewRegistrationsPerIPAddress:\n    <<: *o\n    ids: [{id: 192.0.2.1}]\n"
	c, err := Parse(dfile, []byte(defaults), ofile, []byte(overrides))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         ratelimits.Name
		id           string
		burst, count int64
		period       time.Duration
	}{
		{ratelimits.NewRegistrationsPerIPAddress, "", 10, 10, 3 * time.Hour},
		{ratelimits.NewOrdersPerAccount, "", 10, 10, 3 * time.Hour},
		{ratelimits.CertificatesPerDomain, "", 50, 10, 3 * time.Hour},
		{ratelimits.FailedAuthorizationsPerDomainPerAccount, "", 10, 7, 3 * time.Hour},
		{ratelimits.NewOrdersPerAccount, "42", 3, 3, time.Hour},
		{ratelimits.NewRegistrationsPerIPAddress, "192.0.2.1", 3, 3, time.Hour},
	} {
		l, ok := c.Limit(tc.name, tc.id)
		if !ok || l.Burst != tc.burst || l.Count != tc.count || l.Period != tc.period {
			t.Errorf("limit %d for %q: %+v, %v; want burst %d, count %d, period %s", tc.name, tc.id, l, ok, tc.burst, tc.count, tc.period)
		}
	}
}

// TestConfigBadOverrides feeds overrides files with one mistake each, on top
// of valid defaults.
func TestConfigBadOverrides(t *testing.T) {
	const regs = "NewRegistrationsPerIPAddress"
	cases := []struct {
		desc      string
		overrides string
		want      []wantProblem
	}{
		{"not a list", "NewOrdersPerAccount:\n  burst: 1\n",
			[]wantProblem{{ofile, 1, "", "the overrides file must be a list of single-key maps"}}},
		{"entry with two keys, both otherwise valid", `- NewOrdersPerAccount:
    burst: 1
    count: 1
    period: 1s
    ids: [{id: 1}]
  LoginAttemptsPerUser:
    burst: 1
    count: 1
    period: 1s
    ids: [{id: bob}]
`, []wantProblem{{ofile, 1, "", `the entry has 2 keys ("NewOrdersPerAccount", "LoginAttemptsPerUser")`}}},
		{"entry not a mapping", "- NewOrdersPerAccount\n",
			[]wantProblem{{ofile, 1, "", `each entry must be a map with one limit name`}}},
		{"unknown name", "- NewOrdersPerAcount:\n    burst: 1\n    count: 1\n    period: 1s\n    ids: [{id: 1}]\n",
			[]wantProblem{{ofile, 1, "NewOrdersPerAcount", "unknown limit name"}}},
		{"unknown field", "- NewOrdersPerAccount:\n    burst: 1\n    count: 1\n    period: 1s\n    brust: 3\n    ids: [{id: 1}]\n",
			[]wantProblem{{ofile, 5, "NewOrdersPerAccount", `unknown field "brust" (allowed: burst, count, period, window, rate, penalty, ids)`}}},
		{"enum of the name", "- NewOrdersPerAccount:\n    burst: 1\n    count: 1\n    period: 1s\n    enum: 3\n    ids: [{id: 1}]\n",
			[]wantProblem{{ofile, 5, "NewOrdersPerAccount", "an override cannot set enum: it belongs to the limit name"}}},
		{"algorithm of a gcra name", "- NewOrdersPerAccount:\n    algorithm: gcra\n    burst: 1\n    count: 1\n    period: 1s\n    ids: [{id: 1}]\n",
			[]wantProblem{{ofile, 2, "NewOrdersPerAccount", "an override cannot set algorithm: it belongs to the limit name"}}},
		{"unknown field in an id", "- NewOrdersPerAccount:\n    burst: 1\n    count: 1\n    period: 1s\n    ids:\n      - id: 1\n        note: x\n",
			[]wantProblem{{ofile, 7, "NewOrdersPerAccount", `unknown field "note" (allowed: id, comment)`}}},
		{"missing ids", "- NewOrdersPerAccount:\n    burst: 1\n    count: 1\n    period: 1s\n",
			[]wantProblem{{ofile, 1, "NewOrdersPerAccount", "missing ids"}}},
		{"empty ids", "- NewOrdersPerAccount:\n    burst: 1\n    count: 1\n    period: 1s\n    ids: []\n",
			[]wantProblem{{ofile, 5, "NewOrdersPerAccount", "ids is empty"}}},
		{"id missing from an ids entry", "- NewOrdersPerAccount:\n    burst: 1\n    count: 1\n    period: 1s\n    ids:\n      - comment: who?\n",
			[]wantProblem{{ofile, 6, "NewOrdersPerAccount", "missing id"}}},
		{"invalid id", "- NewOrdersPerAccount:\n    burst: 1\n    count: 1\n    period: 1s\n    ids:\n      - id: \"007\"\n",
			[]wantProblem{{ofile, 6, "NewOrdersPerAccount", `id "007": invalid id: want an account number`}}},
		{"id that is not a string", "- LoginAttemptsPerUser:\n    burst: 1\n    count: 1\n    period: 1s\n    ids:\n      - id: 1.5\n",
			[]wantProblem{{ofile, 6, "LoginAttemptsPerUser", "id must be a string, got the number 1.5 (quote it)"}}},
		{"account:domain given for a per-account override", "- FailedAuthorizationsPerDomainPerAccount:\n    burst: 1\n    count: 1\n    period: 1s\n    ids:\n      - id: 12345:example.com\n",
			[]wantProblem{{ofile, 6, "FailedAuthorizationsPerDomainPerAccount", "overrides of this limit are per account"}}},
		{"account:domain id of a per-account limit", "- CertificatesPerDomainPerAccount:\n    burst: 1\n    count: 1\n    period: 1s\n    ids:\n      - id: 12345:example.com\n",
			[]wantProblem{{ofile, 6, "CertificatesPerDomainPerAccount", "want an account number"}}},
		{"duplicate id", "- NewRegistrationsPerIPAddress:\n    burst: 1\n    count: 1\n    period: 1s\n    ids:\n      - id: 10.0.0.2\n      - id: 10.0.0.5\n      - id: 10.0.0.2\n",
			[]wantProblem{{ofile, 8, regs, `duplicate id "10.0.0.2" (line 8): already listed at line 6`}}},
		{"duplicate canonical id across entries", `- NewRegistrationsPerIPAddress:
    burst: 1
    count: 1
    period: 1s
    ids:
      - id: 10.0.0.2
- NewRegistrationsPerIPAddress:
    burst: 2
    count: 2
    period: 1s
    ids:
      - id: ::ffff:10.0.0.2
`, []wantProblem{{ofile, 12, regs, `duplicate id "::ffff:10.0.0.2" (line 12): already listed at line 6, the same id as "10.0.0.2"`}}},
		{"duplicate IPv6 spelled differently", "- NewRegistrationsPerIPAddress:\n    burst: 1\n    count: 1\n    period: 1s\n    ids:\n      - id: 2001:DB8::1\n      - id: 2001:db8:0::1\n",
			[]wantProblem{{ofile, 7, regs, `already listed at line 6, the same id as "2001:DB8::1"`}}},
		{"bad limit", "- NewOrdersPerAccount:\n    burst: 1\n    count: 0\n    period: 1s\n    ids: [{id: 1}]\n",
			[]wantProblem{{ofile, 3, "NewOrdersPerAccount", "count must be greater than 0"}}},
		{"emission interval 0", "- NewOrdersPerAccount:\n    burst: 2\n    count: 2\n    period: 1ns\n    ids: [{id: 1}]\n",
			[]wantProblem{{ofile, 1, "NewOrdersPerAccount", "emission interval is 0"}}},
		{"override not a mapping", "- NewOrdersPerAccount: 5\n",
			[]wantProblem{{ofile, 1, "NewOrdersPerAccount", "an override must be a mapping"}}},
		{"YAML syntax error", "- NewOrdersPerAccount:\n    burst: 1\n    ids: [\n",
			[]wantProblem{{ofile, 3, "", "YAML syntax error: did not find expected node content"}}},
		{"YAML syntax error, a list item out of its list", "- NewOrdersPerAccount:\n    burst: 5\n    count: 5\n    period: 1s\n    ids:\n      - id: 5\n    - id: 6\n",
			[]wantProblem{{ofile, 7, "", "YAML syntax error: did not find expected key"}}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			_, err := Parse(dfile, []byte(testDefaults), ofile, []byte(c.overrides))
			checkProblems(t, err, c.want)
		})
	}
}

// TestConfigDefaultsThatDoNotParse: when the defaults file cannot be read
// as limits at all, its declared names are unknown, so overrides of names
// that are not built in are not reported as unknown; everything that does
// not depend on the declarations is still checked, and the overrides file's
// own syntax errors are still reported.
func TestConfigDefaultsThatDoNotParse(t *testing.T) {
	const syntaxError = "LoginAttemptsPerUser:\n  enum: 101\n  id: [string\n  burst: 5\n"
	const declaredOverride = "- LoginAttemptsPerUser:\n    burst: 10\n    count: 10\n    period: 15m\n    ids: [{id: alice}]\n"
	cases := []struct {
		desc      string
		defaults  string
		overrides string
		want      []wantProblem
	}{
		{"syntax error: an override of a declared name is not called unknown", syntaxError, declaredOverride,
			[]wantProblem{{dfile, 3, "", "YAML syntax error"}}},
		{"not a mapping: the same", "- LoginAttemptsPerUser\n", declaredOverride,
			[]wantProblem{{dfile, 1, "", "the defaults file must be a mapping"}}},
		{"the override's own limit is still checked", syntaxError,
			"- LoginAttemptsPerUser:\n    burst: 0\n    count: 10\n    period: 15m\n    ids: [{id: alice}]\n",
			[]wantProblem{{dfile, 3, "", "YAML syntax error"}, {ofile, 2, "LoginAttemptsPerUser", "burst must be greater than 0"}}},
		{"a built-in name's ids are still checked", syntaxError,
			"- NewOrdersPerAccount:\n    burst: 1\n    count: 1\n    period: 1s\n    ids: [{id: \"007\"}]\n",
			[]wantProblem{{dfile, 3, "", "YAML syntax error"}, {ofile, 5, "NewOrdersPerAccount", "invalid id"}}},
		{"the overrides file's syntax error is still reported", syntaxError, "- LoginAttemptsPerUser:\n    ids: [\n",
			[]wantProblem{{dfile, 3, "", "YAML syntax error"}, {ofile, 2, "", "YAML syntax error"}}},
		{"an empty defaults file declares nothing: unknown names are reported", "", declaredOverride,
			[]wantProblem{{dfile, 0, "", "the defaults file is empty"}, {ofile, 1, "LoginAttemptsPerUser", "unknown limit name"}}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			_, err := Parse(dfile, []byte(c.defaults), ofile, []byte(c.overrides))
			checkProblems(t, err, c.want)
		})
	}
}

// TestConfigReportsEveryProblem checks that a load goes on after a problem:
// several bad limits in the defaults, and the overrides checked against the
// names that did parse, all reported at once, in file order.
func TestConfigReportsEveryProblem(t *testing.T) {
	defaults := `NewOrdersPerAccount:
  burst: 0
  count: 20
  period: 1s
Broken:
  enum: 7
  id: string
  burst: 1
  count: 1
  period: 1s
Good:
  enum: 200
  id: account
  burst: 1
  count: 1
  period: forever
`
	overrides := `- Broken:
    burst: 1
    count: 1
    period: 1s
    ids: [{id: x}]
- Good:
    burst: 1
    count: 1
    period: 1s
    ids:
      - id: "0"
- Missing:
    burst: -1
    count: 1
    period: 1s
    ids: [{id: x}]
`
	_, err := Parse(dfile, []byte(defaults), ofile, []byte(overrides))
	checkProblems(t, err, []wantProblem{
		{dfile, 2, "NewOrdersPerAccount", "burst must be greater than 0"},
		{dfile, 6, "Broken", "enum must be 100 or more"},
		{dfile, 16, "Good", `period "forever" is not a valid duration`},
		{ofile, 1, "Broken", "the limit's declaration in the defaults file has problems"},
		{ofile, 11, "Good", `id "0": invalid id`}, // Good parsed as an account name despite its bad period
		{ofile, 12, "Missing", "unknown limit name"},
		{ofile, 13, "Missing", "burst must be greater than 0"},
	})
	want := strings.Join([]string{
		"defaults.yaml:2: NewOrdersPerAccount: burst must be greater than 0, got 0",
		"defaults.yaml:6: Broken: enum must be 100 or more (1 to 99 are reserved for built-in limits), got 7",
	}, "\n")
	if !strings.HasPrefix(err.Error(), want+"\n") || strings.Count(err.Error(), "\n") != 6 {
		t.Errorf("Error() =\n%s\nwant 7 lines starting with\n%s", err, want)
	}
}

// TestConfigProblemString pins the "FILE:LINE: LIMIT: MESSAGE" format.
func TestConfigProblemString(t *testing.T) {
	cases := []struct {
		p    Problem
		want string
	}{
		{Problem{"d.yaml", 3, "NewOrdersPerAccount", "missing count"}, "d.yaml:3: NewOrdersPerAccount: missing count"},
		{Problem{"d.yaml", 0, "", "the defaults file is empty"}, "d.yaml: the defaults file is empty"},
		{Problem{"o.yaml", 7, "", "YAML syntax error: x"}, "o.yaml:7: YAML syntax error: x"},
		{Problem{"o.yaml", 0, "X", "m"}, "o.yaml: X: m"},
	}
	for _, c := range cases {
		if got := c.p.String(); got != c.want {
			t.Errorf("%+v.String() = %q; want %q", c.p, got, c.want)
		}
	}
	if got := (&Error{}).Error(); got != "invalid configuration" {
		t.Errorf("empty Error.Error() = %q", got)
	}
}

// Problems come file by file, defaults first, and in line order within a
// file, though they are found in passes: here the unknown field of Bar
// (line 8) is found before Bar's name is known to be undeclared (line 5),
// and a burst out of range (line 3) before the missing period (reported
// at the limit's own line, 2).
func TestProblemsInLineOrder(t *testing.T) {
	defaults := `
NewOrdersPerAccount:
  burst: 0
  count: 1
Bar:
  burst: 5
  count: 5
  extra: 1
  period: 1m
`
	overrides := `
- NewOrdersPerAccount:
    burst: 1
    count: 1
    period: 1s
    ids:
      - id: "01"
      - id: "7"
      - id: "7"
`
	_, err := Parse(dfile, []byte(defaults), ofile, []byte(overrides))
	checkProblems(t, err, []wantProblem{
		{dfile, 2, "NewOrdersPerAccount", "period"},
		{dfile, 3, "NewOrdersPerAccount", "burst"},
		{dfile, 5, "Bar", "unknown limit name"},
		{dfile, 8, "Bar", "unknown field"},
		{ofile, 7, "NewOrdersPerAccount", "invalid id"},
		{ofile, 9, "NewOrdersPerAccount", "duplicate id"},
	})
}

// bundledConfig parses the limit files shipped in config/.
func bundledConfig(t *testing.T) *ratelimits.Config {
	t.Helper()
	c, err := Parse(bundledDefaults, readFile(t, bundledDefaults), bundledOverrides, readFile(t, bundledOverrides))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const (
	bundledDefaults  = "../config/defaults.yaml"
	bundledOverrides = "../config/overrides.yaml"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
