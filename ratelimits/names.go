package ratelimits

import (
	"math"
	"strconv"
)

// Name is a limit's stable number. It is the first part of every bucket key
// ("<enum>:<id>"), so it must never change for a limit once buckets exist:
// renaming a limit in a file is harmless, renumbering it would orphan its
// buckets. The built-in names 1 to 9 keep Boulder's numbers; names declared
// in the defaults file use 100 and up.
type Name int

// The built-in limit names, numbered as in Boulder so that bucket keys are
// compatible.
const (
	// Unknown is the zero Name; no limit has it.
	Unknown Name = 0
	// NewRegistrationsPerIPAddress limits new accounts per IP address.
	NewRegistrationsPerIPAddress Name = 1
	// NewRegistrationsPerIPv6Range limits new accounts per IPv6 /48.
	NewRegistrationsPerIPv6Range Name = 2
	// NewOrdersPerAccount limits new orders per account.
	NewOrdersPerAccount Name = 3
	// FailedAuthorizationsPerDomainPerAccount limits failed validations per
	// account and domain; overrides are per account.
	FailedAuthorizationsPerDomainPerAccount Name = 4
	// CertificatesPerDomain limits certificates per registered domain
	// (eTLD+1) or per IP prefix.
	CertificatesPerDomain Name = 5
	// CertificatesPerDomainPerAccount limits certificates per account (its
	// id kind is account; Boulder keys it account:domain, but here that
	// bucket id belongs to enum 4 only); Boulder uses it through overrides
	// only.
	CertificatesPerDomainPerAccount Name = 6
	// CertificatesPerFQDNSet limits certificates for one exact set of names.
	CertificatesPerFQDNSet Name = 7
	// FailedAuthorizationsForPausingPerDomainPerAccount counts failed
	// validations per account and domain before issuance is paused.
	FailedAuthorizationsForPausingPerDomainPerAccount Name = 8
	// LimitOverrideRequestsPerIPAddress limits requests for limit overrides
	// per IP address.
	LimitOverrideRequestsPerIPAddress Name = 9
)

// The range of enums a declared name may use. Below MinDeclaredEnum is
// reserved for built-ins (present and future Boulder ones); the upper bound
// keeps a Name within a 32-bit int on every platform.
const (
	MinDeclaredEnum Name = 100
	MaxDeclaredEnum Name = math.MaxInt32
)

// MaxLimitNameLength is the longest limit name a Config accepts.
const MaxLimitNameLength = 64

// NameInfo describes one known limit name: its number, its spelling and how
// its ids are validated. Get one from Config.Lookup or Config.Names; a
// NameInfo built by hand still works but its BucketKey is slower.
type NameInfo struct {
	Name     Name
	Limit    string // the spelling used in files and requests, e.g. "NewOrdersPerAccount"
	Kind     IDKind
	Declared bool // declared in the defaults file rather than built in

	// prefix is "<enum>:", computed once per name so that BucketKey costs a
	// single allocation on the hot path.
	prefix string
}

// BucketKey returns the bucket key "<enum>:<bucketID>". bucketID must be the
// canonical id returned by IDKind.Canonicalize, so that two spellings of one
// subscriber share one bucket.
func (n NameInfo) BucketKey(bucketID string) string {
	if n.prefix == "" {
		return keyPrefix(n.Name) + bucketID
	}
	return n.prefix + bucketID
}

// keyPrefix is the bucket key prefix of a name.
func keyPrefix(n Name) string {
	return strconv.Itoa(int(n)) + ":"
}

// builtinNames is the table of Boulder's limit names. It is never modified.
var builtinNames = [...]NameInfo{
	{Name: NewRegistrationsPerIPAddress, Limit: "NewRegistrationsPerIPAddress", Kind: KindIP, prefix: "1:"},
	{Name: NewRegistrationsPerIPv6Range, Limit: "NewRegistrationsPerIPv6Range", Kind: KindIPv6Range, prefix: "2:"},
	{Name: NewOrdersPerAccount, Limit: "NewOrdersPerAccount", Kind: KindAccount, prefix: "3:"},
	{Name: FailedAuthorizationsPerDomainPerAccount, Limit: "FailedAuthorizationsPerDomainPerAccount", Kind: KindAccountDomain, prefix: "4:"},
	{Name: CertificatesPerDomain, Limit: "CertificatesPerDomain", Kind: KindDomainOrIPPrefix, prefix: "5:"},
	{Name: CertificatesPerDomainPerAccount, Limit: "CertificatesPerDomainPerAccount", Kind: KindAccount, prefix: "6:"},
	{Name: CertificatesPerFQDNSet, Limit: "CertificatesPerFQDNSet", Kind: KindFQDNSet, prefix: "7:"},
	{Name: FailedAuthorizationsForPausingPerDomainPerAccount, Limit: "FailedAuthorizationsForPausingPerDomainPerAccount", Kind: KindAccountDomain, prefix: "8:"},
	{Name: LimitOverrideRequestsPerIPAddress, Limit: "LimitOverrideRequestsPerIPAddress", Kind: KindIP, prefix: "9:"},
}

// BuiltinNames returns Boulder's limit names, which every Config knows,
// sorted by enum. The slice is the caller's.
func BuiltinNames() []NameInfo {
	names := builtinNames
	return names[:]
}

// builtinByString finds a built-in name by its exact spelling.
func builtinByString(s string) (NameInfo, bool) {
	for _, b := range builtinNames {
		if b.Limit == s {
			return b, true
		}
	}
	return NameInfo{}, false
}

// ValidLimitName reports whether s looks like an identifier:
// [A-Za-z][A-Za-z0-9_]*, at most MaxLimitNameLength bytes. Names end up in
// metrics labels, logs and HTTP headers, so they are kept plain.
func ValidLimitName(s string) bool {
	if s == "" || len(s) > MaxLimitNameLength || !isASCIILetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isASCIILetter(c) && !isDigit(c) && c != '_' {
			return false
		}
	}
	return true
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
