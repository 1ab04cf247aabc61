package ratelimits

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// IDKind says how the ids of a limit name are validated and canonicalised.
//
// Canonicalisation matters because the canonical id is what goes into the
// bucket key and what overrides are looked up by: without it "2001:DB8::1"
// and "2001:db8:0::1" would be two subscribers with two buckets each.
type IDKind int

// The id kinds. The first five may be used by names declared in the defaults
// file; the last three exist only for Boulder's built-in names.
const (
	kindInvalid IDKind = iota // the zero IDKind: no id is valid

	// KindIP is one IPv4 or IPv6 address.
	KindIP
	// KindIPv6Range is an IPv6 /48 prefix.
	KindIPv6Range
	// KindAccount is an account number: a positive int64.
	KindAccount
	// KindDomain is a DNS name.
	KindDomain
	// KindString is an opaque printable string of 1 to 256 bytes.
	KindString

	// KindAccountDomain is "<account>:<domain>"; overrides are per account.
	KindAccountDomain
	// KindDomainOrIPPrefix is a DNS name, an IPv4 /32 or an IPv6 /64.
	KindDomainOrIPPrefix
	// KindFQDNSet is the hex SHA-256 of a set of DNS names.
	KindFQDNSet
)

// maxStringID is the longest id of KindString, in bytes.
const maxStringID = 256

// idKindNames spells each kind as in configuration files. It is never modified.
var idKindNames = [...]string{
	kindInvalid:          "invalid",
	KindIP:               "ip",
	KindIPv6Range:        "ipv6-range",
	KindAccount:          "account",
	KindDomain:           "domain",
	KindString:           "string",
	KindAccountDomain:    "account:domain",
	KindDomainOrIPPrefix: "domain-or-ip-prefix",
	KindFQDNSet:          "fqdn-set",
}

// String returns the kind as spelled in configuration files, e.g. "ipv6-range".
func (k IDKind) String() string {
	if k < 0 || int(k) >= len(idKindNames) {
		return "IDKind(" + strconv.Itoa(int(k)) + ")"
	}
	return idKindNames[k]
}

// Declarable reports whether a name declared in the defaults file may use k.
func (k IDKind) Declarable() bool {
	return k >= KindIP && k <= KindString
}

// ParseIDKind reads a kind as spelled in a configuration file, e.g. "ip".
func ParseIDKind(s string) (IDKind, bool) {
	for k := KindIP; k <= KindFQDNSet; k++ {
		if idKindNames[k] == s {
			return k, true
		}
	}
	return kindInvalid, false
}

// Canonicalize validates a transaction's id and returns its canonical form,
// used in the bucket key, and the id under which overrides are looked up.
// The two are the same string except for KindAccountDomain, whose overrides
// are per account.
//
// When id is already canonical the returned strings are id itself (or a
// substring of it): nothing is allocated on the hot path. Errors wrap
// ErrInvalidID and explain in plain words what was expected; they do not
// repeat the id, which may be long or hostile.
func (k IDKind) Canonicalize(id string) (bucketID, overrideID string, err error) {
	switch k {
	case KindIP:
		bucketID, err = canonicalIP(id)
	case KindIPv6Range:
		bucketID, err = canonicalIPv6Range(id)
	case KindAccount:
		bucketID, err = canonicalAccount(id)
	case KindDomain:
		bucketID, err = canonicalDomain(id)
	case KindString:
		bucketID, err = canonicalString(id)
	case KindAccountDomain:
		return canonicalAccountDomain(id)
	case KindDomainOrIPPrefix:
		bucketID, err = canonicalDomainOrIPPrefix(id)
	case KindFQDNSet:
		bucketID, err = canonicalFQDNSet(id)
	default:
		err = invalidID("the limit has no valid id kind")
	}
	if err != nil {
		return "", "", err
	}
	return bucketID, bucketID, nil
}

// CanonicalOverrideID validates the id of an override and
// returns the canonical form Config.Limit is called with. It is the
// overrideID of Canonicalize, except that for KindAccountDomain an override
// names the account alone.
func (k IDKind) CanonicalOverrideID(id string) (string, error) {
	if k == KindAccountDomain {
		c, err := canonicalAccount(id)
		if err != nil {
			return "", invalidID("overrides of this limit are per account: " + accountWant)
		}
		return c, nil
	}
	_, o, err := k.Canonicalize(id)
	return o, err
}

// invalidID returns an error wrapping ErrInvalidID with a reason.
func invalidID(reason string) error {
	return fmt.Errorf("%w: %s", ErrInvalidID, reason)
}

// sameOrCopy returns id when b spells it exactly, so that a canonical input
// costs no allocation, and a new string otherwise.
func sameOrCopy(id string, b []byte) string {
	if string(b) == id {
		return id
	}
	return string(b)
}

const ipWant = "want an IPv4 or IPv6 address such as 192.0.2.1 or 2001:db8::1"

