package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jmhodges/clock"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/forwardauth"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

// writer writes files into a test's directory and returns their paths.
func writer(t *testing.T, dir string) func(name, content string) string {
	return func(name, content string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
}

// check-config checks the forward-auth file against the limits the other
// two files load: its problems are printed at their FILE:LINE after the
// other files', and counted with them; the ok line ends with the file and
// its rules, or says that it is missing.
func TestCheckConfigForwardAuth(t *testing.T) {
	dir := t.TempDir()
	write := writer(t, dir)
	const goodDefaults = "APIRequestsPerKey:\n  enum: 102\n  id: string\n  burst: 100\n  count: 100\n  period: 1s\n"
	const badDefaults = "APIRequestsPerKey:\n  enum: 102\n  id: string\n  burst: 0\n  count: 100\n  period: 1s\n"
	defaults := write("defaults.yaml", goodDefaults)
	overrides := emptyOverrides(t, dir)
	rulesFile := filepath.Join(dir, "forward-auth.yaml")
	const goodRules = "trusted_proxies: [10.0.0.0/8]\nrules:\n  api:\n    limits:\n      - {limit: APIRequestsPerKey, id: header:X-Api-Key}\n" +
		"  site:\n    limits:\n      - {limit: NewRegistrationsPerIPAddress, id: client_ip}\n    deny_status: 403\n"
	const badRules = "trusted_proxies: [10.0.0.1/8]\nrules:\n  api:\n    limits:\n      - {limit: APIRequestPerKey, id: header:X-Api-Key}\n" +
		"  site:\n    limits:\n      - {limit: NewOrdersPerAccount, id: client_ip}\n    deny_status: 500\n"
	okStart := "ok: " + defaults + " (1 limits with defaults), " + overrides + " (0 overrides), " +
		"config/descriptors.yaml (no such file: no descriptor rules), "
	tests := []struct {
		name     string
		defaults string // empty: the good defaults
		rules    string // written to forward-auth.yaml unless missing
		missing  bool
		code     int
		want     []string // the output's lines, each a prefix
	}{
		{"good", "", goodRules, false, 0, []string{okStart + rulesFile + " (2 forward-auth rules)"}},
		{"missing", "", "", true, 1, []string{rulesFile + ": no such file (named by --forward-auth or LIMITER_FORWARD_AUTH)", "1 problem(s) found"}},
		{"empty", "", "# no proxy in front yet\n", false, 0, []string{okStart + rulesFile + " (0 forward-auth rules)"}},
		{"bad rules", "", badRules, false, 1, []string{
			rulesFile + ":1: trusted proxy \"10.0.0.1/8\": has bits set",
			rulesFile + ":5: APIRequestPerKey: unknown limit name",
			rulesFile + ":8: NewOrdersPerAccount: client_ip gives addresses, and the ids of this limit are of kind account",
			rulesFile + ":9: deny_status must be a 4xx status",
			"4 problem(s) found"}},
		{"bad limits and bad rules", badDefaults, badRules, false, 1, []string{
			filepath.Join(dir, "bad-defaults.yaml") + ":4: APIRequestsPerKey: burst must be greater than 0",
			rulesFile + ":1: trusted proxy",
			rulesFile + ":9: deny_status must be a 4xx status",
			"3 problem(s) found"}},
		{"bad limits, rules whose names cannot be checked", badDefaults, goodRules, false, 1, []string{
			filepath.Join(dir, "bad-defaults.yaml") + ":4: APIRequestsPerKey: burst must be greater than 0",
			rulesFile + ": the limit names of its rules were not checked, as the limit files did not load",
			"1 problem(s) found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(rulesFile)
			if !tt.missing {
				write("forward-auth.yaml", tt.rules)
			}
			d := defaults
			if tt.defaults != "" {
				d = write("bad-defaults.yaml", tt.defaults)
			}
			var stdout, stderr bytes.Buffer
			code := run([]string{"check-config", "--defaults", d, "--overrides", overrides, "--forward-auth", rulesFile}, &stdout, &stderr)
			lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
			if code != tt.code || len(lines) != len(tt.want) {
				t.Fatalf("exit %d (want %d), output:\n%s%s", code, tt.code, stdout.String(), stderr.String())
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("line %d = %q; want it to start %q", i, lines[i], w)
				}
			}
			if tt.code == 0 && lines[0] != tt.want[0] {
				t.Errorf("ok line %q; want exactly %q", lines[0], tt.want[0])
			}
		})
	}
}

