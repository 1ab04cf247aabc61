package forwardauth

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
)

// Missing says what a rule does when one of its id sources has no value
// in a request: a header or cookie that is absent or empty, or a path the
// proxy did not send.
type Missing int

// What an absent id does.
const (
	// MissingDeny answers the rule's deny status and spends nothing: a
	// request that cannot be counted is not let through. The default.
	MissingDeny Missing = iota
	// MissingAllow leaves that limit out of the batch; the others count.
	MissingAllow
	// MissingClientIP counts the request under the client's address
	// instead.
	MissingClientIP
)

// ParseMissing reads a missing action as the rules file spells it.
func ParseMissing(s string) (Missing, bool) {
	switch s {
	case "deny":
		return MissingDeny, true
	case "allow":
		return MissingAllow, true
	case "client_ip":
		return MissingClientIP, true
	}
	return 0, false
}

// String spells the action as the rules file does.
func (m Missing) String() string {
	switch m {
	case MissingDeny:
		return "deny"
	case MissingAllow:
		return "allow"
	case MissingClientIP:
		return "client_ip"
	}
	return fmt.Sprintf("Missing(%d)", int(m))
}

// Expose says how much of a decision a rule's answers show. Behind Caddy
// or Traefik the limiter's refusal is the end client's answer as it is,
// headers and body: whatever the answer shows, an abusive client reads.
type Expose int

// How much an answer shows.
const (
	// ExposeDeciding shows the deciding limit only: the RateLimit headers
	// of the HTTP API, and a body whose decisions hold that limit's
	// decision alone. The other limits of the rule, their thresholds and
	// what they have left, stay with the limiter. The default.
	ExposeDeciding Expose = iota
	// ExposeNone shows nothing but the status, and Retry-After on a
	// refusal (a client told when to come back does not need to guess):
	// no RateLimit headers and an empty body. For anti-abuse rules, whose
	// thresholds are better kept from the abuser.
	ExposeNone
	// ExposeAll shows every decision of the batch, for debugging.
	ExposeAll
)

// ParseExpose reads an expose value as the rules file spells it.
func ParseExpose(s string) (Expose, bool) {
	switch s {
	case "deciding":
		return ExposeDeciding, true
	case "none":
		return ExposeNone, true
	case "all":
		return ExposeAll, true
	}
	return 0, false
}

// String spells the value as the rules file does.
func (e Expose) String() string {
	switch e {
	case ExposeDeciding:
		return "deciding"
	case ExposeNone:
		return "none"
	case ExposeAll:
		return "all"
	}
	return fmt.Sprintf("Expose(%d)", int(e))
}

// DefaultDenyStatus is the status of a denial when a rule sets none: 429
// Too Many Requests, which Traefik and Caddy pass on to the client as it
// is. nginx's auth_request passes only 2xx, 401 and 403, so rules used by
// nginx set 403 and nginx turns it into a 429 (docs/forward-auth.md).
const DefaultDenyStatus = http.StatusTooManyRequests

// Entry is one limit of a rule and where its ids come from.
type Entry struct {
	Limit  string
	Source Source
}

// Rule is what one forward-auth path counts: every request is one atomic
// spend of Cost against each of Limits.
type Rule struct {
	// Name is the last segment of /v1/forward-auth/{rule}.
	Name       string
	Limits     []Entry
	Cost       int64
	Missing    Missing
	DenyStatus int
	// Expose is how much of the decision the answers show; the zero
	// value is the default, ExposeDeciding.
	Expose Expose
}

// Rules is an immutable set of rules and the proxies whose forwarding
// headers are believed. The zero value and nil have no rules and trust no
// one.
type Rules struct {
	trusted []netip.Prefix
	// trustUnix believes calls over a Unix socket: a proxy on the same
	// host (nginx's upstream server unix:PATH), which has no address.
	trustUnix bool
	byName    map[string]*Rule
}

// Option changes how New builds Rules.
type Option func(*Rules)

// TrustUnixSockets believes the forwarding headers of calls that come
// over a Unix socket. Only processes on the limiter's host can connect to
// one, and the socket file's permissions say which.
func TrustUnixSockets() Option {
	return func(rs *Rules) { rs.trustUnix = true }
}

// ErrInvalidRules wraps every problem New finds.
var ErrInvalidRules = errors.New("invalid forward-auth rules")

