package configfile

import (
	"slices"
	"strings"
	"testing"

	"github.com/limiter-dev/limiter/envoyapi/descriptors"
	"github.com/limiter-dev/limiter/ratelimits"
)

const xfile = "descriptors.yaml"

// rulesConfig is the configuration the descriptors files below are read
// against: a built-in name, and two declared ones.
func rulesConfig(t *testing.T) *ratelimits.Config {
	t.Helper()
	cfg, err := Parse(dfile, []byte(testDefaults+`APIRequestsPerKey:
  enum: 102
  id: string
  burst: 100
  count: 100
  period: 1s
NewRegistrationsPerIPAddress:
  burst: 10
  count: 10
  period: 3h
`), ofile, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A good file: its domains and rules, in file order, as descriptors.Rules
// matches them; the same keys in two domains, or in another order, are
// different rules, and a built-in name without a default is a limit too.
func TestDescriptorsGoodFile(t *testing.T) {
	const file = `# Envoy's edge proxy.
- domain: edge
  descriptors:
    - keys: [remote_address]
      limit: NewRegistrationsPerIPAddress
    - keys: [api_key, path]
      limit: APIRequestsPerKey
    - keys:
        - path
        - api_key
      limit: LoginAttemptsPerUser
- domain: "internal"
  descriptors:
    - {keys: [remote_address], limit: LimitOverrideRequestsPerIPAddress}
`
	rules, err := ParseDescriptors(xfile, []byte(file), rulesConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := rules.Domains(); !slices.Equal(got, []string{"edge", "internal"}) {
		t.Errorf("Domains() = %q", got)
	}
	wantEdge := []descriptors.Rule{
		{Keys: []string{"remote_address"}, Limit: "NewRegistrationsPerIPAddress"},
		{Keys: []string{"api_key", "path"}, Limit: "APIRequestsPerKey"},
		{Keys: []string{"path", "api_key"}, Limit: "LoginAttemptsPerUser"},
	}
	got := rules.Rules("edge")
	if len(got) != len(wantEdge) {
		t.Fatalf("edge rules = %+v; want %+v", got, wantEdge)
	}
	for i, w := range wantEdge {
		if !slices.Equal(got[i].Keys, w.Keys) || got[i].Limit != w.Limit {
			t.Errorf("edge rule %d = %+v; want %+v", i, got[i], w)
		}
	}
	if limit, ok := rules.Match("internal", 1, func(int) string { return "remote_address" }); !ok || limit != "LimitOverrideRequestsPerIPAddress" {
		t.Errorf("internal remote_address matched %q, %v", limit, ok)
	}
	if rules.Count() != 4 {
		t.Errorf("Count() = %d; want 4", rules.Count())
	}
}

// Nothing, comments, null and [] are a file without rules.
func TestDescriptorsEmptyFile(t *testing.T) {
	for _, data := range []string{"", "# no Envoy here yet\n", "~\n", "[]\n", "---\n"} {
		rules, err := ParseDescriptors(xfile, []byte(data), rulesConfig(t))
		if err != nil || rules == nil || rules.Count() != 0 || len(rules.Domains()) != 0 {
			t.Errorf("%q: %v, %v; want rules without any", data, rules, err)
		}
	}
}

// Each bad file has one kind of mistake, reported at its line; nothing is
// returned.
func TestDescriptorsBadFiles(t *testing.T) {
	const rule = "    - keys: [api_key]\n      limit: APIRequestsPerKey\n"
	const edge = "- domain: edge\n  descriptors:\n" + rule
	cases := []struct {
		desc string
		file string
		want []wantProblem
	}{
		{"a mapping", "edge: []\n",
			[]wantProblem{{xfile, 1, "", "the descriptors file must be a list of domains"}}},
		{"envoyproxy/ratelimit's one domain per file", "domain: edge\ndescriptors:\n  - key: remote_address\n",
			[]wantProblem{{xfile, 1, "", `got a mapping (one file holds every domain: start each with "- ")`}}},
		{"a string", "edge\n",
			[]wantProblem{{xfile, 1, "", `must be a list of domains "- {domain: NAME, descriptors: [{keys: [KEY, ...], limit: LIMIT}, ...]}", got the string "edge"`}}},
		{"an entry that is not a mapping", "- edge\n",
			[]wantProblem{{xfile, 1, "", `each entry must be a mapping with domain and descriptors`}}},
		{"an unknown domain field", edge + "  rules: []\n",
			[]wantProblem{{xfile, 5, "", `unknown field "rules" (allowed: domain, descriptors)`}}},
		{"a domain field twice", edge + "  domain: other\n",
			[]wantProblem{{xfile, 5, "", `duplicate field "domain" (first at line 1)`}}},
		{"no domain", "- descriptors:\n" + rule,
			[]wantProblem{{xfile, 1, "", "missing domain"}}},
		{"an empty domain", "- domain: \"\"\n  descriptors:\n" + rule,
			[]wantProblem{{xfile, 1, "", `domain must be a non-empty string, got the string ""`}}},
		{"a domain without a value", "- domain:\n  descriptors:\n" + rule,
			[]wantProblem{{xfile, 1, "", "domain must be a non-empty string, got no value"}}},
		{"a domain that is a number", "- domain: 42\n  descriptors:\n" + rule,
			[]wantProblem{{xfile, 1, "", "domain must be a non-empty string, got the integer 42"}}},
		{"a domain twice", edge + "- domain: internal\n  descriptors:\n" + rule + "- domain: edge\n  descriptors:\n    - keys: [remote_address]\n      limit: NewRegistrationsPerIPAddress\n",
			[]wantProblem{{xfile, 9, "", `domain "edge" is given twice (first at line 1): put all its descriptors in one entry`}}},
		{"no descriptors", "- domain: edge\n",
			[]wantProblem{{xfile, 1, "", "missing descriptors"}}},
		{"descriptors that are a mapping", "- domain: edge\n  descriptors:\n    keys: [api_key]\n    limit: APIRequestsPerKey\n",
			[]wantProblem{{xfile, 3, "", "descriptors must be a list of {keys, limit}, got a mapping"}}},
		{"no rules", "- domain: edge\n  descriptors: []\n",
			[]wantProblem{{xfile, 2, "", "descriptors is empty: a domain must have at least one rule"}}},
		{"a rule that is not a mapping", "- domain: edge\n  descriptors:\n    - api_key\n",
			[]wantProblem{{xfile, 3, "", `each descriptor must be a mapping {keys: [KEY, ...], limit: LIMIT}, got the string "api_key"`}}},
		{"an unknown rule field", edge + "      comment: partner traffic\n",
			[]wantProblem{{xfile, 5, "", `unknown field "comment" (allowed: keys, limit)`}}},
		{"a rule field twice", edge + "      limit: LoginAttemptsPerUser\n",
			[]wantProblem{{xfile, 5, "", `duplicate field "limit" (first at line 4)`}}},
		{"envoyproxy/ratelimit's rule", "- domain: edge\n  descriptors:\n    - key: remote_address\n      value: 10.0.0.1\n      rate_limit: {unit: second, requests_per_unit: 10}\n      shadow_mode: true\n      detailed_metric: true\n      descriptors: []\n",
			[]wantProblem{
				{xfile, 3, "", "a rule lists all the keys of a descriptor, in order, in keys"},
				{xfile, 3, "", "missing keys"},
				{xfile, 3, "", "missing limit"},
				{xfile, 4, "", "to give one value other numbers, list it as an id in the overrides file"},
				{xfile, 5, "", "set them in the defaults file and name the limit with limit"},
				{xfile, 6, "", "set shadow: true on it in the defaults file"},
				{xfile, 7, "", "there is no detailed_metric"},
				{xfile, 8, "", "rules do not nest"},
			}},
		{"no keys", "- domain: edge\n  descriptors:\n    - limit: APIRequestsPerKey\n",
			[]wantProblem{{xfile, 3, "", "missing keys"}}},
		{"keys that are a string", "- domain: edge\n  descriptors:\n    - keys: api_key\n      limit: APIRequestsPerKey\n",
			[]wantProblem{{xfile, 3, "", `keys must be a list of descriptor entry keys, such as [remote_address] or [api_key, path], got the string "api_key"`}}},
		{"no key", "- domain: edge\n  descriptors:\n    - keys: []\n      limit: APIRequestsPerKey\n",
			[]wantProblem{{xfile, 3, "", "keys is empty"}}},
		{"an empty key", "- domain: edge\n  descriptors:\n    - keys:\n        - api_key\n        - \"\"\n      limit: APIRequestsPerKey\n",
			[]wantProblem{{xfile, 5, "", `each key must be a non-empty string, got the string ""`}}},
		{"more keys than a descriptor is read for", "- domain: edge\n  descriptors:\n    - keys: [" + strings.Repeat("k, ", 64) + "k]\n      limit: APIRequestsPerKey\n",
			[]wantProblem{{xfile, 3, "", "a rule has at most 64 keys, got 65"}}},
		{"a key that is a number", "- domain: edge\n  descriptors:\n    - keys: [api_key, 42]\n      limit: APIRequestsPerKey\n",
			[]wantProblem{{xfile, 3, "", "each key must be a non-empty string, got the integer 42 (quote it)"}}},
		{"a key that is a list", "- domain: edge\n  descriptors:\n    - keys: [[api_key]]\n      limit: APIRequestsPerKey\n",
			[]wantProblem{{xfile, 3, "", "each key must be a non-empty string, got a list"}}},
		{"the same keys twice", edge + "    - keys: [remote_address]\n      limit: NewRegistrationsPerIPAddress\n    - keys:\n        - api_key\n      limit: LoginAttemptsPerUser\n",
			[]wantProblem{{xfile, 7, "", `the keys ["api_key"] are given twice in this domain (first at line 3): only the first rule would ever match`}}},
		{"no limit", "- domain: edge\n  descriptors:\n    - keys: [api_key]\n",
			[]wantProblem{{xfile, 3, "", "missing limit"}}},
		{"a limit that is a list", "- domain: edge\n  descriptors:\n    - keys: [api_key]\n      limit: [APIRequestsPerKey]\n",
			[]wantProblem{{xfile, 4, "", "limit must be a limit name, got a list"}}},
		{"a misspelt limit", "- domain: edge\n  descriptors:\n    - keys: [api_key]\n      limit: ApiRequestsPerKey\n",
			[]wantProblem{{xfile, 4, "ApiRequestsPerKey", "unknown limit name: to add a limit, declare it in the defaults file with an enum (100 or more, unique) and an id kind (ip, ipv6-range, account, domain or string); did you mean APIRequestsPerKey?"}}},
		{"an unknown limit", "- domain: edge\n  descriptors:\n    - keys: [api_key]\n      limit: Mystery\n",
			[]wantProblem{{xfile, 4, "Mystery", "unknown limit name"}}},
		{"a YAML syntax error", "- domain: edge\n  descriptors:\n    - keys: [api_key\n      limit: APIRequestsPerKey\n",
			[]wantProblem{{xfile, 3, "", "YAML syntax error: did not find expected ',' or ']'"}}},
		{"two documents", edge + "---\n" + edge,
			[]wantProblem{{xfile, 5, "", "more than one YAML document"}}},
		{"an alias", "- domain: &d edge\n  descriptors:\n" + rule + "- domain: *d\n  descriptors:\n" + rule,
			[]wantProblem{{xfile, 5, "", `domain "edge" is given twice (first at line 1)`}, {xfile, 7, "", `the keys ["api_key"] are given twice in this domain (first at line 3)`}}},
	}
	cfg := rulesConfig(t)
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			rules, err := ParseDescriptors(xfile, []byte(c.file), cfg)
			if rules != nil {
				t.Errorf("rules %v returned with an error", rules)
			}
			checkProblems(t, err, c.want)
		})
	}
}

