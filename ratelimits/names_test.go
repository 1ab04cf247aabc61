package ratelimits

import (
	"strings"
	"testing"
)

// TestNamesBuiltins pins Boulder's enum numbers, spellings and id kinds:
// they are part of every bucket key, so a change here would orphan buckets.
func TestNamesBuiltins(t *testing.T) {
	want := []struct {
		name   Name
		str    string
		kind   IDKind
		prefix string
	}{
		{NewRegistrationsPerIPAddress, "NewRegistrationsPerIPAddress", KindIP, "1:"},
		{NewRegistrationsPerIPv6Range, "NewRegistrationsPerIPv6Range", KindIPv6Range, "2:"},
		{NewOrdersPerAccount, "NewOrdersPerAccount", KindAccount, "3:"},
		{FailedAuthorizationsPerDomainPerAccount, "FailedAuthorizationsPerDomainPerAccount", KindAccountDomain, "4:"},
		{CertificatesPerDomain, "CertificatesPerDomain", KindDomainOrIPPrefix, "5:"},
		{CertificatesPerDomainPerAccount, "CertificatesPerDomainPerAccount", KindAccount, "6:"},
		{CertificatesPerFQDNSet, "CertificatesPerFQDNSet", KindFQDNSet, "7:"},
		{FailedAuthorizationsForPausingPerDomainPerAccount, "FailedAuthorizationsForPausingPerDomainPerAccount", KindAccountDomain, "8:"},
		{LimitOverrideRequestsPerIPAddress, "LimitOverrideRequestsPerIPAddress", KindIP, "9:"},
	}
	if len(builtinNames) != len(want) {
		t.Fatalf("%d built-in names; want %d", len(builtinNames), len(want))
	}
	for i, w := range want {
		got := builtinNames[i]
		if got.Name != w.name || int(w.name) != i+1 || got.Limit != w.str || got.Kind != w.kind || got.prefix != w.prefix || got.Declared {
			t.Errorf("builtinNames[%d] = %+v; want %d %s %s prefix %q, not declared", i, got, w.name, w.str, w.kind, w.prefix)
		}
		if b, ok := builtinByString(w.str); !ok || b != got {
			t.Errorf("builtinByString(%q) = %+v, %v", w.str, b, ok)
		}
		if !ValidLimitName(w.str) {
			t.Errorf("built-in name %q fails the name syntax", w.str)
		}
	}
	if _, ok := builtinByString("neworderSperaccount"); ok {
		t.Error("builtinByString is case-insensitive; names are matched exactly")
	}
}

// declaredName is the NameInfo a Config gives a name it declares.
func declaredName(t *testing.T, limit string, enum Name, kind IDKind) NameInfo {
	t.Helper()
	c, err := NewConfig([]NameInfo{{Name: enum, Limit: limit, Kind: kind}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := c.Lookup(limit)
	return info
}

// TestNamesBucketKey checks the "<enum>:<id>" bucket key of built-in,
// declared and hand-made names.
func TestNamesBucketKey(t *testing.T) {
	declared := declaredName(t, "LoginAttemptsPerUser", 101, KindString)
	cases := []struct {
		info NameInfo
		id   string
		want string
	}{
		{builtinNames[NewOrdersPerAccount-1], "12345", "3:12345"},
		{builtinNames[CertificatesPerFQDNSet-1], exampleSetHash, "7:" + exampleSetHash},
		{declared, "alice", "101:alice"},
		{NameInfo{Name: 2147483647}, "x", "2147483647:x"}, // no precomputed prefix
	}
	for _, c := range cases {
		if got := c.info.BucketKey(c.id); got != c.want {
			t.Errorf("%s.BucketKey(%q) = %q; want %q", c.info.Limit, c.id, got, c.want)
		}
	}
	if !declared.Declared || declared.Kind != KindString || declared.Name != 101 {
		t.Errorf("declaredName = %+v", declared)
	}
}

// TestNamesBucketKeyAllocatesOnce guards the hot path: the key prefix is
// precomputed, so building a key is a single allocation.
func TestNamesBucketKeyAllocatesOnce(t *testing.T) {
	info := declaredName(t, "APIRequestsPerKey", 102, KindString)
	id := strings.Repeat("k", 40)
	var sink string
	allocs := testing.AllocsPerRun(100, func() { sink = info.BucketKey(id) })
	if allocs != 1 {
		t.Errorf("BucketKey allocates %v times; want 1", allocs)
	}
	if sink != "102:"+id {
		t.Errorf("BucketKey = %q", sink)
	}
}

// TestNamesSyntax checks which limit names a config file may use.
func TestNamesSyntax(t *testing.T) {
	valid := []string{"A", "LoginAttemptsPerUser", "api_requests_v2", strings.Repeat("x", 64)}
	invalid := []string{"", "1Limit", "_hidden", "Bad-Name", "has space", "Ünicode", "dotted.name", strings.Repeat("x", 65)}
	for _, s := range valid {
		if !ValidLimitName(s) {
			t.Errorf("ValidLimitName(%q) = false; want true", s)
		}
	}
	for _, s := range invalid {
		if ValidLimitName(s) {
			t.Errorf("ValidLimitName(%q) = true; want false", s)
		}
	}
}