// New checks rules and returns them with trusted: every rule named once
// with a usable name, at least one limit, no limit twice (one request
// would name the same bucket twice), a cost of at least 1, a missing
// action, a deny status that is a client error, and an expose value.
// Whether each limit exists, and takes the ids its source gives, is the
// loader's to check against the limits in use.
func New(trusted []netip.Prefix, rules []Rule, opts ...Option) (*Rules, error) {
	rs := &Rules{byName: make(map[string]*Rule, len(rules))}
	for _, o := range opts {
		o(rs)
	}
	for _, p := range trusted {
		if !p.IsValid() {
			return nil, fmt.Errorf("%w: an invalid trusted proxy prefix", ErrInvalidRules)
		}
		rs.trusted = append(rs.trusted, p.Masked())
	}
	for _, r := range rules {
		switch {
		case !ValidName(r.Name):
			return nil, fmt.Errorf("%w: rule name %q: want 1 to 64 letters, digits, '-', '_' or '.'", ErrInvalidRules, r.Name)
		case rs.byName[r.Name] != nil:
			return nil, fmt.Errorf("%w: rule %q is given twice", ErrInvalidRules, r.Name)
		case len(r.Limits) == 0:
			return nil, fmt.Errorf("%w: rule %q has no limits", ErrInvalidRules, r.Name)
		case r.Cost < 1:
			return nil, fmt.Errorf("%w: rule %q: cost %d is below 1", ErrInvalidRules, r.Name, r.Cost)
		case r.Missing < MissingDeny || r.Missing > MissingClientIP:
			return nil, fmt.Errorf("%w: rule %q: unknown missing action %d", ErrInvalidRules, r.Name, int(r.Missing))
		case r.DenyStatus < 400 || r.DenyStatus > 499:
			return nil, fmt.Errorf("%w: rule %q: deny status %d is not a 4xx", ErrInvalidRules, r.Name, r.DenyStatus)
		case r.Expose < ExposeDeciding || r.Expose > ExposeAll:
			return nil, fmt.Errorf("%w: rule %q: unknown expose value %d", ErrInvalidRules, r.Name, int(r.Expose))
		}
		for i, e := range r.Limits {
			if e.Limit == "" || e.Source.Kind < ClientIP || e.Source.Kind > Const {
				return nil, fmt.Errorf("%w: rule %q, limit %d: a limit name and an id source are needed", ErrInvalidRules, r.Name, i+1)
			}
			if slices.ContainsFunc(r.Limits[:i], func(o Entry) bool { return o.Limit == e.Limit }) {
				return nil, fmt.Errorf("%w: rule %q: limit %s is given twice", ErrInvalidRules, r.Name, e.Limit)
			}
		}
		rule := r
		rule.Limits = slices.Clone(r.Limits)
		rs.byName[r.Name] = &rule
	}
	return rs, nil
}

// MaxNameLength is the longest rule name.
const MaxNameLength = 64

// ValidName reports whether s can name a rule: 1 to MaxNameLength ASCII
// letters, digits, '-', '_' or '.', so that it is one plain path segment.
func ValidName(s string) bool {
	if s == "" || len(s) > MaxNameLength || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Rule returns the rule named name. The rule is shared: callers must not
// modify it.
func (rs *Rules) Rule(name string) (*Rule, bool) {
	if rs == nil {
		return nil, false
	}
	r, ok := rs.byName[name]
	return r, ok
}

// Count is the number of rules.
func (rs *Rules) Count() int {
	if rs == nil {
		return 0
	}
	return len(rs.byName)
}

// Names returns the rules' names, sorted.
func (rs *Rules) Names() []string {
	if rs == nil {
		return nil
	}
	names := make([]string, 0, len(rs.byName))
	for n := range rs.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// TrustsUnixSockets reports whether calls over a Unix socket are
// believed (TrustUnixSockets).
func (rs *Rules) TrustsUnixSockets() bool {
	return rs != nil && rs.trustUnix
}

// TrustedProxies returns the prefixes whose forwarding headers are
// believed.
func (rs *Rules) TrustedProxies() []netip.Prefix {
	if rs == nil {
		return nil
	}
	return slices.Clone(rs.trusted)
}

// Trusts reports whether addr is one of the trusted proxies. An IPv4
// address written as IPv6 (::ffff:10.0.0.1) is the IPv4 address.
func (rs *Rules) Trusts(addr netip.Addr) bool {
	if rs == nil || !addr.IsValid() {
		return false
	}
	addr = addr.Unmap()
	for _, p := range rs.trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
