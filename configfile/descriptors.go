package configfile

import (
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/limiter-dev/limiter/envoyapi/descriptors"
	"github.com/limiter-dev/limiter/ratelimits"
)

// The fields of a domain of the descriptors file, and of one of its rules.
var (
	domainFields     = []string{"domain", "descriptors"}
	descriptorFields = []string{"keys", "limit"}
	// envoyRatelimitFields are fields of envoyproxy/ratelimit's
	// configuration that an operator moving over is likely to write in a
	// rule, each with where its meaning went instead.
	envoyRatelimitFields = map[string]string{
		"key":             "a rule lists all the keys of a descriptor, in order, in keys (keys: [a, b]); there is no key field",
		"value":           "a rule matches keys, never values: to give one value other numbers, list it as an id in the overrides file",
		"descriptors":     "rules do not nest: list every key of the descriptor, outermost first, in one rule's keys",
		"rate_limit":      "the numbers belong to the limit: set them in the defaults file and name the limit with limit",
		"shadow_mode":     "shadow mode belongs to the limit: set shadow: true on it in the defaults file",
		"detailed_metric": "metrics are per limit name (limiter_decisions_total), never per id; there is no detailed_metric",
	}
)

// descriptorsShape reminds the operator of the descriptors file's format.
const descriptorsShape = `"- {domain: NAME, descriptors: [{keys: [KEY, ...], limit: LIMIT}, ...]}"`

// ParseDescriptors parses the contents of the descriptors file, which maps
// the descriptors of Envoy's rate-limit requests to limits; file is only
// used in problem messages. The file is a list of domains, each a
// domain name and its rules, each rule the exact keys of a descriptor and
// the limit that counts it:
//
//	# descriptors.yaml
//	- domain: edge
//	  descriptors:
//	    - keys: [remote_address]
//	      limit: RequestsPerClientIP
//
// An empty file (or comments only, null, or []) means no rules, as does no
// file: a deployment without Envoy needs none. Every rule's
// limit must be a name cfg knows: a rule naming an unknown limit could
// never count what it matches. A nil cfg checks everything else, for a
// caller whose limit files did not load and who still wants this file's
// own problems; the rules returned then name limits no one checked.
func ParseDescriptors(file string, data []byte, cfg *ratelimits.Config) (*descriptors.Rules, error) {
	l := newLoader()
	if cfg != nil {
		for _, n := range cfg.Names() {
			l.names[n.Limit] = n // for the "did you mean" of an unknown name
		}
	}
	p := descriptorsParser{l: l, file: file, cfg: cfg, domains: map[string]*domainUse{}}
	root, ok := l.parseDocument(file, data)
	if ok && root != nil && !isNull(root) {
		p.parseRoot(root)
	}
	if len(l.problems) > 0 {
		return nil, problemsError(file, l.problems)
	}
	rules, err := descriptors.New(p.parsed)
	if err != nil {
		// The parser has refused everything New would, each problem at its
		// line: this is the parser's mistake, reported rather than lost.
		return nil, &Error{Problems: []Problem{{File: file, Message: err.Error()}}}
	}
	return rules, nil
}

// descriptorsParser walks one descriptors file.
type descriptorsParser struct {
	l    *loader
	file string
	cfg  *ratelimits.Config // nil: limit names are not checked

	domains map[string]*domainUse // every domain named so far
	parsed  []descriptors.Domain  // the domains without problems, in file order
}

// domainUse is where a domain was first named, and the key lists of its
// rules so far, each with the line it was first given at.
type domainUse struct {
	line int
	keys map[string]int
}

// scope returns the scope problems of the file are reported in; limit is
// the limit name concerned, if any.
func (p *descriptorsParser) scope(limit string) scope {
	return scope{l: p.l, file: p.file, limit: limit}
}

func (p *descriptorsParser) parseRoot(root *yaml.Node) {
	if root.Kind != yaml.SequenceNode {
		hint := ""
		if root.Kind == yaml.MappingNode && hasKey(root, "domain") {
			// envoyproxy/ratelimit's files are one domain each, a mapping.
			hint = ` (one file holds every domain: start each with "- ")`
		}
		p.scope("").add(root.Line, "the descriptors file must be a list of domains %s, got %s%s", descriptorsShape, describe(root), hint)
		return
	}
	for _, item := range root.Content {
		p.parseDomain(item)
	}
}

// parseDomain reads one {domain, descriptors} entry.
func (p *descriptorsParser) parseDomain(item *yaml.Node) {
	s := p.scope("")
	if item.Kind != yaml.MappingNode {
		s.add(item.Line, "each entry must be a mapping with domain and descriptors %s, got %s", descriptorsShape, describe(item))
		return
	}
	fs := s.fields(item, nil, domainFields...)
	name, use, okName := p.domainName(item, fs)
	rules, okRules := p.rules(item, fs, use)
	if okName && okRules {
		p.parsed = append(p.parsed, descriptors.Domain{Name: name, Rules: rules})
	}
}

// domainName reads the domain's name and refuses one named before. The
// domainUse returned holds the key lists of every entry of that name, so
// that a rule repeated across two entries of one domain is reported too;
// it is a throwaway one when the name could not be read.
func (p *descriptorsParser) domainName(item *yaml.Node, fs map[string]field) (string, *domainUse, bool) {
	s := p.scope("")
	throwaway := &domainUse{keys: map[string]int{}}
	f, has := fs["domain"]
	switch {
	case !has:
		s.add(item.Line, "missing domain: each entry names the domain Envoy's rate-limit filter sends")
		return "", throwaway, false
	case !isString(f.val) || f.val.Value == "":
		s.add(f.val.Line, "domain must be a non-empty string, got %s", describe(f.val))
		return "", throwaway, false
	}
	name := f.val.Value
	if first, dup := p.domains[name]; dup {
		s.add(f.val.Line, "domain %s is given twice (first at line %d): put all its descriptors in one entry", quoteShort(name), first.line)
		return name, first, false
	}
	use := &domainUse{line: f.val.Line, keys: map[string]int{}}
	p.domains[name] = use
	return name, use, true
}

