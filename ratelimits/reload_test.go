package ratelimits

import (
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

// TestAlgorithmChanges compares the algorithm of every enum in two
// configurations: a change is refused whichever way it goes (GCRA to a
// window, a window to GCRA, one window to the other), also when the name
// was renamed or the algorithm comes from an override; everything else a
// reload may change passes.
func TestAlgorithmChanges(t *testing.T) {
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
			got := AlgorithmChanges(c.old, c.new)
			if len(got) != 1 || got[0] != c.want {
				t.Fatalf("AlgorithmChanges = %+v; want %+v", got, c.want)
			}
			reason := got[0].Reason()
			for _, w := range []string{"enum 120", "declare a new name with a new enum", "must never be read as " + c.want.New.String()} {
				if c.want.Name == 120 && !strings.Contains(reason, w) {
					t.Errorf("reason %q does not say %q", reason, w)
				}
			}
			if renamed := strings.Contains(reason, "(named API in the running configuration)"); renamed != (c.want.OldLimit != c.want.NewLimit) {
				t.Errorf("reason %q: gives the old name %v, want %v", reason, renamed, !renamed)
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
			if got := AlgorithmChanges(c.old, c.new); got != nil {
				t.Errorf("AlgorithmChanges = %+v; want none", got)
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
	})
	if got := AlgorithmChanges(nil, api(gcra)); got != nil {
		t.Errorf("AlgorithmChanges from no configuration = %+v", got)
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
	if got := AlgorithmChanges(first, empty); got != nil {
		t.Fatalf("removing the limits: %+v", got)
	}
	running := Succeed(first, empty)
	back := build(map[string]Limit{"Search": mustWindow(t, SlidingWindow, 10, time.Minute)})
	if got := AlgorithmChanges(running, back); len(got) != 1 || got[0].Old != GCRA || got[0].New != SlidingWindow {
		t.Fatalf("bringing the name back as a sliding window: %+v, want refused (gcra to sliding-window)", got)
	}
	if got := AlgorithmChanges(running, build(map[string]Limit{"Search": mustLimit(t, 9, 9, time.Minute)})); got != nil {
		t.Fatalf("bringing it back as GCRA: %+v, want allowed", got)
	}
	if empty.counted != nil {
		t.Fatal("Succeed modified its argument")
	}
}
