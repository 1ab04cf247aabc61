package configfile

import (
	"fmt"
	"net/netip"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/limiter-dev/limiter/forwardauth"
	"github.com/limiter-dev/limiter/ratelimits"
)

// The fields of the forward-auth rules file, of a rule, and of one of a
// rule's limits.
var (
	forwardAuthFields      = []string{"trusted_proxies", "rules"}
	forwardAuthRuleFields  = []string{"limits", "cost", "missing", "deny_status", "expose"}
	forwardAuthLimitFields = []string{"limit", "id"}
	// forwardAuthRuleMisplaced and forwardAuthLimitMisplaced are fields
	// written where they do not belong, each with where they go.
	forwardAuthRuleMisplaced = map[string]string{
		"limit":  "a rule lists its limits under limits: [{limit: NAME, id: SOURCE}, ...]",
		"id":     "each limit of a rule has its own id source: limits: [{limit: NAME, id: SOURCE}, ...]",
		"status": "the status of a denial is deny_status",
	}
	forwardAuthLimitMisplaced = map[string]string{
		"source":      "the id source is given as id, e.g. id: header:X-Api-Key",
		"cost":        "cost belongs to the rule, next to limits",
		"missing":     "missing belongs to the rule, next to limits",
		"deny_status": "deny_status belongs to the rule, next to limits",
		"expose":      "expose belongs to the rule, next to limits",
	}
)

// forwardAuthShape reminds the operator of the rules file's format.
const forwardAuthShape = "{trusted_proxies: [CIDR, ...], rules: {NAME: {limits: [{limit: LIMIT, id: SOURCE}, ...], cost: N, missing: deny|allow|client_ip, deny_status: 4xx, expose: deciding|none|all}}}"

// ParseForwardAuth parses the contents of the forward-auth rules file,
// which says what the reverse proxies' forward-auth calls count; file is
// only used in problem messages:
//
//	# forward-auth.yaml
//	trusted_proxies: [127.0.0.1/32, "::1/128"]
//	rules:
//	  api:
//	    limits:
//	      - limit: APIRequestsPerKey
//	        id: header:X-Api-Key
//	    cost: 1          # optional, default 1
//	    missing: deny    # deny | allow | client_ip; optional, default deny
//	    deny_status: 429 # optional, default 429
//	    expose: deciding # deciding | none | all; optional, default deciding
//
// An empty file (or comments only, or null) means no rules, as does no file
// (a deployment without a proxy in front needs none), and so do the
// explicit empty forms {}, "rules: {}" and [], which a reload accepts
// where it refuses a file that went blank (see Presence). A mapping with
// other fields and no rules, or "rules:" left null, means no rules too,
// but a reload refuses it while rules are in use (ForwardAuthOmitsRules). Every limit
// must be a name cfg knows, and its id source one that can give ids of
// the name's kind: client_ip only for names whose ids can be addresses,
// and a constant must be a valid id. A nil cfg checks everything else, for
// a caller whose limit files did not load.
func ParseForwardAuth(file string, data []byte, cfg *ratelimits.Config) (*forwardauth.Rules, error) {
	l := newLoader()
	if cfg != nil {
		for _, n := range cfg.Names() {
			l.names[n.Limit] = n
		}
	}
	p := forwardAuthParser{l: l, file: file, cfg: cfg}
	root, ok := l.parseDocument(file, data)
	if ok && root != nil && !isNull(root) {
		p.parseRoot(root)
	}
	if len(l.problems) > 0 {
		return nil, problemsError(file, l.problems)
	}
	var opts []forwardauth.Option
	if p.trustUnix {
		opts = append(opts, forwardauth.TrustUnixSockets())
	}
	rules, err := forwardauth.New(p.trusted, p.rules, opts...)
	if err != nil {
		// The parser has refused everything New would, each problem at its
		// line: this is the parser's mistake, reported rather than lost.
		return nil, &Error{Problems: []Problem{{File: file, Message: err.Error()}}}
	}
	return rules, nil
}

// forwardAuthParser walks one forward-auth rules file.
type forwardAuthParser struct {
	l    *loader
	file string
	cfg  *ratelimits.Config // nil: limit names are not checked

	trusted   []netip.Prefix
	trustUnix bool               // "unix" in trusted_proxies
	rules     []forwardauth.Rule // the rules without problems, in file order
}