// canonicalIP accepts any IPv4 or IPv6 address without a zone; an
// IPv4-mapped IPv6 address is the IPv4 address it maps.
func canonicalIP(id string) (string, error) {
	addr, err := netip.ParseAddr(id)
	if err != nil {
		return "", invalidID(ipWant)
	}
	if addr.Zone() != "" {
		return "", invalidID("an IPv6 zone (%...) is not allowed: " + ipWant)
	}
	var buf [64]byte
	return sameOrCopy(id, addr.Unmap().AppendTo(buf[:0])), nil
}

const ipv6RangeWant = "want an IPv6 /48 prefix such as 2001:db8:abcd::/48"

// canonicalIPv6Range accepts an IPv6 /48 and returns it masked, so every
// address of the range names the same prefix.
func canonicalIPv6Range(id string) (string, error) {
	p, err := netip.ParsePrefix(id)
	if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() {
		return "", invalidID(ipv6RangeWant)
	}
	if p.Bits() != 48 {
		return "", invalidID("the prefix length must be 48: " + ipv6RangeWant)
	}
	var buf [64]byte
	return sameOrCopy(id, p.Masked().AppendTo(buf[:0])), nil
}

const accountWant = "want an account number: a positive integer without leading zeros"

// canonicalAccount accepts a positive decimal int64 in its one canonical
// spelling (no sign, no leading zeros), and returns it unchanged.
func canonicalAccount(id string) (string, error) {
	if id == "" || id[0] < '1' || id[0] > '9' {
		return "", invalidID(accountWant)
	}
	for i := 1; i < len(id); i++ {
		if !isDigit(id[i]) {
			return "", invalidID(accountWant)
		}
	}
	if _, err := strconv.ParseInt(id, 10, 64); err != nil {
		return "", invalidID("the account number is too large: " + accountWant)
	}
	return id, nil
}

const (
	maxDomainLength = 253
	maxLabelLength  = 63
)

// canonicalDomain accepts a DNS host name (letters, digits and hyphens in
// dot-separated labels) and returns it in lower case.
func canonicalDomain(id string) (string, error) {
	upper, err := checkDomain(id)
	if err != nil {
		return "", err
	}
	if upper {
		return strings.ToLower(id), nil
	}
	return id, nil
}

// checkDomain validates a DNS name and reports whether it has upper-case
// letters (and so needs lowering). A last label made of digits only is
// refused, as no top-level domain is numeric: it keeps IP addresses such as
// 192.0.2.1 from passing as domains.
func checkDomain(id string) (upper bool, err error) {
	if id == "" {
		return false, invalidID("the domain name is empty")
	}
	if len(id) > maxDomainLength {
		return false, invalidID("the domain name is longer than 253 characters")
	}
	if id[len(id)-1] == '.' {
		return false, invalidID("the domain name must not end with a dot")
	}
	for label := range strings.SplitSeq(id, ".") {
		u, err := checkLabel(label)
		if err != nil {
			return false, err
		}
		upper = upper || u
	}
	if allDigits(id[strings.LastIndexByte(id, '.')+1:]) {
		return false, invalidID("the domain name's last label must not be all digits (an IP address is not a domain name)")
	}
	return upper, nil
}

