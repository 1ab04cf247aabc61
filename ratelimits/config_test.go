package ratelimits

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustLimit(t *testing.T, burst, count int64, period time.Duration) Limit {
	t.Helper()
	l, err := NewLimit(burst, count, period)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestNewConfig builds a Config from code: a declared name, defaults and
// overrides given in any spelling their id kind accepts.
func TestNewConfig(t *testing.T) {
	logins, orders, perIP := mustLimit(t, 5, 5, 15*time.Minute), mustLimit(t, 20, 20, time.Second), mustLimit(t, 40, 40, time.Second)
	c, err := NewConfig(
		[]NameInfo{{Name: 101, Limit: "LoginAttemptsPerUser", Kind: KindString}},
		map[string]Limit{"LoginAttemptsPerUser": logins, "NewOrdersPerAccount": orders},
		[]Override{
			{Limit: "NewRegistrationsPerIPAddress", ID: "2001:DB8::1", Effective: perIP},
			{Limit: "NewOrdersPerAccount", ID: "12345", Effective: logins},
		})
	if err != nil {
		t.Fatal(err)
	}
	info, ok := c.Lookup("LoginAttemptsPerUser")
	if !ok || info.Name != 101 || info.Kind != KindString || !info.Declared || info.BucketKey("a") != "101:a" {
		t.Errorf("Lookup(LoginAttemptsPerUser) = %+v, %v", info, ok)
	}
	if n := len(c.Names()); n != len(builtinNames)+1 {
		t.Errorf("%d names; want the built-ins and one declared", n)
	}
	withOverride := func(l Limit) Limit { l.Override = true; return l }
	for _, tc := range []struct {
		name       Name
		overrideID string
		want       Limit
		ok         bool
	}{
		{101, "alice", logins, true},
		{NewOrdersPerAccount, "999", orders, true},
		{NewOrdersPerAccount, "12345", withOverride(logins), true},
		{NewRegistrationsPerIPAddress, "2001:db8::1", withOverride(perIP), true},
		{NewRegistrationsPerIPAddress, "192.0.2.1", Limit{}, false},
		{CertificatesPerDomain, "example.com", Limit{}, false},
	} {
		if got, ok := c.Limit(tc.name, tc.overrideID); got != tc.want || ok != tc.ok {
			t.Errorf("Limit(%d, %q) = %+v, %v; want %+v, %v", tc.name, tc.overrideID, got, ok, tc.want, tc.ok)
		}
	}
	if n := c.OverrideCount(NewOrdersPerAccount); n != 1 {
		t.Errorf("OverrideCount(NewOrdersPerAccount) = %d; want 1", n)
	}
}

// TestNewConfigRefuses checks that every mistake in NewConfig's arguments
// is an ErrInvalidConfig that says what is wrong, and that all of them are
// reported at once.
func TestNewConfigRefuses(t *testing.T) {
	good := mustLimit(t, 1, 1, time.Second)
	cases := []struct {
		desc      string
		declared  []NameInfo
		defaults  map[string]Limit
		overrides []Override
		want      []string
	}{
		{"invalid name", []NameInfo{{Name: 100, Limit: "Bad-Name", Kind: KindIP}}, nil, nil,
			[]string{`invalid limit name "Bad-Name"`}},
		{"built-in name redeclared", []NameInfo{{Name: 100, Limit: "NewOrdersPerAccount", Kind: KindIP}}, nil, nil,
			[]string{"NewOrdersPerAccount: the name is already known"}},
		{"enum reserved for built-ins", []NameInfo{{Name: 99, Limit: "A", Kind: KindIP}}, nil, nil,
			[]string{"A: enum must be from 100"}},
		{"enum used twice", []NameInfo{{Name: 100, Limit: "A", Kind: KindIP}, {Name: 100, Limit: "B", Kind: KindIP}}, nil, nil,
			[]string{"B: enum 100 is already used by A"}},
		{"id kind of the built-ins", []NameInfo{{Name: 100, Limit: "A", Kind: KindFQDNSet}}, nil, nil,
			[]string{"A: id kind fqdn-set cannot be declared"}},
		{"default of an unknown name", nil, map[string]Limit{"Nope": good}, nil,
			[]string{"Nope: unknown limit"}},
		{"default not made by NewLimit", nil, map[string]Limit{"NewOrdersPerAccount": {Burst: 1, Count: 1, Period: time.Second}}, nil,
			[]string{"NewOrdersPerAccount: the default limit was not made with NewLimit"}},
		{"override of an unknown name", nil, nil, []Override{{Limit: "Nope", ID: "1", Effective: good}},
			[]string{"Nope: unknown limit"}},
		{"override with a bad id", nil, nil, []Override{{Limit: "NewOrdersPerAccount", ID: "007", Effective: good}},
			[]string{`NewOrdersPerAccount: override id "007": invalid id`}},
		{"one subscriber overridden twice", nil, nil, []Override{
			{Limit: "NewRegistrationsPerIPAddress", ID: "2001:DB8::1", Effective: good},
			{Limit: "NewRegistrationsPerIPAddress", ID: "2001:db8:0::1", Effective: good},
		}, []string{`NewRegistrationsPerIPAddress: more than one override for id "2001:db8::1"`}},
		{"every problem at once", []NameInfo{{Name: 1, Limit: "A", Kind: KindIP}}, map[string]Limit{"B": good}, nil,
			[]string{"A: enum must be from 100", "B: unknown limit"}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			cfg, err := NewConfig(c.declared, c.defaults, c.overrides)
			if cfg != nil || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("NewConfig = %v, %v; want an ErrInvalidConfig", cfg, err)
			}
			if lines := strings.Split(err.Error(), "\n"); len(lines) != len(c.want) {
				t.Fatalf("error %q has %d lines; want %d", err, len(lines), len(c.want))
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestConfigHotPathDoesNotAllocate guards Lookup and Limit, called on every
// transaction of every request.
func TestConfigHotPathDoesNotAllocate(t *testing.T) {
	c, err := NewConfig(nil, map[string]Limit{"NewOrdersPerAccount": mustLimit(t, 20, 20, time.Second)},
		[]Override{{Limit: "NewOrdersPerAccount", ID: "12345", Effective: mustLimit(t, 100, 100, time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		info, ok := c.Lookup("NewOrdersPerAccount")
		if !ok {
			t.Fatal("NewOrdersPerAccount unknown")
		}
		if _, ok := c.Limit(info.Name, "12345"); !ok {
			t.Fatal("no limit")
		}
		if _, ok := c.Limit(info.Name, "999"); !ok {
			t.Fatal("no limit")
		}
	})
	if allocs != 0 {
		t.Errorf("Lookup and Limit allocate %v times; want 0", allocs)
	}
}

// TestNewConfigWindows: a name's algorithm and sync_rate are its
// default's; its overrides get that sync_rate whatever theirs says, and an
// override of another algorithm is refused, as are a sync_rate between 0
// and 1ms and a sync_rate on a GCRA limit.
func TestNewConfigWindows(t *testing.T) {
	sliding := mustWindow(t, SlidingWindow, 100, time.Minute)
	sliding.SyncRate = 500 * time.Millisecond
	more := mustWindow(t, SlidingWindow, 1000, time.Minute)
	more.SyncRate = -time.Second // ignored: sync_rate belongs to the name
	declared := []NameInfo{{Name: 120, Limit: "API", Kind: KindString}}
	c, err := NewConfig(declared, map[string]Limit{"API": sliding}, []Override{{Limit: "API", ID: "gold", Effective: more}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Algorithm(120) != SlidingWindow || c.SyncRate(120) != 500*time.Millisecond {
		t.Errorf("Algorithm, SyncRate = %v, %v; want sliding-window, 500ms", c.Algorithm(120), c.SyncRate(120))
	}
	if l, ok := c.Limit(120, "gold"); !ok || l.Count != 1000 || !l.Override || l.SyncRate != 500*time.Millisecond {
		t.Errorf("override = %+v, %v; want count 1000 with the name's sync_rate", l, ok)
	}
	if c.Algorithm(NewOrdersPerAccount) != GCRA || c.SyncRate(NewOrdersPerAccount) != 0 {
		t.Error("a name without limits is not GCRA with sync_rate 0")
	}

	withSync := func(l Limit, d time.Duration) Limit { l.SyncRate = d; return l }
	for _, c := range []struct {
		desc      string
		defaults  map[string]Limit
		overrides []Override
		want      string
	}{
		{"sync_rate below 1ms", map[string]Limit{"API": withSync(sliding, time.Millisecond-1)}, nil, "API: sync_rate 999.999µs is between 0 and 1ms"},
		{"sync_rate on gcra", map[string]Limit{"API": withSync(mustLimit(t, 1, 1, time.Second), time.Second)}, nil, "API: sync_rate applies to window and rate-counter limits only"},
		{"override of another algorithm", map[string]Limit{"API": sliding},
			[]Override{{Limit: "API", ID: "x", Effective: mustWindow(t, FixedWindow, 1, time.Second)}}, "an override cannot change the algorithm"},
		{"gcra override of a window", map[string]Limit{"API": sliding},
			[]Override{{Limit: "API", ID: "x", Effective: mustLimit(t, 1, 1, time.Second)}}, `the override of "x" is gcra, but the name is sliding-window`},
		{"window literal", map[string]Limit{"API": {Algorithm: FixedWindow, Burst: 1, Count: 0, Period: time.Second}}, nil, "not made with NewLimit or NewWindowLimit"},
	} {
		t.Run(c.desc, func(t *testing.T) {
			_, err := NewConfig(declared, c.defaults, c.overrides)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewConfig = %v; want an ErrInvalidConfig saying %q", err, c.want)
			}
		})
	}
	for _, d := range []time.Duration{-time.Nanosecond, 0, time.Millisecond, time.Hour} {
		if _, err := NewConfig(declared, map[string]Limit{"API": withSync(sliding, d)}, nil); err != nil {
			t.Errorf("sync_rate %v: %v", d, err)
		}
	}
}