func (p *forwardAuthParser) scope(limit string) scope {
	return scope{l: p.l, file: p.file, limit: limit}
}

func (p *forwardAuthParser) parseRoot(root *yaml.Node) {
	s := p.scope("")
	if root.Kind == yaml.SequenceNode && len(root.Content) == 0 {
		// [], the empty form the other files share, removes every rule
		// as {} and "rules: {}" do.
		return
	}
	if root.Kind != yaml.MappingNode {
		s.add(root.Line, "the forward-auth file must be a mapping %s, got %s", forwardAuthShape, describe(root))
		return
	}
	fs := s.fields(root, nil, forwardAuthFields...)
	if f, has := fs["trusted_proxies"]; has {
		p.trustedProxies(f.val)
	}
	if f, has := fs["rules"]; has {
		p.parseRules(f.val)
	}
}

// ForwardAuthOmitsRules reports whether a forward-auth file's data is a
// mapping with fields but no rules: no rules key, or "rules:" left null,
// as in a file cut short after trusted_proxies. It means no rules, but it
// is none of the explicit empty forms ({}, [], "rules: {}"), which alone
// may remove rules in use: a reload refuses it then.
func ForwardAuthOmitsRules(data []byte) bool {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) != 1 {
		return false
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode || len(root.Content) == 0 {
		return false
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "rules" {
			return isNull(root.Content[i+1])
		}
	}
	return true
}

// trustedProxies reads the list of proxies whose forwarding headers are
// believed: CIDR prefixes, or bare addresses for one host each.
func (p *forwardAuthParser) trustedProxies(n *yaml.Node) {
	s := p.scope("")
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		s.add(n.Line, "trusted_proxies must be a list of CIDR prefixes such as [127.0.0.1/32, \"::1/128\", 10.0.0.0/8], got %s", describe(n))
		return
	}
	for _, item := range n.Content {
		if !isString(item) {
			s.add(item.Line, "each trusted proxy must be a CIDR prefix such as 10.0.0.0/8, an address, or unix, got %s", describe(item))
			continue
		}
		if item.Value == "unix" {
			// Calls over the Unix socket of --listen unix:PATH.
			p.trustUnix = true
			continue
		}
		prefix, err := parseTrustedProxy(item.Value)
		if err != nil {
			s.add(item.Line, "trusted proxy %s: %v", quoteShort(item.Value), err)
			continue
		}
		p.trusted = append(p.trusted, prefix)
	}
}

// parseTrustedProxy reads a CIDR prefix, or an address as the prefix of
// that one host. A prefix with bits set past its length (10.0.0.1/8) is
// refused: whether the operator meant the host or the network cannot be
// told.
func parseTrustedProxy(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("an address with a zone cannot be trusted")
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	prefix, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not a CIDR prefix (such as 10.0.0.0/8 or \"::1/128\"), an address, or unix (calls over the Unix socket of --listen unix:PATH)")
	}
	if prefix.Masked() != prefix {
		return netip.Prefix{}, fmt.Errorf("has bits set after its first %d: did you mean %s, or %s alone?", prefix.Bits(), prefix.Masked(), prefix.Addr())
	}
	if prefix.Addr().Is4In6() && prefix.Bits() >= 96 {
		prefix = netip.PrefixFrom(prefix.Addr().Unmap(), prefix.Bits()-96)
	}
	return prefix, nil
}

