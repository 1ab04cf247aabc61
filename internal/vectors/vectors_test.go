package vectors

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/ratelimits"
)

// The embedded copies must stay the same as the shared public vectors,
// which sit beside the repository in every checkout and CI run.
func TestCopyMatchesShared(t *testing.T) {
	copies := map[string][]byte{"gcra-public.json": PublicBytes(), "algorithms-public.json": AlgorithmsBytes()}
	// A public file that has no copy here would never run: every one must.
	published, err := filepath.Glob(filepath.Join("..", "..", "..", "shared", "vectors", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range published {
		if _, ok := copies[filepath.Base(p)]; !ok {
			t.Errorf("%s has no copy in internal/vectors/testdata, so no test runs it", p)
		}
	}
	for name, embedded := range copies {
		shared := filepath.Join("..", "..", "..", "shared", "vectors", name)
		want, err := os.ReadFile(shared)
		if os.IsNotExist(err) {
			t.Logf("%s is not beside this checkout", shared)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(embedded, want) {
			t.Errorf("internal/vectors/testdata/%s differs from %s: copy it again", name, shared)
		}
	}
}

func TestPublicParses(t *testing.T) {
	f, err := Public()
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	for _, sc := range f.Scenarios {
		steps += len(sc.Steps)
	}
	if len(f.Scenarios) < 5 || steps < 50 || len(f.Defaults) == 0 {
		t.Fatalf("only %d scenarios with %d steps: the file did not parse as expected", len(f.Scenarios), steps)
	}
}

func TestRound(t *testing.T) {
	for _, c := range []struct{ ns, unit, want int64 }{{0, 1e6, 0}, {1, 1e6, 1}, {1e6, 1e6, 1}, {1e6 + 1, 1e6, 2}, {333333333, 1, 333333333}} {
		if got := round(c.ns, time.Duration(c.unit)); got != c.want {
			t.Errorf("round(%d, %d) = %d, want %d", c.ns, c.unit, got, c.want)
		}
	}
}

// Windows keeps exactly the window scenarios, and a configuration without
// rate counters or penalties.
func TestWindows(t *testing.T) {
	f, err := Windows()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	steps := 0
	for _, sc := range f.Scenarios {
		names = append(names, sc.Name)
		steps += len(sc.Steps)
	}
	if !slices.Equal(names, WindowScenarios) || steps < 40 {
		t.Fatalf("scenarios %v with %d steps; want %v", names, steps, WindowScenarios)
	}
	if strings.Contains(string(f.Defaults), "rate-counter") || strings.Contains(string(f.Defaults), "penalty") {
		t.Errorf("defaults still hold the later feature: %s", f.Defaults)
	}
	var defaults map[string]json.RawMessage
	if err := json.Unmarshal(f.Defaults, &defaults); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"SlidingTenPerMinute", "FixedThreePerTenSeconds", "SlidingFivePerSecond", "PerSecondGCRA", "LoginsWithLockout", "WindowWithLockout"} {
		if _, ok := defaults[name]; !ok {
			t.Errorf("%s was dropped", name)
		}
	}
	if _, err := configfile.Parse("defaults.yaml", f.Defaults, "overrides.yaml", f.Overrides); err != nil {
		t.Errorf("the window configuration does not load: %v", err)
	}
	if start, err := f.StartTime(time.Time{}); err != nil || !start.Equal(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("StartTime = %v, %v", start, err)
	}
}

// The window vectors hold for the reference model of a source: this checks
// the vectors' arithmetic, the Limiter's and the window package's against
// each other, apart from any real source's storage.
func TestWindowsOnModel(t *testing.T) {
	f, err := Windows()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configfile.Parse("defaults.yaml", f.Defaults, "overrides.yaml", f.Overrides)
	if err != nil {
		t.Fatal(err)
	}
	start, err := f.StartTime(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(start)
	l, err := ratelimits.NewLimiter(cfg, NewModelSource(), clk)
	if err != nil {
		t.Fatal(err)
	}
	Run(t, f, &LimiterDriver{Limiter: l, Clock: clk}, time.Nanosecond)
}

// The GCRA vectors hold for the reference model too.
func TestPublicOnModel(t *testing.T) {
	f, err := Public()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configfile.Parse("defaults.yaml", f.Defaults, "overrides.yaml", f.Overrides)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	l, err := ratelimits.NewLimiter(cfg, NewModelSource(), clk)
	if err != nil {
		t.Fatal(err)
	}
	Run(t, f, &LimiterDriver{Limiter: l, Clock: clk}, time.Nanosecond)
}
