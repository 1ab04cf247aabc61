package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/limiter-dev/limiter/configfile"
)

// The limits every row adds to the bundled defaults load in the service
// of this tree: a clash (two limits of one enum, say) would make every
// limiter row exit before it listens.
func TestBenchDefaultsLoad(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	path, err := benchDefaults(root, filepath.Join(t.TempDir(), "defaults.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var data [2][]byte
	for i, p := range []string{path, filepath.Join(root, "config/overrides.yaml")} {
		if data[i], err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := configfile.Parse(path, data[0], "overrides.yaml", data[1])
	if err != nil {
		t.Fatalf("the harness's defaults do not load: %v", err)
	}
	for _, name := range []string{benchSliding, benchSlidingSynced, benchRateCounter, benchCalendar, benchOverLimit, benchLeases} {
		if _, ok := cfg.Lookup(name); !ok {
			t.Errorf("%s is not in the harness's defaults", name)
		}
	}
}