// Both rules files in one run: every problem of each is printed, after
// the limit files', and counted together; the ok line names both.
func TestCheckConfigBothRulesFiles(t *testing.T) {
	dir := t.TempDir()
	write := writer(t, dir)
	defaults := write("defaults.yaml", "APIRequestsPerKey:\n  enum: 102\n  id: string\n  burst: 100\n  count: 100\n  period: 1s\n")
	overrides := emptyOverrides(t, dir)
	descriptors := write("descriptors.yaml", "- domain: edge\n  descriptors:\n    - keys: []\n      limit: APIRequestsPerKey\n")
	fwd := write("forward-auth.yaml", "rules:\n  api:\n    limits: []\n")
	args := []string{"check-config", "--defaults", defaults, "--overrides", overrides, "--descriptors", descriptors, "--forward-auth", fwd}
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	want := []string{descriptors + ":3: keys is empty", fwd + ":3: limits is empty", "2 problem(s) found"}
	if lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n"); code != 1 || !slices.EqualFunc(lines, want, strings.HasPrefix) {
		t.Fatalf("exit %d, output:\n%s%s\nwant lines starting %q", code, stdout.String(), stderr.String(), want)
	}

	write("descriptors.yaml", "- domain: edge\n  descriptors:\n    - keys: [api_key]\n      limit: APIRequestsPerKey\n")
	write("forward-auth.yaml", "rules:\n  api:\n    limits: [{limit: APIRequestsPerKey, id: header:X-Api-Key}]\n")
	stdout.Reset()
	code = run(args, &stdout, &stderr)
	wantOK := "ok: " + defaults + " (1 limits with defaults), " + overrides + " (0 overrides), " +
		descriptors + " (1 descriptor rules), " + fwd + " (1 forward-auth rules)\n"
	if code != 0 || stdout.String() != wantOK {
		t.Errorf("exit %d, output:\n%s\nwant:\n%s", code, stdout.String(), wantOK)
	}
}

// Run from the repository root with other limit files and no
// --forward-auth, check-config does not read the bundled rules file (its
// rules name limits those files need not have) and says so; named by
// flag or environment, it is checked; with the bundled limit files, the
// bundled rules file is read.
func TestCheckConfigForwardAuthPairsWithTheLimitFiles(t *testing.T) {
	dir := t.TempDir()
	defaults := writer(t, dir)("defaults.yaml", "NewOrdersPerAccount:\n  burst: 1\n  count: 1\n  period: 1h\n")
	t.Chdir("../..") // the repository root, where config/forward-auth.yaml is
	check := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"check-config"}, args...), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	none := emptyOverrides(t, dir)
	if code, out := check("--defaults", defaults, "--overrides", none); code != 0 ||
		!strings.Contains(out, "config/forward-auth.yaml (not used: the built-in path, and it does not fit these limit files; name a forward-auth file with --forward-auth: config/forward-auth.yaml:") {
		t.Errorf("other defaults, no --forward-auth: exit %d, output:\n%s", code, out)
	}
	// Limit files that the bundled rules fit: the built-in path is used.
	if code, out := check("--overrides", none); code != 0 || !strings.Contains(out, ", config/forward-auth.yaml (5 forward-auth rules)") {
		t.Errorf("other overrides alone, no --forward-auth: exit %d, output:\n%s", code, out)
	}
	if code, out := check("--defaults", defaults, "--overrides", none, "--forward-auth", "config/forward-auth.yaml"); code != 1 ||
		!strings.Contains(out, "config/forward-auth.yaml:") || !strings.Contains(out, "unknown limit name") {
		t.Errorf("other defaults with the bundled rules named: exit %d, output:\n%s; want its unknown limits reported", code, out)
	}
	t.Setenv("LIMITER_FORWARD_AUTH", "config/forward-auth.yaml")
	if code, out := check("--defaults", defaults, "--overrides", none); code != 1 || !strings.Contains(out, "config/forward-auth.yaml:") {
		t.Errorf("LIMITER_FORWARD_AUTH set: exit %d, output:\n%s; want it checked", code, out)
	}
	os.Unsetenv("LIMITER_FORWARD_AUTH") // restored by t.Setenv's cleanup
	if code, out := check(); code != 0 || !strings.Contains(out, ", config/forward-auth.yaml (") || strings.Contains(out, "no such file") {
		t.Errorf("the bundled files: exit %d, output:\n%s", code, out)
	}
}

