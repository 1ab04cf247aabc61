package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmhodges/clock"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/configfile"
	"github.com/limiter-dev/limiter/source/memory"
)

// A reload that changes the algorithm of a name keeping its enum is
// refused: the running configuration stays, the failure is counted and
// logged at the file and line that set the new algorithm, with what to do
// instead; declaring the new algorithm under a new enum then loads.
func TestReloadRefusesAlgorithmChange(t *testing.T) {
	dir := t.TempDir()
	defaults := filepath.Join(dir, "defaults.yaml")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(defaults, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const sliding = "API:\n  enum: 120\n  id: string\n  algorithm: sliding-window\n  count: 100\n  period: 1m\n"
	write(sliding)
	cfg, err := configfile.Load(defaults, "")
	if err != nil {
		t.Fatal(err)
	}
	limiter, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.NewFake())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	f := &serveFlags{configFlags: configFlags{defaults: defaults}}
	reg := prometheus.NewRegistry()
	r := newReloader(f, limiter, bearer.NewTokens(nil, nil), slog.New(slog.NewTextHandler(&logs, nil)), reg)

	write("API:\n  enum: 120\n  id: string\n  algorithm: fixed-window\n  count: 100\n  period: 1m\n")
	err = r.Reload("test")
	if err == nil || !strings.Contains(err.Error(), defaults+":4: API: the algorithm of enum 120 cannot change from sliding-window to fixed-window") {
		t.Fatalf("Reload = %v; want the change refused at %s:4", err, defaults)
	}
	if limiter.Config() != cfg {
		t.Error("the refused configuration was put in use")
	}
	if n := counter(t, reg, "limiter_config_reload_failures_total"); n != 1 {
		t.Errorf("limiter_config_reload_failures_total = %v; want 1", n)
	}
	if !strings.Contains(logs.String(), "reload failed") || !strings.Contains(logs.String(), "declare a new name with a new enum instead") ||
		!strings.Contains(logs.String(), defaults+":4") {
		t.Errorf("the log does not say where and what to do:\n%s", logs.String())
	}

	write(sliding + "APIFixed:\n  enum: 121\n  id: string\n  algorithm: fixed-window\n  count: 100\n  period: 1m\n")
	if err := r.Reload("test"); err != nil {
		t.Fatalf("a new name for the new algorithm: %v", err)
	}
	if info, ok := limiter.Config().Lookup("APIFixed"); !ok || limiter.Config().Algorithm(info.Name) != ratelimits.FixedWindow {
		t.Error("the new name is not in use")
	}
	if n := counter(t, reg, "limiter_config_reloads_total"); n != 1 {
		t.Errorf("limiter_config_reloads_total = %v; want 1", n)
	}
}

// counter reads the value of a counter without labels from reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}