// A file with a mistake in every domain reports them all, in line order,
// including a repeat of keys across two entries of one domain.
func TestDescriptorsReportEveryProblem(t *testing.T) {
	const file = `- domain: edge
  descriptors:
    - keys: [remote_address]
      limit: NewRegistrationPerIPAddress
    - keys: [api_key, ""]
      limit: APIRequestsPerKey
- domain: internal
  descriptors: []
- domain: edge
  descriptors:
    - keys: [remote_address]
      limit: Unknown
`
	_, err := ParseDescriptors(xfile, []byte(file), rulesConfig(t))
	checkProblems(t, err, []wantProblem{
		{xfile, 4, "NewRegistrationPerIPAddress", "did you mean NewRegistrationsPerIPAddress?"},
		{xfile, 5, "", "each key must be a non-empty string"},
		{xfile, 8, "", "descriptors is empty"},
		{xfile, 9, "", `domain "edge" is given twice (first at line 1)`},
		{xfile, 11, "", `the keys ["remote_address"] are given twice in this domain (first at line 3)`},
		{xfile, 12, "Unknown", "unknown limit name"},
	})
}

// Without a configuration (the limit files did not load), every problem
// but the limit names is still reported, and a file whose only problem
// would be its names loads.
func TestDescriptorsWithoutConfig(t *testing.T) {
	_, err := ParseDescriptors(xfile, []byte("- domain: edge\n  descriptors:\n    - keys: []\n      limit: Mystery\n"), nil)
	checkProblems(t, err, []wantProblem{{xfile, 3, "", "keys is empty"}})

	rules, err := ParseDescriptors(xfile, []byte("- domain: edge\n  descriptors:\n    - keys: [k]\n      limit: Mystery\n"), nil)
	if err != nil || rules.Count() != 1 {
		t.Errorf("names unchecked: %v, %v; want one rule", rules, err)
	}
}