// serve's --forward-auth: the bundled file unless given; the environment
// gives it, a flag beats the environment. With other limit files, the
// built-in path of a rules file not named is loose (used only if it fits
// them); one named with them is not. The descriptors file pairs the same
// way.
func TestServeFlagsForwardAuth(t *testing.T) {
	const fa, desc = "config/forward-auth.yaml", "config/descriptors.yaml"
	tests := []struct {
		name                 string
		args                 []string
		env                  map[string]string
		wantForwardAuth      string
		wantLooseForwardAuth bool
		wantDescriptors      string
		wantLooseDescriptors bool
	}{
		{"defaults", nil, nil, fa, false, desc, false},
		{"the flag", []string{"--forward-auth=/etc/limiter/forward-auth.yaml"}, nil, "/etc/limiter/forward-auth.yaml", false, desc, false},
		{"the environment", nil, map[string]string{"LIMITER_FORWARD_AUTH": "rules.yaml"}, "rules.yaml", false, desc, false},
		{"a flag beats the environment", []string{"--forward-auth="}, map[string]string{"LIMITER_FORWARD_AUTH": "rules.yaml"}, "", false, desc, false},
		{"other defaults make both built-in rules files loose", []string{"--defaults=/etc/limiter/defaults.yaml"}, nil, fa, true, desc, true},
		{"other overrides too", []string{"--overrides=/etc/limiter/overrides.yaml"}, nil, fa, true, desc, true},
		{"other defaults from the environment", nil, map[string]string{"LIMITER_DEFAULTS": "/etc/limiter/defaults.yaml"}, fa, true, desc, true},
		{"a named forward-auth file is not loose", []string{"--defaults=d.yaml", "--forward-auth=f.yaml"}, nil, "f.yaml", false, desc, true},
		{"nor one from the environment", []string{"--defaults=d.yaml"},
			map[string]string{"LIMITER_FORWARD_AUTH": "f.yaml"}, "f.yaml", false, desc, true},
		{"nor the bundled file named", []string{"--defaults=d.yaml", "--forward-auth=config/forward-auth.yaml"}, nil, fa, false, desc, true},
		{"each rules file on its own", []string{"--overrides=o.yaml", "--descriptors=x.yaml"}, nil, fa, true, "x.yaml", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			f, err := parseServeFlags(tt.args, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if f.forwardAuth != tt.wantForwardAuth || f.loose[forwardAuthFile] != tt.wantLooseForwardAuth ||
				f.descriptors != tt.wantDescriptors || f.loose[descriptorsFile] != tt.wantLooseDescriptors {
				t.Errorf("forwardAuth %q (loose %v), descriptors %q (loose %v); want %q (%v), %q (%v)",
					f.forwardAuth, f.loose[forwardAuthFile], f.descriptors, f.loose[descriptorsFile],
					tt.wantForwardAuth, tt.wantLooseForwardAuth, tt.wantDescriptors, tt.wantLooseDescriptors)
			}
		})
	}
}

