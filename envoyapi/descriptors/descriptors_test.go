package descriptors_test

import (
	"errors"
	"testing"

	"github.com/limiter-dev/limiter/envoyapi/descriptors"
)

func match(r *descriptors.Rules, domain string, keys ...string) (string, bool) {
	return r.Match(domain, len(keys), func(i int) string { return keys[i] })
}

// A descriptor matches a rule of its domain when its keys are exactly the
// rule's, in order; anything else is unlimited.
func TestMatch(t *testing.T) {
	r, err := descriptors.New([]descriptors.Domain{
		{Name: "edge", Rules: []descriptors.Rule{
			{Keys: []string{"remote_address"}, Limit: "PerIP"},
			{Keys: []string{"api_key", "path"}, Limit: "PerKeyPath"},
			{Keys: []string{"api_key"}, Limit: "PerKey"},
		}},
		{Name: "internal", Rules: []descriptors.Rule{{Keys: []string{"remote_address"}, Limit: "Internal"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		domain string
		keys   []string
		want   string
	}{
		{"edge", []string{"remote_address"}, "PerIP"},
		{"edge", []string{"api_key", "path"}, "PerKeyPath"},
		{"edge", []string{"api_key"}, "PerKey"},
		{"edge", []string{"path", "api_key"}, ""}, // order matters
		{"edge", []string{"api_key", "path", "x"}, ""},
		{"edge", nil, ""},
		{"internal", []string{"remote_address"}, "Internal"},
		{"other", []string{"remote_address"}, ""},
	} {
		got, ok := match(r, tc.domain, tc.keys...)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s %q: %q, %v; want %q", tc.domain, tc.keys, got, ok, tc.want)
		}
	}
	if !r.HasDomain("edge") || r.HasDomain("other") || r.Count() != 4 {
		t.Errorf("HasDomain/Count wrong: %v %v %d", r.HasDomain("edge"), r.HasDomain("other"), r.Count())
	}
	var none *descriptors.Rules
	if _, ok := match(none, "edge", "remote_address"); ok {
		t.Error("nil rules matched")
	}
}

func TestNewRefuses(t *testing.T) {
	rule := descriptors.Rule{Keys: []string{"k"}, Limit: "L"}
	for name, domains := range map[string][]descriptors.Domain{
		"an unnamed domain":   {{Rules: []descriptors.Rule{rule}}},
		"a domain twice":      {{Name: "a", Rules: []descriptors.Rule{rule}}, {Name: "a", Rules: []descriptors.Rule{rule}}},
		"no keys":             {{Name: "a", Rules: []descriptors.Rule{{Limit: "L"}}}},
		"an empty key":        {{Name: "a", Rules: []descriptors.Rule{{Keys: []string{"k", ""}, Limit: "L"}}}},
		"no limit":            {{Name: "a", Rules: []descriptors.Rule{{Keys: []string{"k"}}}}},
		"a key list repeated": {{Name: "a", Rules: []descriptors.Rule{rule, {Keys: []string{"k"}, Limit: "M"}}}},
	} {
		if _, err := descriptors.New(domains); !errors.Is(err, descriptors.ErrInvalidRules) {
			t.Errorf("%s: %v, want ErrInvalidRules", name, err)
		}
	}
}