// rules reads a domain's descriptors: a non-empty list of rules.
func (p *descriptorsParser) rules(item *yaml.Node, fs map[string]field, use *domainUse) ([]descriptors.Rule, bool) {
	s := p.scope("")
	items, ok := s.list(fs, "descriptors", item.Line, "missing descriptors: a domain lists its rules, each {keys, limit}",
		"a list of {keys, limit}", "a domain must have at least one rule (leave out a domain without rules)")
	if !ok {
		return nil, false
	}
	rules := make([]descriptors.Rule, 0, len(items))
	for _, n := range items {
		if rule, good := p.rule(n, use); good {
			rules = append(rules, rule)
		} else {
			ok = false
		}
	}
	return rules, ok
}

// rule reads one {keys, limit} rule.
func (p *descriptorsParser) rule(n *yaml.Node, use *domainUse) (descriptors.Rule, bool) {
	s := p.scope("")
	if n.Kind != yaml.MappingNode {
		s.add(n.Line, "each descriptor must be a mapping {keys: [KEY, ...], limit: LIMIT}, got %s", describe(n))
		return descriptors.Rule{}, false
	}
	fs := s.fields(n, envoyRatelimitFields, descriptorFields...)
	keys, okKeys := p.keys(n, fs, use)
	limit, okLimit := p.limit(n, fs)
	if okLimit && p.concurrency(limit) {
		p.scope(limit).add(n.Line, "a descriptor rule cannot name a concurrency limit: Envoy never releases what a request acquired, so every slot would stay held until its lease expired")
		okLimit = false
	}
	if !okKeys || !okLimit {
		return descriptors.Rule{}, false
	}
	return descriptors.Rule{Keys: keys, Limit: limit}, true
}

// keys reads a rule's keys, a non-empty list of non-empty strings, and
// refuses a list its domain already has: the later rule could never match.
func (p *descriptorsParser) keys(n *yaml.Node, fs map[string]field, use *domainUse) ([]string, bool) {
	s := p.scope("")
	items, ok := s.list(fs, "keys", n.Line, "missing keys: the keys of the descriptor entries this rule matches, in order",
		"a list of descriptor entry keys, such as [remote_address] or [api_key, path]", "a rule matches at least one descriptor entry")
	if !ok {
		return nil, false
	}
	f := fs["keys"]
	keys := make([]string, 0, len(items))
	for _, k := range items {
		if !isString(k) || k.Value == "" {
			s.add(k.Line, "each key must be a non-empty string, got %s", describeKey(k))
			ok = false
			continue
		}
		keys = append(keys, k.Value)
	}
	if !ok {
		return nil, false
	}
	if len(keys) > descriptors.MaxKeys {
		s.add(f.key.Line, "a rule has at most %d keys, got %d: a descriptor of more entries is not read that far", descriptors.MaxKeys, len(keys))
		return nil, false
	}
	id := keyListID(keys)
	if first, dup := use.keys[id]; dup {
		s.add(f.key.Line, "the keys %s are given twice in this domain (first at line %d): only the first rule would ever match", formatKeys(keys), first)
		return nil, false
	}
	use.keys[id] = f.key.Line
	return keys, true
}

// limit reads a rule's limit, a name cfg knows.
func (p *descriptorsParser) limit(n *yaml.Node, fs map[string]field) (string, bool) {
	f, has := fs["limit"]
	switch {
	case !has:
		p.scope("").add(n.Line, "missing limit: the name of the limit, from the defaults file or built in, that counts these descriptors")
		return "", false
	case !isString(f.val) || f.val.Value == "":
		p.scope("").add(f.val.Line, "limit must be a limit name, got %s", describe(f.val))
		return "", false
	}
	name := f.val.Value
	if p.cfg == nil {
		return name, true
	}
	if _, known := p.cfg.Lookup(name); !known {
		p.scope(name).add(f.val.Line, "%s", p.l.unknownName(name))
		return "", false
	}
	return name, true
}

// describeKey is describe for a key, with the advice to quote a scalar
// that YAML read as something other than a string.
func describeKey(k *yaml.Node) string {
	if k.Kind == yaml.ScalarNode && !isNull(k) && !isString(k) {
		return describe(k) + " (quote it)"
	}
	return describe(k)
}

// keyListID identifies a list of keys unambiguously, whatever they hold.
func keyListID(keys []string) string {
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = strconv.Quote(k)
	}
	return strings.Join(quoted, ",")
}

// formatKeys writes a list of keys as the file would: [api_key, path].
func formatKeys(keys []string) string {
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = quoteShort(k)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// hasKey reports whether mapping m has the plain key k.
func hasKey(m *yaml.Node, k string) bool {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if isString(m.Content[i]) && m.Content[i].Value == k {
			return true
		}
	}
	return false
}

// concurrency reports whether limit, a name cfg knows, is a concurrency
// limit, which neither front end of the rules files can release.
func (p *descriptorsParser) concurrency(limit string) bool {
	return isConcurrency(p.cfg, limit)
}

// isConcurrency reports whether cfg (nil: nothing known) counts limit
// with leases.
func isConcurrency(cfg *ratelimits.Config, limit string) bool {
	if cfg == nil {
		return false
	}
	info, ok := cfg.Lookup(limit)
	return ok && cfg.Algorithm(info.Name) == ratelimits.Concurrency
}