// The forward-auth file is reloaded with the limit files and checked
// against the new ones. A bad file fails the whole reload: nothing is
// swapped, not even limit files that alone would load, and the failure is
// counted and logged at its line. A good one is handed over, before the
// limits it names are put in use.
func TestReloadForwardAuth(t *testing.T) {
	dir := t.TempDir()
	write := writer(t, dir)
	const keyLimit = "APIRequestsPerKey:\n  enum: 102\n  id: string\n  burst: 100\n  count: 100\n  period: 1s\n"
	const pathLimit = "RequestsPerPath:\n  enum: 130\n  id: string\n  burst: 10\n  count: 10\n  period: 1s\n"
	const keyRule = "rules:\n  api:\n    limits:\n      - {limit: APIRequestsPerKey, id: header:X-Api-Key}\n"
	const pathRule = "  paths:\n    limits:\n      - {limit: RequestsPerPath, id: path}\n"
	defaults := write("defaults.yaml", keyLimit)
	rulesFile := write("forward-auth.yaml", keyRule)
	cfg := parseDefaults(t, defaults)
	limiter, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.NewFake())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	f := &serveFlags{configFlags: configFlags{defaults: defaults, forwardAuth: rulesFile}}
	r := newReloader(f, nil, limiter, bearer.NewTokens(nil, nil), slog.New(slog.NewTextHandler(&logs, nil)), reg)
	var handed []*forwardauth.Rules
	var configWhenHanded []*ratelimits.Config
	r.setForwardAuth = func(rs *forwardauth.Rules) {
		handed = append(handed, rs)
		configWhenHanded = append(configWhenHanded, limiter.Config())
	}

	// A rule naming a limit no file declares.
	write("forward-auth.yaml", keyRule+pathRule)
	err = r.Reload("test")
	if err == nil || !strings.Contains(err.Error(), rulesFile+":7: RequestsPerPath: unknown limit name") {
		t.Fatalf("Reload = %v; want the unknown limit at %s:7", err, rulesFile)
	}
	if len(handed) != 0 || limiter.Config() != cfg {
		t.Fatalf("a failed reload swapped something: %d rule sets handed over", len(handed))
	}
	if n := counter(t, reg, "limiter_config_reload_failures_total"); n != 1 {
		t.Errorf("limiter_config_reload_failures_total = %v; want 1", n)
	}
	if !strings.Contains(logs.String(), "reload failed") || !strings.Contains(logs.String(), rulesFile+":7") {
		t.Errorf("the log lacks the problem:\n%s", logs.String())
	}

	// The same reload declares it: the new rules are handed over, then
	// the new limits put in use.
	write("defaults.yaml", keyLimit+pathLimit)
	logs.Reset()
	if err := r.Reload("test"); err != nil {
		t.Fatal(err)
	}
	if len(handed) != 1 || !slices.Equal(handed[0].Names(), []string{"api", "paths"}) {
		t.Fatalf("handed over %d rule sets; want one with api and paths", len(handed))
	}
	if configWhenHanded[0] != cfg {
		t.Error("the limits were swapped before the rules that name them were handed over")
	}
	if _, ok := limiter.Config().Lookup("RequestsPerPath"); !ok {
		t.Error("the new limit is not in use")
	}
	if n := counter(t, reg, "limiter_config_reloads_total"); n != 1 {
		t.Errorf("limiter_config_reloads_total = %v; want 1", n)
	}
	if !strings.Contains(logs.String(), "forward_auth="+rulesFile) || !strings.Contains(logs.String(), "forward_auth_rules=2") {
		t.Errorf("the reload's log line does not name the file and its rules:\n%s", logs.String())
	}
	running := limiter.Config()

	// Limit files that drop the limit a rule names.
	write("defaults.yaml", keyLimit)
	if err := r.Reload("test"); err == nil || !strings.Contains(err.Error(), rulesFile+":7: RequestsPerPath: unknown limit name") {
		t.Fatalf("Reload = %v; want the rule's limit refused", err)
	}
	if len(handed) != 1 || limiter.Config() != running {
		t.Error("limit files that break a rule were put in use")
	}

	// Good new limits and a broken rules file: the limits are not
	// swapped either.
	write("defaults.yaml", keyLimit+pathLimit+"Extra:\n  enum: 131\n  id: string\n  burst: 1\n  count: 1\n  period: 1s\n")
	write("forward-auth.yaml", "trusted_proxies: [10.0.0.0/33]\n"+keyRule)
	logs.Reset()
	if err := r.Reload("test"); err == nil || !strings.Contains(err.Error(), rulesFile+":1: trusted proxy") {
		t.Fatalf("Reload = %v; want the bad CIDR at %s:1", err, rulesFile)
	}
	if _, ok := limiter.Config().Lookup("Extra"); ok || len(handed) != 1 || limiter.Config() != running {
		t.Error("a reload with a broken forward-auth file swapped the limits or the rules")
	}
	if !strings.Contains(logs.String(), rulesFile+":1") {
		t.Errorf("the log lacks the problem:\n%s", logs.String())
	}

	// Broken limit files and a broken rules file: every problem is told.
	write("defaults.yaml", "APIRequestsPerKey:\n  enum: 102\n  id: string\n  burst: 0\n  count: 100\n  period: 1s\n")
	write("forward-auth.yaml", "rules:\n  api:\n    limits: []\n")
	logs.Reset()
	err = r.Reload("test")
	for _, want := range []string{defaults + ":4: APIRequestsPerKey: burst must be greater than 0", rulesFile + ":3: limits is empty"} {
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(logs.String(), want) {
			t.Errorf("Reload = %v; want %q in it and in the log:\n%s", err, want, logs.String())
		}
	}
	if n := counter(t, reg, "limiter_config_reload_failures_total"); n != 4 {
		t.Errorf("limiter_config_reload_failures_total = %v; want 4", n)
	}

	// A file that was in use and is now gone, or blank, fails the reload
	// and keeps the rules; its explicit empty form removes every rule.
	write("defaults.yaml", keyLimit)
	os.Remove(rulesFile)
	if err := r.Reload("test"); err == nil || !strings.Contains(err.Error(), rulesFile+": the forward-auth file is gone") {
		t.Fatalf("Reload with the file gone = %v; want it refused", err)
	}
	write("forward-auth.yaml", "# being written\n")
	if err := r.Reload("test"); err == nil || !strings.Contains(err.Error(), rulesFile+": the forward-auth file is empty") {
		t.Fatalf("Reload with the file blank = %v; want it refused", err)
	}
	// So does one cut short after its proxies, or with rules left null:
	// no rules, but none of the empty forms.
	for _, cut := range []string{"trusted_proxies: [10.0.0.0/8]\n", "trusted_proxies: [10.0.0.0/8]\nrules:\n"} {
		write("forward-auth.yaml", cut)
		if err := r.Reload("test"); err == nil || !strings.Contains(err.Error(), rulesFile+": the forward-auth file has no rules (rules is missing or null) while its rules are in use") {
			t.Fatalf("Reload with %q = %v; want it refused", cut, err)
		}
	}
	if n := counter(t, reg, "limiter_config_reload_failures_total"); n != 8 || len(handed) != 1 {
		t.Errorf("limiter_config_reload_failures_total = %v, %d rule sets handed over; want 8 and the one of the good reload", n, len(handed))
	}
	for _, empty := range []string{"{}\n", "rules: {}\n", "[]\n"} {
		write("forward-auth.yaml", empty)
		if err := r.Reload("test"); err != nil {
			t.Fatalf("Reload with %q: %v", empty, err)
		}
		if last := handed[len(handed)-1]; last.Count() != 0 {
			t.Errorf("after %q: the last rule set handed over has %d rules; want none", empty, last.Count())
		}
		write("forward-auth.yaml", keyRule)
		if err := r.Reload("test"); err != nil {
			t.Fatal(err)
		}
	}
	// With no rules in use, a file of proxies alone is no rules, as at
	// the start.
	write("forward-auth.yaml", "{}\n")
	if err := r.Reload("test"); err != nil {
		t.Fatal(err)
	}
	write("forward-auth.yaml", "trusted_proxies: [10.0.0.0/8]\n")
	if err := r.Reload("test"); err != nil || handed[len(handed)-1].Count() != 0 {
		t.Fatalf("Reload with proxies alone and no rules in use: %v", err)
	}
}

