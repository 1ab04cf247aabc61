package main

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmhodges/clock"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/envoyapi/descriptors"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

// A reload that changes the algorithm of a name keeping its enum is
// refused: the running configuration stays, the failure is counted and
// logged at the file and line that set the new algorithm, with what to do
// instead; declaring the new algorithm under a new enum then loads.
func TestReloadRefusesAlgorithmChange(t *testing.T) {
	defaults, write := writableDefaults(t)
	const sliding = "API:\n  enum: 120\n  id: string\n  algorithm: sliding-window\n  count: 100\n  period: 1m\n"
	write(sliding)
	cfg := parseDefaults(t, defaults)
	limiter, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.NewFake())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	f := &serveFlags{configFlags: configFlags{defaults: defaults}}
	reg := prometheus.NewRegistry()
	r := newReloader(f, nil, limiter, bearer.NewTokens(nil, nil), slog.New(slog.NewTextHandler(&logs, nil)), reg)

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

// writableDefaults returns the path of a defaults file in a directory of the
// test's own, and a function that writes it.
func writableDefaults(t *testing.T) (string, func(content string)) {
	defaults := filepath.Join(t.TempDir(), "defaults.yaml")
	return defaults, func(content string) {
		t.Helper()
		if err := os.WriteFile(defaults, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
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

// The descriptors file is reloaded with the limit files, and checked
// against the new ones: a rule naming an unknown limit fails the reload
// (nothing swapped, the failure counted and logged at its line), a rule
// naming a limit the same reload declares loads and is handed over, and
// limit files that drop a limit a rule still names fail too, though they
// alone would load.
func TestReloadDescriptors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const keyLimit = "APIRequestsPerKey:\n  enum: 102\n  id: string\n  burst: 100\n  count: 100\n  period: 1s\n"
	const pathLimit = "RequestsPerPath:\n  enum: 130\n  id: string\n  burst: 10\n  count: 10\n  period: 1s\n"
	const keyRule = "- domain: edge\n  descriptors:\n    - keys: [api_key]\n      limit: APIRequestsPerKey\n"
	const pathRule = "    - keys: [path]\n      limit: RequestsPerPath\n"
	defaults := write("defaults.yaml", keyLimit)
	rulesFile := write("descriptors.yaml", keyRule)
	cfg := parseDefaults(t, defaults)
	limiter, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.NewFake())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	f := &serveFlags{configFlags: configFlags{defaults: defaults, descriptors: rulesFile}}
	r := newReloader(f, nil, limiter, bearer.NewTokens(nil, nil), slog.New(slog.NewTextHandler(&logs, nil)), reg)
	var handed []*descriptors.Rules
	r.setRules = func(rules *descriptors.Rules) { handed = append(handed, rules) }
	ruleOf := func(rules *descriptors.Rules, key string) string {
		limit, _ := rules.Match("edge", 1, func(int) string { return key })
		return limit
	}

	// A rule naming a limit no file declares.
	write("descriptors.yaml", keyRule+pathRule)
	err = r.Reload("test")
	if err == nil || !strings.Contains(err.Error(), rulesFile+":6: RequestsPerPath: unknown limit name") {
		t.Fatalf("Reload = %v; want the unknown limit at %s:6", err, rulesFile)
	}
	if len(handed) != 0 || limiter.Config() != cfg {
		t.Fatalf("a failed reload swapped something: %d rule sets handed over", len(handed))
	}
	if n := counter(t, reg, "limiter_config_reload_failures_total"); n != 1 {
		t.Errorf("limiter_config_reload_failures_total = %v; want 1", n)
	}
	if !strings.Contains(logs.String(), "reload failed") || !strings.Contains(logs.String(), rulesFile+":6") {
		t.Errorf("the log lacks the problem:\n%s", logs.String())
	}

	// The same reload declares it: the new rules are handed over, with the
	// new limits in use.
	write("defaults.yaml", keyLimit+pathLimit)
	if err := r.Reload("test"); err != nil {
		t.Fatal(err)
	}
	if len(handed) != 1 || ruleOf(handed[0], "path") != "RequestsPerPath" || ruleOf(handed[0], "api_key") != "APIRequestsPerKey" {
		t.Fatalf("handed over %d rule sets; want one with both rules", len(handed))
	}
	if _, ok := limiter.Config().Lookup("RequestsPerPath"); !ok {
		t.Error("the new limit is not in use")
	}
	if n := counter(t, reg, "limiter_config_reloads_total"); n != 1 {
		t.Errorf("limiter_config_reloads_total = %v; want 1", n)
	}
	running := limiter.Config()

	// Limit files that drop the limit a rule names.
	write("defaults.yaml", keyLimit)
	if err := r.Reload("test"); err == nil || !strings.Contains(err.Error(), rulesFile+":6: RequestsPerPath: unknown limit name") {
		t.Fatalf("Reload = %v; want the rule's limit refused", err)
	}
	if len(handed) != 1 || limiter.Config() != running {
		t.Error("limit files that break a rule were put in use")
	}

	// Broken limit files and a broken rules file: every problem is told.
	write("defaults.yaml", "APIRequestsPerKey:\n  enum: 102\n  id: string\n  burst: 0\n  count: 100\n  period: 1s\n")
	write("descriptors.yaml", "- domain: edge\n  descriptors: []\n")
	logs.Reset()
	err = r.Reload("test")
	for _, want := range []string{defaults + ":4: APIRequestsPerKey: burst must be greater than 0", rulesFile + ":2: descriptors is empty"} {
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(logs.String(), want) {
			t.Errorf("Reload = %v; want %q in it and in the log:\n%s", err, want, logs.String())
		}
	}
	if n := counter(t, reg, "limiter_config_reload_failures_total"); n != 3 {
		t.Errorf("limiter_config_reload_failures_total = %v; want 3", n)
	}
}

// Without a user for the rules, the descriptors file is still checked: a
// bad one fails the reload, a good one reloads.
func TestReloadDescriptorsWithoutService(t *testing.T) {
	dir := t.TempDir()
	defaults := filepath.Join(dir, "defaults.yaml")
	rulesFile := filepath.Join(dir, "descriptors.yaml")
	if err := os.WriteFile(defaults, []byte("NewOrdersPerAccount:\n  burst: 5\n  count: 5\n  period: 1h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := parseDefaults(t, defaults)
	limiter, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.NewFake())
	if err != nil {
		t.Fatal(err)
	}
	f := &serveFlags{configFlags: configFlags{defaults: defaults, descriptors: rulesFile}}
	r := newReloader(f, nil, limiter, bearer.NewTokens(nil, nil), slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err := r.Reload("test"); err != nil {
		t.Fatalf("a missing descriptors file: %v", err)
	}
	if err := os.WriteFile(rulesFile, []byte("- domain: edge\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload("test"); err == nil || !strings.Contains(err.Error(), rulesFile+":1: missing descriptors") {
		t.Fatalf("Reload = %v; want the bad file refused", err)
	}
	if err := os.WriteFile(rulesFile, []byte("- domain: edge\n  descriptors: [{keys: [account], limit: NewOrdersPerAccount}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload("test"); err != nil {
		t.Fatalf("a good file: %v", err)
	}
}

// The watch sees a change of the descriptors file, as of the others.
func TestReloadSignatureHasDescriptors(t *testing.T) {
	dir := t.TempDir()
	r := &reloader{files: configFlags{
		defaults:    filepath.Join(dir, "defaults.yaml"),
		overrides:   filepath.Join(dir, "overrides.yaml"),
		descriptors: filepath.Join(dir, "descriptors.yaml"),
	}}
	before := r.signature()
	if err := os.WriteFile(r.files.descriptors, []byte("[]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	created := r.signature()
	if created == before {
		t.Fatal("creating the descriptors file left the signature as it was")
	}
	if err := os.WriteFile(r.files.descriptors, []byte("# none yet\n[]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r.signature() == created {
		t.Error("rewriting the descriptors file left the signature as it was")
	}
}

// parseDefaults parses a defaults file, with no overrides.
func parseDefaults(t *testing.T, path string) *ratelimits.Config {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configfile.Parse(path, data, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A file in use that a reload finds gone or blank is refused with a way
// to remove its rules on purpose, where it has one: the defaults file
// has none, since it declares at least one limit.
func TestMissingOrBlankSaysWhatToWrite(t *testing.T) {
	for role, want := range map[fileRole]string{
		defaultsFile:    "the defaults file declares at least one limit, so it has no empty form",
		overridesFile:   "write its empty form []",
		descriptorsFile: "write its empty form []",
		forwardAuthFile: "write its empty form {} (or [])",
	} {
		for _, p := range []configfile.Presence{configfile.Absent, configfile.Blank} {
			err := missingOrBlank(role, configfile.File{Path: "f.yaml", Presence: p})
			if !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "f.yaml: the "+role.flag()+" file ") {
				t.Errorf("%s, %s: %q; want it to say %q", role.flag(), p, err, want)
			}
		}
	}
}

// A reload that finds a FIFO at a file's path (a configuration or a token
// file) refuses it rather than waiting, for good, for something to write
// to it; at the start (and in check-config) a pipe is read, as <(...)
// gives one.
func TestReloadRefusesAFIFO(t *testing.T) {
	dir := t.TempDir()
	defaults := filepath.Join(dir, "defaults.yaml")
	if err := os.WriteFile(defaults, []byte("API:\n  enum: 120\n  id: string\n  burst: 5\n  count: 5\n  period: 1m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := parseDefaults(t, defaults)
	limiter, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.NewFake())
	if err != nil {
		t.Fatal(err)
	}
	overrides := filepath.Join(dir, "overrides.yaml")
	if err := syscall.Mkfifo(overrides, 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "api-tokens")
	if err := syscall.Mkfifo(tokens, 0o600); err != nil {
		t.Fatal(err)
	}
	f := &serveFlags{configFlags: configFlags{defaults: defaults, overrides: overrides}, apiTokenFile: tokens}
	r := newReloader(f, nil, limiter, bearer.NewTokens(nil, nil), slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	reloaded := make(chan error, 1)
	go func() { reloaded <- r.Reload("test") }()
	select {
	case err := <-reloaded:
		if !errors.Is(err, configfile.ErrNotRegular) || !strings.Contains(err.Error(), overrides) || !strings.Contains(err.Error(), tokens) || limiter.Config() != cfg {
			t.Fatalf("a reload with FIFOs for overrides and API tokens: %v; want ErrNotRegular for both, the configuration kept", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reload waited on a FIFO")
	}
}

// On Redis a limit's bucket keys are named by whether it has a box, so a
// reload that adds or removes a penalty starts its buckets afresh there:
// the reload says so for each such limit, and only on Redis.
func TestReloadWarnsOfABoxChangeOnRedis(t *testing.T) {
	defaults, write := writableDefaults(t)
	const plain = "Logins:\n  enum: 120\n  id: string\n  burst: 5\n  count: 5\n  period: 1m\nOther:\n  enum: 121\n  id: string\n  burst: 5\n  count: 5\n  period: 1m\n"
	const boxed = "Logins:\n  enum: 120\n  id: string\n  burst: 5\n  count: 5\n  period: 1m\n  penalty: 15m\nOther:\n  enum: 121\n  id: string\n  burst: 5\n  count: 9\n  period: 1m\n"
	for _, onRedis := range []bool{true, false} {
		write(plain)
		limiter, err := ratelimits.NewLimiter(parseDefaults(t, defaults), memory.New(0), clock.NewFake())
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		f := &serveFlags{configFlags: configFlags{defaults: defaults}}
		r := newReloader(f, nil, limiter, bearer.NewTokens(nil, nil), slog.New(slog.NewTextHandler(&logs, nil)), prometheus.NewRegistry())
		r.onRedis = onRedis
		for _, content := range []string{boxed, plain} {
			write(content)
			if err := r.Reload("test"); err != nil {
				t.Fatal(err)
			}
		}
		warned := strings.Count(logs.String(), "start afresh once")
		if want := map[bool]int{true: 2, false: 0}[onRedis]; warned != want || strings.Contains(logs.String(), "limit=Other") {
			t.Errorf("on Redis %v: %d warnings, want %d, for Logins alone:\n%s", onRedis, warned, want, logs.String())
		}
	}
}

// A name without a default may have a penalty in some overrides and not in
// others: an id's bucket key is named by its own limit's penalty. The
// reload warns when an id limited before and after gains or loses one, and
// not when the name's box alone changes with no such id (an override with
// a penalty removed, its id then unlimited).
func TestReloadWarnsOfABoxChangeOfAnOverride(t *testing.T) {
	dir := t.TempDir()
	defaults, overrides := filepath.Join(dir, "defaults.yaml"), filepath.Join(dir, "overrides.yaml")
	write := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(defaults, "Logins:\n  enum: 120\n  id: string\n  burst: 5\n  count: 5\n  period: 1m\n")
	const limit = "- NewRegistrationsPerIPAddress:\n    burst: 5\n    count: 5\n    period: 1m\n"
	const (
		oneBoxed  = limit + "    penalty: 15m\n    ids:\n      - id: 192.0.2.1\n" + limit + "    ids:\n      - id: 192.0.2.2\n"
		bothBoxed = limit + "    penalty: 15m\n    ids:\n      - id: 192.0.2.1\n      - id: 192.0.2.2\n"
		noneBoxed = limit + "    ids:\n      - id: 192.0.2.2\n"
	)
	write(overrides, oneBoxed)
	limiter, err := ratelimits.NewLimiter(parseDefaults(t, defaults), memory.New(0), clock.NewFake())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	f := &serveFlags{configFlags: configFlags{defaults: defaults, overrides: overrides}}
	r := newReloader(f, nil, limiter, bearer.NewTokens(nil, nil), slog.New(slog.NewTextHandler(&logs, nil)), prometheus.NewRegistry())
	r.onRedis = true
	for _, step := range []struct {
		content string
		warns   bool
	}{
		{oneBoxed, false}, // from the defaults alone, where neither id was limited
		{bothBoxed, true},
		{oneBoxed, true},
		{noneBoxed, false},
	} {
		logs.Reset()
		write(overrides, step.content)
		if err := r.Reload("test"); err != nil {
			t.Fatal(err)
		}
		if warned := strings.Contains(logs.String(), "start afresh once"); warned != step.warns {
			t.Errorf("to\n%s: warned %v, want %v:\n%s", step.content, warned, step.warns, logs.String())
		}
	}
}
