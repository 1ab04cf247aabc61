package vectors

import (
	"testing"
	"time"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/source/memory"
)

// Every calendar vector holds for the reference model of a source.
func TestCalendarOnModel(t *testing.T) {
	f, err := Calendar()
	if err != nil {
		t.Fatal(err)
	}
	l, clk := newAlgorithmsLimiter(t, f, NewModelSource())
	Run(t, f, &LimiterDriver{Limiter: l, Clock: clk}, time.Nanosecond)
}

// The same on the memory source.
func TestCalendarOnMemory(t *testing.T) {
	f, err := Calendar()
	if err != nil {
		t.Fatal(err)
	}
	l, clk := newAlgorithmsLimiter(t, f, memory.New(0))
	Run(t, f, &LimiterDriver{Limiter: l, Clock: clk}, time.Nanosecond)
}

// The calendar file's configuration built in code is the one the
// configuration loader makes of it.
func TestCalendarConfigMatchesLoader(t *testing.T) {
	f, err := Calendar()
	if err != nil {
		t.Fatal(err)
	}
	built, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := configfile.Parse("defaults.yaml", f.Defaults, "overrides.yaml", f.Overrides)
	if err != nil {
		t.Fatalf("the configuration loader refuses the file: %v", err)
	}
	for _, n := range built.Names() {
		bd, bok := built.Default(n.Name)
		ld, lok := loaded.Default(n.Name)
		if bok != lok || bd.Algorithm != ld.Algorithm || bd.Count != ld.Count || bd.Penalty != ld.Penalty || bd.PeriodName() != ld.PeriodName() || bd.Zone() != ld.Zone() {
			t.Errorf("%s: loaded %+v, built %+v", n.Limit, ld, bd)
		}
		if built.OverrideCount(n.Name) != loaded.OverrideCount(n.Name) {
			t.Errorf("%s: %d overrides loaded, %d built", n.Limit, loaded.OverrideCount(n.Name), built.OverrideCount(n.Name))
		}
	}
}