// Without a holder for the rules, the forward-auth file is still
// checked: a bad one fails the reload, a good one reloads.
func TestReloadForwardAuthWithoutHolder(t *testing.T) {
	dir := t.TempDir()
	write := writer(t, dir)
	defaults := write("defaults.yaml", "NewOrdersPerAccount:\n  burst: 5\n  count: 5\n  period: 1h\n")
	rulesFile := filepath.Join(dir, "forward-auth.yaml")
	cfg := parseDefaults(t, defaults)
	limiter, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.NewFake())
	if err != nil {
		t.Fatal(err)
	}
	f := &serveFlags{configFlags: configFlags{defaults: defaults, forwardAuth: rulesFile}}
	r := newReloader(f, nil, limiter, bearer.NewTokens(nil, nil), slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err := r.Reload("test"); err != nil {
		t.Fatalf("a missing forward-auth file: %v", err)
	}
	write("forward-auth.yaml", "rules:\n  orders:\n    limits: [{limit: NewOrdersPerAccount, id: client_ip}]\n")
	if err := r.Reload("test"); err == nil || !strings.Contains(err.Error(), rulesFile+":3: NewOrdersPerAccount: client_ip gives addresses") {
		t.Fatalf("Reload = %v; want the bad file refused", err)
	}
	write("forward-auth.yaml", "rules:\n  orders:\n    limits: [{limit: NewOrdersPerAccount, id: header:X-Account}]\n")
	if err := r.Reload("test"); err != nil {
		t.Fatalf("a good file: %v", err)
	}
}

