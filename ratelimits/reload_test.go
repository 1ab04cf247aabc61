package ratelimits

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustWindow(t *testing.T, alg Algorithm, count int64, period time.Duration) Limit {
	t.Helper()
	l, err := NewWindowLimit(alg, count, period)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestCheckReload compares the algorithm of every enum in two
// configurations: a change is refused whichever way it goes (GCRA to a
// window, a window to GCRA, one window to the other), also when the name
// was renamed or the algorithm comes from an override; everything else a
// reload may change passes.
func TestCheckReload(t *testing.T) {
	gcra := mustLimit(t, 5, 5, time.Minute)
	sliding := mustWindow(t, SlidingWindow, 100, time.Minute)
	fixed := mustWindow(t, FixedWindow, 100, time.Minute)
	declare := func(limit string) []NameInfo { return []NameInfo{{Name: 120, Limit: limit, Kind: KindString}} }
	build := func(declared []NameInfo, defaults map[string]Limit, overrides ...Override) *Config {
		t.Helper()
		c, err := NewConfig(declared, defaults, overrides)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	api := func(l Limit) *Config { return build(declare("API"), map[string]Limit{"API": l}) }
	withSync := func(l Limit, d time.Duration) Limit { l.SyncRate = d; return l }

	refused := []struct {
		desc     string
		old, new *Config
		want     AlgorithmChange
	}{
		{"gcra to sliding", api(gcra), api(sliding), AlgorithmChange{120, "API", "API", GCRA, SlidingWindow}},
		{"sliding to gcra", api(sliding), api(gcra), AlgorithmChange{120, "API", "API", SlidingWindow, GCRA}},
		{"sliding to fixed", api(sliding), api(fixed), AlgorithmChange{120, "API", "API", SlidingWindow, FixedWindow}},
		{"fixed to sliding", api(fixed), api(sliding), AlgorithmChange{120, "API", "API", FixedWindow, SlidingWindow}},
		{"renamed, same enum", api(gcra), build(declare("APIv2"), map[string]Limit{"APIv2": fixed}),
			AlgorithmChange{120, "API", "APIv2", GCRA, FixedWindow}},
		{"a built-in's algorithm, from its only override", build(nil, map[string]Limit{"NewOrdersPerAccount": sliding}),
			build(nil, nil, Override{Limit: "NewOrdersPerAccount", ID: "1", Effective: gcra}),
			AlgorithmChange{NewOrdersPerAccount, "NewOrdersPerAccount", "NewOrdersPerAccount", SlidingWindow, GCRA}},
	}
	for _, c := range refused {
		t.Run(c.desc, func(t *testing.T) {
			err := CheckReload(c.old, c.new)
			var change *AlgorithmChange
			if !errors.Is(err, ErrAlgorithmChanged) || !errors.As(err, &change) || *change != c.want {
				t.Fatalf("CheckReload = %v; want %+v", err, c.want)
			}
			if got := AlgorithmChanges(c.old, c.new); len(got) != 1 || got[0] != c.want {
				t.Errorf("AlgorithmChanges = %+v", got)
			}
			for _, w := range []string{"enum 120", "declare a new name with a new enum", "must never be read as " + c.want.New.String()} {
				if c.want.Name == 120 && !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if c.want.OldLimit != c.want.NewLimit && !strings.Contains(err.Error(), "(named API in the running configuration)") {
				t.Errorf("error %q does not give the old name", err)
			}
		})
	}

	allowed := []struct {
		desc     string
		old, new *Config
	}{
		{"same config", api(sliding), api(sliding)},
		{"window numbers change", api(sliding), api(mustWindow(t, SlidingWindow, 10, time.Hour))},
		{"gcra numbers change", api(gcra), api(mustLimit(t, 50, 1, time.Second))},
		{"sync_rate changes", api(sliding), api(withSync(sliding, -time.Second))},
		{"a name is removed", api(sliding), build(nil, map[string]Limit{"NewOrdersPerAccount": gcra})},
		{"a name is added", build(nil, map[string]Limit{"NewOrdersPerAccount": gcra}), api(fixed)},
		{"a name gains limits", build(declare("API"), nil), api(sliding)},
		{"a name loses its limits", api(gcra), build(declare("API"), nil)},
		{"a new enum for the new algorithm", api(gcra), build([]NameInfo{{Name: 120, Limit: "API", Kind: KindString}, {Name: 121, Limit: "APIWindow", Kind: KindString}},
			map[string]Limit{"API": gcra, "APIWindow": sliding})},
	}
	for _, c := range allowed {
		t.Run(c.desc, func(t *testing.T) {
			if err := CheckReload(c.old, c.new); err != nil {
				t.Errorf("CheckReload = %v; want nil", err)
			}
		})
	}

	t.Run("every change at once, by enum", func(t *testing.T) {
		old := build(declare("API"), map[string]Limit{"API": gcra, "NewOrdersPerAccount": fixed, "CertificatesPerDomain": gcra})
		new := build(declare("API"), map[string]Limit{"API": sliding, "NewOrdersPerAccount": gcra, "CertificatesPerDomain": gcra})
		got := AlgorithmChanges(old, new)
		if len(got) != 2 || got[0].Name != NewOrdersPerAccount || got[1].Name != 120 {
			t.Fatalf("AlgorithmChanges = %+v; want NewOrdersPerAccount then API", got)
		}
		if err := CheckReload(old, new); strings.Count(err.Error(), "\n") != 1 {
			t.Errorf("CheckReload = %q; want two lines", err)
		}
	})
	if err := CheckReload(nil, api(gcra)); err != nil {
		t.Errorf("CheckReload from no configuration = %v", err)
	}
}

// A reload that removes a name's limits, then one that brings them back
// with another algorithm: the second is refused, since the buckets of the
// first configuration may still hold the old algorithm's state.
func TestReloadInTwoStepsIsRefused(t *testing.T) {
	declare := []NameInfo{{Name: 121, Limit: "Search", Kind: KindString}}
	build := func(defaults map[string]Limit) *Config {
		t.Helper()
		c, err := NewConfig(declare, defaults, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := build(map[string]Limit{"Search": mustLimit(t, 5, 5, time.Minute)})
	empty := build(nil)
	if err := CheckReload(first, empty); err != nil {
		t.Fatalf("removing the limits: %v", err)
	}
	running := Succeed(first, empty)
	back := build(map[string]Limit{"Search": mustWindow(t, SlidingWindow, 10, time.Minute)})
	var change *AlgorithmChange
	if err := CheckReload(running, back); !errors.As(err, &change) || change.Old != GCRA || change.New != SlidingWindow {
		t.Fatalf("bringing the name back as a sliding window: %v, want refused (gcra to sliding-window)", err)
	}
	if err := CheckReload(running, build(map[string]Limit{"Search": mustLimit(t, 9, 9, time.Minute)})); err != nil {
		t.Fatalf("bringing it back as GCRA: %v, want allowed", err)
	}
	if empty.counted != nil {
		t.Fatal("Succeed modified its argument")
	}
}