// checkLabel validates one label of a DNS name.
func checkLabel(label string) (upper bool, err error) {
	if label == "" {
		return false, invalidID("the domain name has an empty label")
	}
	if len(label) > maxLabelLength {
		return false, invalidID("a label of the domain name is longer than 63 characters")
	}
	if label[0] == '-' || label[len(label)-1] == '-' {
		return false, invalidID("a label of the domain name starts or ends with a hyphen")
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		switch {
		case c >= 'a' && c <= 'z', isDigit(c), c == '-':
		case c >= 'A' && c <= 'Z':
			upper = true
		case c == '*':
			return false, invalidID("wildcards are not allowed in a domain name")
		default:
			return false, invalidID("a domain name may only contain letters, digits, hyphens and dots")
		}
	}
	return upper, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// canonicalString accepts 1 to 256 bytes of valid UTF-8 made of graphic
// characters only (letters, marks, numbers, punctuation, symbols and
// spaces), and returns it unchanged. Control and format characters are
// refused because ids end up in logs, keys and headers.
func canonicalString(id string) (string, error) {
	if id == "" {
		return "", invalidID("the id is empty")
	}
	if len(id) > maxStringID {
		return "", invalidID("the id is longer than 256 bytes")
	}
	for i := 0; i < len(id); {
		r, size := utf8.DecodeRuneInString(id[i:])
		if r == utf8.RuneError && size == 1 {
			return "", invalidID("the id is not valid UTF-8")
		}
		if !unicode.IsGraphic(r) {
			return "", invalidID("the id contains a control or other non-printable character")
		}
		i += size
	}
	return id, nil
}

// canonicalAccountDomain accepts "<account>:<domain>"; the override id is the
// account part, a substring of id.
func canonicalAccountDomain(id string) (bucketID, overrideID string, err error) {
	i := strings.IndexByte(id, ':')
	if i < 0 {
		return "", "", invalidID("want <account>:<domain>, such as 12345:example.com")
	}
	account, err := canonicalAccount(id[:i])
	if err != nil {
		return "", "", invalidID("in <account>:<domain>, " + accountWant)
	}
	domain, err := canonicalDomain(id[i+1:])
	if err != nil {
		return "", "", err
	}
	if domain == id[i+1:] {
		return id, account, nil
	}
	return id[:i+1] + domain, account, nil
}

const ipPrefixWant = "an IP address must be given as a prefix: a /32 for IPv4 such as 192.0.2.1/32, or a /64 for IPv6 such as 2001:db8::/64"

// canonicalDomainOrIPPrefix accepts a DNS name, an IPv4 /32 or an IPv6 /64;
// a prefix is returned masked.
func canonicalDomainOrIPPrefix(id string) (string, error) {
	if !strings.Contains(id, "/") {
		d, err := canonicalDomain(id)
		if err != nil {
			if _, ipErr := netip.ParseAddr(id); ipErr == nil {
				return "", invalidID(ipPrefixWant)
			}
		}
		return d, err
	}
	p, err := netip.ParsePrefix(id)
	if err != nil || p.Addr().Is4In6() {
		return "", invalidID("want a domain name, or " + ipPrefixWant)
	}
	if (p.Addr().Is4() && p.Bits() != 32) || (p.Addr().Is6() && p.Bits() != 64) {
		return "", invalidID(ipPrefixWant)
	}
	var buf [64]byte
	return sameOrCopy(id, p.Masked().AppendTo(buf[:0])), nil
}

// fqdnSetHashLength is the length of a hex SHA-256.
const fqdnSetHashLength = 2 * sha256.Size

// canonicalFQDNSet accepts either the hex SHA-256 of a set of names (any
// case, returned in lower case) or the names themselves, comma-separated,
// which are hashed. No DNS name is 64 characters without a dot (a label has
// at most 63), so the two forms cannot be confused.
func canonicalFQDNSet(id string) (string, error) {
	if len(id) == fqdnSetHashLength && isHex(id) {
		return strings.ToLower(id), nil
	}
	return hashFQDNSet(id)
}

const fqdnSetWant = "want a hex SHA-256 (64 hex digits), or fully qualified domain names separated by commas"

// hashFQDNSet returns the hex SHA-256 of the comma-joined, lowercased,
// de-duplicated and sorted names of a comma-separated list. Each name must
// have a dot, so that a mistyped hash is refused rather than hashed again as
// a one-label name.
func hashFQDNSet(list string) (string, error) {
	var names []string
	for name := range strings.SplitSeq(list, ",") {
		c, err := canonicalDomain(name)
		if err != nil {
			return "", invalidID(fqdnSetWant + "; " + strings.TrimPrefix(err.Error(), ErrInvalidID.Error()+": "))
		}
		if strings.IndexByte(c, '.') < 0 {
			return "", invalidID(fqdnSetWant)
		}
		names = append(names, c)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	sum := sha256.Sum256([]byte(strings.Join(names, ",")))
	return hex.EncodeToString(sum[:]), nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isDigit(c) && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

// TakesAddresses reports whether ids of kind k can be a client's network
// address (see AddressID): ip, ipv6-range, domain-or-ip-prefix and string.
func (k IDKind) TakesAddresses() bool {
	switch k {
	case KindIP, KindIPv6Range, KindDomainOrIPPrefix, KindString:
		return true
	}
	return false
}

// AddressID is the id of kind k that a client at address a is counted
// under: a itself for ip and string, its /48 for ipv6-range, and its /32
// (IPv4) or /64 (IPv6) for domain-or-ip-prefix, the prefixes those kinds
// are made of. applies is false for an IPv4 address under ipv6-range: a
// range limit counts IPv6 clients only, as Boulder's per-/48 limit sits
// beside a per-address one rather than in its place. For kinds that never
// take addresses, it is the address as written, which Canonicalize then
// refuses with the kind's own explanation.
func (k IDKind) AddressID(a netip.Addr) (id string, applies bool) {
	a = a.Unmap()
	switch {
	case k == KindIPv6Range && a.Is6():
		return netip.PrefixFrom(a, 48).Masked().String(), true
	case k == KindIPv6Range:
		return "", false
	case k == KindDomainOrIPPrefix && a.Is4():
		return netip.PrefixFrom(a, 32).String(), true
	case k == KindDomainOrIPPrefix && a.Is6():
		return netip.PrefixFrom(a, 64).Masked().String(), true
	}
	return a.String(), true
}