// The watch sees a change of the forward-auth file, as of the others.
func TestReloadSignatureHasForwardAuth(t *testing.T) {
	dir := t.TempDir()
	r := &reloader{files: configFlags{
		defaults:    filepath.Join(dir, "defaults.yaml"),
		overrides:   filepath.Join(dir, "overrides.yaml"),
		forwardAuth: filepath.Join(dir, "forward-auth.yaml"),
	}}
	before := r.signature()
	if err := os.WriteFile(r.files.forwardAuth, []byte("rules: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	created := r.signature()
	if created == before {
		t.Fatal("creating the forward-auth file left the signature as it was")
	}
	if err := os.WriteFile(r.files.forwardAuth, []byte("# none yet\nrules: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r.signature() == created {
		t.Error("rewriting the forward-auth file left the signature as it was")
	}
	if err := os.Remove(r.files.forwardAuth); err != nil {
		t.Fatal(err)
	}
	if r.signature() == created {
		t.Error("removing the forward-auth file left the signature as it was")
	}
}

// The token files are read with the rules files, and swapped only with
// them: a reload refused for its forward-auth file keeps the tokens in use
// too, and the next good reload brings the new ones.
func TestReloadForwardAuthKeepsTokens(t *testing.T) {
	dir := t.TempDir()
	write := writer(t, dir)
	defaults := write("defaults.yaml", "NewOrdersPerAccount:\n  burst: 5\n  count: 5\n  period: 1h\n")
	tokenFile := write("api-tokens", "old-token\n")
	rulesFile := write("forward-auth.yaml", "rules:\n  orders:\n    limits: [{limit: NewOrdersPerAccount, id: header:X-Account}]\n")
	cfg := parseDefaults(t, defaults)
	limiter, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.NewFake())
	if err != nil {
		t.Fatal(err)
	}
	tokens := bearer.NewTokens([][]byte{[]byte("old-token")}, nil)
	f := &serveFlags{configFlags: configFlags{defaults: defaults, forwardAuth: rulesFile}, apiTokenFile: tokenFile}
	r := newReloader(f, nil, limiter, tokens, slog.New(slog.DiscardHandler), prometheus.NewRegistry())

	write("api-tokens", "new-token\n")
	write("forward-auth.yaml", "rules:\n  orders:\n    limits: []\n")
	if err := r.Reload("test"); err == nil || !strings.Contains(err.Error(), rulesFile+":3: limits is empty") {
		t.Fatalf("Reload = %v; want the bad rules file refused", err)
	}
	if !tokens.Allows(bearer.API, []byte("old-token")) || tokens.Allows(bearer.API, []byte("new-token")) {
		t.Error("a reload refused for its forward-auth file swapped the tokens")
	}

	write("forward-auth.yaml", "rules: {}\n")
	if err := r.Reload("test"); err != nil {
		t.Fatal(err)
	}
	if tokens.Allows(bearer.API, []byte("old-token")) || !tokens.Allows(bearer.API, []byte("new-token")) {
		t.Error("a good reload did not put the new token in use")
	}
}

// A loose forward-auth file (the built-in path beside limit files given by
// flag) that does not fit the limits is left out: the reload succeeds
// with no rules in use. Once it fits, its rules are used, and from then
// on it must load as a named file must.
func TestReloadLooseForwardAuth(t *testing.T) {
	dir := t.TempDir()
	write := writer(t, dir)
	defaults := write("defaults.yaml", "NewOrdersPerAccount:\n  burst: 5\n  count: 5\n  period: 1h\n")
	rulesFile := write("forward-auth.yaml", "rules:\n  orders:\n    limits: [{limit: NoSuchLimit, id: header:X-Account}]\n")
	cfg := parseDefaults(t, defaults)
	limiter, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.NewFake())
	if err != nil {
		t.Fatal(err)
	}
	f := &serveFlags{configFlags: configFlags{defaults: defaults, forwardAuth: rulesFile, loose: [fileRoles]bool{forwardAuthFile: true}}}
	r := newReloader(f, nil, limiter, bearer.NewTokens(nil, nil), slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	var inUse *forwardauth.Rules
	swaps := 0
	r.setForwardAuth = func(rs *forwardauth.Rules) { inUse, swaps = rs, swaps+1 }
	if err := r.Reload("test"); err != nil {
		t.Fatalf("a loose file that does not fit: %v; want it left out", err)
	}
	if swaps != 1 || inUse.Count() != 0 {
		t.Fatalf("%d swaps, %d rules in use; want the reload to put no rules in use", swaps, inUse.Count())
	}
	write("forward-auth.yaml", "rules:\n  orders:\n    limits: [{limit: NewOrdersPerAccount, id: header:X-Account}]\n")
	if err := r.Reload("test"); err != nil || inUse.Count() != 1 {
		t.Fatalf("a loose file that fits: %v, %d rules; want it used", err, inUse.Count())
	}
	// Its rules now serve: a problem in it refuses the reload, as it
	// would in a named file, rather than dropping them.
	for _, broken := range []string{
		"rules:\n  orders:\n    limits: [{limit: NewOrdersPerAccount, id: header:X-Account}]\n    cost: two\n",
		"rules:\n  orders:\n    limits: [{limit: NoSuchLimit, id: header:X-Account}]\n",
	} {
		write("forward-auth.yaml", broken)
		if err := r.Reload("test"); err == nil || !strings.Contains(err.Error(), rulesFile) || swaps != 2 || inUse.Count() != 1 {
			t.Errorf("a loose file in use that breaks: %v, %d swaps, %d rules; want the reload refused naming the file, the rule kept", err, swaps, inUse.Count())
		}
	}
}
