// Package descriptors maps the descriptors of Envoy's rate-limit requests
// to limits: per domain, a list of rules, each an exact list of descriptor
// entry keys and the limit name that counts such a descriptor. It is pure
// data; configfile loads it from the rules file, and envoyapi
// matches requests against it.
package descriptors

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Rule maps a descriptor whose entries' keys are exactly Keys, in order,
// to the limit named Limit; the subscriber id is the entries' values
// as JoinValues joins them.
type Rule struct {
	Keys  []string
	Limit string
}

// MaxKeys is the most keys a rule has. Envoy's descriptors have a
// handful of entries, one per action of a rate_limits entry; the bound
// lets a request's decoding stop reading a descriptor's entries past it,
// since no rule could match it (see envoyapi's request codec).
const MaxKeys = 64

// Domain is the rules of one domain, the first matching one winning.
type Domain struct {
	Name  string
	Rules []Rule
}

// Rules is an immutable set of domains. The zero value and nil have no
// rules: every descriptor is unlimited.
type Rules struct {
	domains map[string][]Rule
}

// ErrInvalidRules wraps every problem New finds.
var ErrInvalidRules = errors.New("invalid descriptor rules")

// New checks domains and returns their rules: every domain named once,
// every rule with one to MaxKeys keys, no empty key, a limit name,
// and no key list twice in one domain (the second could never match).
// Whether each limit exists is the loader's to check against the limits
// in use.
func New(domains []Domain) (*Rules, error) {
	r := &Rules{domains: make(map[string][]Rule, len(domains))}
	for _, d := range domains {
		if d.Name == "" {
			return nil, fmt.Errorf("%w: a domain without a name", ErrInvalidRules)
		}
		if _, dup := r.domains[d.Name]; dup {
			return nil, fmt.Errorf("%w: domain %q is given twice", ErrInvalidRules, d.Name)
		}
		rules := make([]Rule, 0, len(d.Rules))
		for i, rule := range d.Rules {
			switch {
			case len(rule.Keys) == 0:
				return nil, fmt.Errorf("%w: domain %q, rule %d: no keys", ErrInvalidRules, d.Name, i+1)
			case len(rule.Keys) > MaxKeys:
				return nil, fmt.Errorf("%w: domain %q, rule %d: %d keys, more than %d", ErrInvalidRules, d.Name, i+1, len(rule.Keys), MaxKeys)
			case slices.Contains(rule.Keys, ""):
				return nil, fmt.Errorf("%w: domain %q, rule %d: an empty key", ErrInvalidRules, d.Name, i+1)
			case rule.Limit == "":
				return nil, fmt.Errorf("%w: domain %q, rule %d: no limit", ErrInvalidRules, d.Name, i+1)
			}
			for _, earlier := range rules {
				if slices.Equal(earlier.Keys, rule.Keys) {
					return nil, fmt.Errorf("%w: domain %q, rule %d: the keys %q are given twice", ErrInvalidRules, d.Name, i+1, rule.Keys)
				}
			}
			rules = append(rules, Rule{Keys: slices.Clone(rule.Keys), Limit: rule.Limit})
		}
		r.domains[d.Name] = rules
	}
	return r, nil
}

// Match returns the limit of the first rule of domain whose keys are
// exactly n keys, key(0) to key(n-1), and false when none is (the
// descriptor is then unlimited). key lets a caller match the entries of a
// request without copying their keys.
func (r *Rules) Match(domain string, n int, key func(i int) string) (string, bool) {
	if r == nil {
		return "", false
	}
	for _, rule := range r.domains[domain] {
		if len(rule.Keys) != n {
			continue
		}
		matched := true
		for i, k := range rule.Keys {
			if key(i) != k {
				matched = false
				break
			}
		}
		if matched {
			return rule.Limit, true
		}
	}
	return "", false
}

// HasDomain reports whether domain has rules.
func (r *Rules) HasDomain(domain string) bool {
	if r == nil {
		return false
	}
	_, ok := r.domains[domain]
	return ok
}

// Domains returns the names of the domains, sorted.
func (r *Rules) Domains() []string {
	if r == nil {
		return nil
	}
	names := make([]string, 0, len(r.domains))
	for name := range r.domains {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Rules returns a copy of the rules of domain, in order.
func (r *Rules) Rules(domain string) []Rule {
	if r == nil {
		return nil
	}
	out := make([]Rule, len(r.domains[domain]))
	for i, rule := range r.domains[domain] {
		out[i] = Rule{Keys: slices.Clone(rule.Keys), Limit: rule.Limit}
	}
	return out
}

// Count returns how many rules there are in all.
func (r *Rules) Count() int {
	if r == nil {
		return 0
	}
	n := 0
	for _, rules := range r.domains {
		n += len(rules)
	}
	return n
}

// JoinValues returns the subscriber id of a matched descriptor of n
// entries whose i-th value is value(i): the values joined with ':', as
// they are (one value is the id itself). A value may hold ':' too, so
// (tenant:alice, x) and (tenant, alice:x) are one id, and one bucket: in
// one request, two such descriptors of a limit are a duplicate bucket.
// value lets a caller join the values of a request without copying them.
func JoinValues(n int, value func(i int) string) string {
	if n == 1 {
		return value(0)
	}
	size := n - 1
	for i := range n {
		size += len(value(i))
	}
	var b strings.Builder
	b.Grow(size)
	for i := range n {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(value(i))
	}
	return b.String()
}