// parseRules reads the rules mapping, rule name to rule.
func (p *forwardAuthParser) parseRules(n *yaml.Node) {
	s := p.scope("")
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		s.add(n.Line, "rules must be a mapping of rule names to rules, got %s", describe(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !isString(k) || !forwardauth.ValidName(k.Value) {
			s.add(k.Line, "rule name %s: want 1 to %d letters, digits, '-', '_' or '.' (it is the last segment of /v1/forward-auth/{rule})", describeKey(k), forwardauth.MaxNameLength)
			p.rule(k, v) // for the problems of its body, reported at once
			continue
		}
		if first, dup := seen[k.Value]; dup {
			s.add(k.Line, "rule %s is given twice (first at line %d)", quoteShort(k.Value), first)
			p.rule(k, v) // for the problems of its body, reported at once
			continue
		}
		seen[k.Value] = k.Line
		if rule, ok := p.rule(k, v); ok {
			p.rules = append(p.rules, rule)
		}
	}
}

// rule reads one rule; key is its name's node.
func (p *forwardAuthParser) rule(key, n *yaml.Node) (forwardauth.Rule, bool) {
	s := p.scope("")
	if n.Kind != yaml.MappingNode {
		s.add(n.Line, "rule %s must be a mapping {limits: [...], cost, missing, deny_status, expose}, got %s", quoteShort(key.Value), describe(n))
		return forwardauth.Rule{}, false
	}
	fs := s.fields(n, forwardAuthRuleMisplaced, forwardAuthRuleFields...)
	rule := forwardauth.Rule{Name: key.Value, Cost: 1, Missing: forwardauth.MissingDeny, DenyStatus: forwardauth.DefaultDenyStatus}
	ok := true
	if f, has := fs["cost"]; has {
		if c, good := s.positiveValue(f.val, "cost"); good {
			rule.Cost = c
		} else {
			ok = false
		}
	}
	if f, has := fs["missing"]; has {
		m, good := forwardauth.ParseMissing(f.val.Value)
		if !isString(f.val) || !good {
			s.add(f.val.Line, "missing must be deny, allow or client_ip, got %s", describe(f.val))
			ok = false
		} else {
			rule.Missing = m
		}
	}
	if f, has := fs["deny_status"]; has {
		st, err := strconv.Atoi(f.val.Value)
		if f.val.Kind != yaml.ScalarNode || f.val.Tag != "!!int" || err != nil || st < 400 || st > 499 {
			s.add(f.val.Line, "deny_status must be a 4xx status such as 429 (Traefik, Caddy) or 403 (nginx, whose auth_request passes on only 401 and 403), got %s", describe(f.val))
			ok = false
		} else {
			rule.DenyStatus = st
		}
	}
	if f, has := fs["expose"]; has {
		e, good := forwardauth.ParseExpose(f.val.Value)
		if !isString(f.val) || !good {
			s.add(f.val.Line, "expose must be deciding (the deciding limit only), none (nothing but Retry-After on a refusal) or all (every decision, for debugging), got %s", describe(f.val))
			ok = false
		} else {
			rule.Expose = e
		}
	}
	items, listed := s.list(fs, "limits", n.Line,
		fmt.Sprintf("rule %s: missing limits: the limits that count its requests, each {limit: NAME, id: SOURCE}", quoteShort(key.Value)),
		"a list of {limit: NAME, id: SOURCE}", "a rule counts its requests against at least one limit")
	if !listed {
		return forwardauth.Rule{}, false
	}
	firstLine := map[string]int{}
	for _, item := range items {
		e, line, good := p.entry(item)
		if !good {
			ok = false
			continue
		}
		if first, dup := firstLine[e.Limit]; dup {
			p.scope(e.Limit).add(line, "the limit is given twice in this rule (first at line %d): one request would spend the same bucket twice", first)
			ok = false
			continue
		}
		firstLine[e.Limit] = line
		rule.Limits = append(rule.Limits, e)
	}
	// The limits that parsed are checked against the rest of the rule
	// even when something else is wrong, so that one run reports every
	// problem; a cost or missing action that did not parse is still its
	// default here, which adds no problem of its own.
	fits := p.fits(key, rule)
	if !ok {
		return forwardauth.Rule{}, false
	}
	return rule, fits
}

// entry reads one {limit, id} of a rule, and the line of its limit.
func (p *forwardAuthParser) entry(n *yaml.Node) (forwardauth.Entry, int, bool) {
	s := p.scope("")
	if n.Kind != yaml.MappingNode {
		s.add(n.Line, "each limit of a rule must be a mapping {limit: NAME, id: SOURCE}, got %s", describe(n))
		return forwardauth.Entry{}, 0, false
	}
	fs := s.fields(n, forwardAuthLimitMisplaced, forwardAuthLimitFields...)
	lf, hasLimit := fs["limit"]
	idf, hasID := fs["id"]
	ok := true
	var e forwardauth.Entry
	switch {
	case !hasLimit:
		s.add(n.Line, "missing limit: the name of a limit, from the defaults file or built in")
		ok = false
	case !isString(lf.val) || lf.val.Value == "":
		s.add(lf.val.Line, "limit must be a limit name, got %s", describe(lf.val))
		ok = false
	default:
		e.Limit = lf.val.Value
		if p.cfg != nil {
			if _, known := p.cfg.Lookup(e.Limit); !known {
				p.scope(e.Limit).add(lf.val.Line, "%s", p.l.unknownName(e.Limit))
				ok = false
			}
		}
	}
	switch {
	case !hasID:
		s.add(n.Line, "missing id: where the subscriber id comes from (client_ip, header:<Name>, cookie:<name>, method, path, host or const:<string>)")
		ok = false
	case !isString(idf.val):
		s.add(idf.val.Line, "id must be an id source such as client_ip or header:X-Api-Key, got %s", describe(idf.val))
		ok = false
	default:
		src, err := forwardauth.ParseSource(idf.val.Value)
		if err != nil {
			s.add(idf.val.Line, "%v", err)
			ok = false
		}
		e.Source = src
	}
	if !ok {
		return forwardauth.Entry{}, 0, false
	}
	line := lf.val.Line
	return e, line, p.sourceFits(e, idf.val.Line)
}

// sourceFits checks that e's source can give ids of its limit's kind: an
// address for client_ip, a valid id for a constant.
func (p *forwardAuthParser) sourceFits(e forwardauth.Entry, line int) bool {
	if p.cfg == nil {
		return true
	}
	info, _ := p.cfg.Lookup(e.Limit)
	switch e.Source.Kind {
	case forwardauth.ClientIP:
		if !info.Kind.TakesAddresses() {
			p.scope(e.Limit).add(line, "client_ip gives addresses, and the ids of this limit are of kind %s", info.Kind)
			return false
		}
	case forwardauth.Const:
		if _, _, err := info.Kind.Canonicalize(e.Source.Arg); err != nil {
			p.scope(e.Limit).add(line, "%s is not an id of this limit (kind %s): %v", quoteShort(e.Source.Arg), info.Kind, err)
			return false
		}
	}
	return true
}

// fits checks a whole rule against the limits: its cost within every
// limit's default, and missing: client_ip only where every limit whose id
// can be missing takes addresses.
func (p *forwardAuthParser) fits(key *yaml.Node, rule forwardauth.Rule) bool {
	if p.cfg == nil {
		return true
	}
	ok := true
	for _, e := range rule.Limits {
		if isConcurrency(p.cfg, e.Limit) {
			p.scope(e.Limit).add(key.Line, "rule %s names a concurrency limit: a proxy never releases what a request acquired, so every slot would stay held until its lease expired", quoteShort(key.Value))
			ok = false
			continue
		}
		info, _ := p.cfg.Lookup(e.Limit)
		if rule.Missing == forwardauth.MissingClientIP && canBeMissing(e.Source) && !info.Kind.TakesAddresses() {
			p.scope(e.Limit).add(key.Line, "rule %s has missing: client_ip, and the ids of this limit are of kind %s, not addresses", quoteShort(key.Value), info.Kind)
			ok = false
		}
		if def, has := p.cfg.Default(info.Name); has && rule.Cost > def.MostPerTransaction() {
			p.scope(e.Limit).add(key.Line, "rule %s has cost %d, above the %d this limit allows in one request: every request would be refused", quoteShort(key.Value), rule.Cost, def.MostPerTransaction())
			ok = false
			continue
		}
		// An override that allows less in one request than the cost would
		// answer its id's every request with an error, not a decision.
		var tightest string
		for id, l := range p.cfg.Overrides(info.Name) {
			if rule.Cost > l.MostPerTransaction() && (tightest == "" || id < tightest) {
				tightest = id
			}
		}
		if tightest != "" {
			l, _ := p.cfg.Limit(info.Name, tightest)
			p.scope(e.Limit).add(key.Line, "rule %s has cost %d, above the %d the override of id %q allows in one request: every request of that id would be refused", quoteShort(key.Value), rule.Cost, l.MostPerTransaction(), tightest)
			ok = false
		}
	}
	return ok
}

// canBeMissing reports whether a request can lack src's value.
func canBeMissing(src forwardauth.Source) bool {
	switch src.Kind {
	case forwardauth.Header, forwardauth.Cookie, forwardauth.Path, forwardauth.Host, forwardauth.Method:
		return true
	}
	return false
}