// The bundled descriptors file loads against the bundled limits, and each
// rule can produce valid ids: a rule of an ip limit has one key (the
// address), and the shadow limit it shows is one.
func TestDescriptorsBundledFile(t *testing.T) {
	cfg := bundledConfig(t)
	rules, err := ParseDescriptors("../config/descriptors.yaml", readFile(t, "../config/descriptors.yaml"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := rules.Domains(); !slices.Equal(got, []string{"edge", "mesh", "signup"}) || rules.Count() < 5 {
		t.Fatalf("Domains() = %q, Count() = %d", got, rules.Count())
	}
	for _, d := range rules.Domains() {
		for _, r := range rules.Rules(d) {
			info, ok := cfg.Lookup(r.Limit)
			if !ok {
				t.Fatalf("%s: %s is not a limit", d, r.Limit)
			}
			if _, has := cfg.Default(info.Name); !has {
				t.Errorf("%s: %s has no default: every descriptor it matches would be unlimited", d, r.Limit)
			}
			if (info.Kind == ratelimits.KindIP || info.Kind == ratelimits.KindAccount) && len(r.Keys) != 1 {
				t.Errorf("%s: %s (id kind %s) joins %d values: the ids could never be valid", d, r.Limit, info.Kind, len(r.Keys))
			}
		}
	}
	info, _ := cfg.Lookup("SearchRequestsPerKey")
	if limit, ok := rules.Match("edge", 2, func(i int) string { return []string{"api_key", "endpoint"}[i] }); !ok || limit != info.Limit || !cfg.Shadow(info.Name) {
		t.Errorf("edge [api_key endpoint] = %q, %v; want the shadow limit SearchRequestsPerKey (shadow %v)", limit, ok, cfg.Shadow(info.Name))
	}
}

// A limit may be named by rules of one key and of several, in any domain:
// they count in its buckets alike, as HTTP callers and descriptors do.
func TestDescriptorsShareALimitAcrossArities(t *testing.T) {
	const mixed = "- domain: edge\n  descriptors:\n    - keys: [tenant]\n      limit: LoginAttemptsPerUser\n- domain: mesh\n  descriptors:\n    - keys: [tenant, user]\n      limit: LoginAttemptsPerUser\n    - keys: [team, user]\n      limit: LoginAttemptsPerUser\n"
	if rules, err := ParseDescriptors(xfile, []byte(mixed), rulesConfig(t)); err != nil || rules.Count() != 3 {
		t.Fatalf("ParseDescriptors = %v, %v; want the 3 rules loaded", rules, err)
	}
}
