package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check-config on a defaults file with a YAML syntax error and overrides of
// the names it declares: the syntax error is the one problem printed, not
// followed by an "unknown limit name" for each override.
func TestCheckConfigDefaultsSyntaxError(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	defaults := write("defaults.yaml", "Logins:\n  enum: 101\n  id: [string\n  burst: 5\n")
	overrides := write("overrides.yaml", "- Logins:\n    burst: 9\n    count: 9\n    period: 1m\n    ids: [{id: alice}]\n"+
		"- Signups:\n    burst: 9\n    count: 9\n    period: 1m\n    ids: [{id: bob}]\n")
	var stdout, stderr bytes.Buffer
	code := run([]string{"check-config", "--defaults", defaults, "--overrides", overrides}, &stdout, &stderr)
	out := stdout.String()
	if code != 1 || !strings.Contains(out, defaults+":3: YAML syntax error") || !strings.HasSuffix(out, "1 problem(s) found\n") {
		t.Fatalf("exit %d, output:\n%s%s", code, out, stderr.String())
	}
	if strings.Contains(out, "unknown limit name") {
		t.Errorf("overrides reported as unknown names:\n%s", out)
	}
}

// A named overrides file that is missing does not hide the defaults
// file's own problems: one run lists them all.
func TestCheckConfigMissingOverridesAndBadDefaults(t *testing.T) {
	dir := t.TempDir()
	defaults := filepath.Join(dir, "defaults.yaml")
	if err := os.WriteFile(defaults, []byte("Logins:\n  enum: 101\n  id: string\n  burst: 0\n  count: 5\n  period: 1m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"check-config", "--defaults", defaults, "--overrides", filepath.Join(dir, "nope.yaml")}, &stdout, &stderr)
	out := stdout.String()
	if code != 1 || !strings.Contains(out, "nope.yaml: no such file") || !strings.Contains(out, defaults+":4: Logins: burst must be greater than 0") ||
		!strings.HasSuffix(out, "2 problem(s) found\n") {
		t.Fatalf("exit %d, output:\n%s%s", code, out, stderr.String())
	}
}

// check-config reports the rules of window and rate-counter limits at
// their lines, and exits 1; the same files fixed pass.
func TestCheckConfigWindows(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	defaults := write("defaults.yaml", "API:\n  enum: 120\n  id: string\n  algorithm: sliding-window\n  burst: 5\n  count: 5\n  period: 1500ms\n  sync_rate: 0.0001\n"+
		"Meter:\n  enum: 121\n  id: ip\n  algorithm: rate-counter\n  window: 30s\n  rate: 100\n  penalty: 10m\n")
	overrides := write("overrides.yaml", "- API:\n    algorithm: fixed-window\n    count: 9\n    period: 1m\n    ids: [{id: alice}]\n")
	var stdout, stderr bytes.Buffer
	code := run([]string{"check-config", "--defaults", defaults, "--overrides", overrides}, &stdout, &stderr)
	want := []string{
		defaults + ":5: API: burst is not a field of a sliding-window limit",
		defaults + ":7: API: a window's period must be a whole number of seconds, got 1.5s",
		defaults + ":8: API: sync_rate 0.0001 is between 0 and 0.001",
		defaults + ":13: Meter: window must be 1s, 10s or 60s, got 30s",
		overrides + ":2: API: an override cannot set algorithm",
		"5 problem(s) found",
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if code != 1 || len(lines) != len(want) {
		t.Fatalf("exit %d, output:\n%s%s", code, stdout.String(), stderr.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q; want it to start %q", i, lines[i], w)
		}
	}

	write("defaults.yaml", "API:\n  enum: 120\n  id: string\n  algorithm: sliding-window\n  count: 5\n  period: 1m\n  sync_rate: -1\n"+
		"Meter:\n  enum: 121\n  id: ip\n  algorithm: rate-counter\n  window: 10s\n  rate: 100\n  penalty: 10m\n")
	write("overrides.yaml", "- API:\n    count: 9\n    period: 1m\n    ids: [{id: alice}]\n")
	stdout.Reset()
	if code := run([]string{"check-config", "--defaults", defaults, "--overrides", overrides}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "ok: ") {
		t.Errorf("fixed files: exit %d, output:\n%s", code, stdout.String())
	}
}

// check-config checks the descriptors file against the limits the other
// two files load: its problems are printed at their FILE:LINE after the
// limit files' own, and counted with them; the ok line names the file and
// its rules, or says that it is missing.
func TestCheckConfigDescriptors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const goodDefaults = "APIRequestsPerKey:\n  enum: 102\n  id: string\n  burst: 100\n  count: 100\n  period: 1s\n"
	const badDefaults = "APIRequestsPerKey:\n  enum: 102\n  id: string\n  burst: 0\n  count: 100\n  period: 1s\n"
	defaults := write("defaults.yaml", goodDefaults)
	overrides := emptyOverrides(t, dir)
	const goodRules = "- domain: edge\n  descriptors:\n    - keys: [api_key]\n      limit: APIRequestsPerKey\n    - keys: [remote_address]\n      limit: NewRegistrationsPerIPAddress\n"
	const badRules = "- domain: edge\n  descriptors:\n    - keys: [api_key]\n      limit: APIRequestPerKey\n    - keys: []\n      limit: APIRequestsPerKey\n"
	// Other limit files and no --forward-auth: the built-in path is
	// tried, and here (the package's directory) it has no file.
	const noForwardAuth = ", config/forward-auth.yaml (no such file: no forward-auth rules)"
	tests := []struct {
		name     string
		defaults string // empty: the good defaults
		rules    string // written to descriptors.yaml unless missing
		missing  bool
		code     int
		want     []string // the output's lines, each a prefix
	}{
		{"good", "", goodRules, false, 0, []string{
			"ok: " + defaults + " (1 limits with defaults), " + overrides + " (0 overrides), " + filepath.Join(dir, "descriptors.yaml") + " (2 descriptor rules)" + noForwardAuth}},
		{"missing", "", "", true, 1, []string{
			filepath.Join(dir, "descriptors.yaml") + ": no such file (named by --descriptors or LIMITER_DESCRIPTORS)",
			"1 problem(s) found"}},
		{"empty", "", "# rules come later\n", false, 0, []string{
			"ok: " + defaults + " (1 limits with defaults), " + overrides + " (0 overrides), " + filepath.Join(dir, "descriptors.yaml") + " (0 descriptor rules)" + noForwardAuth}},
		{"bad rules", "", badRules, false, 1, []string{
			filepath.Join(dir, "descriptors.yaml") + ":4: APIRequestPerKey: unknown limit name",
			filepath.Join(dir, "descriptors.yaml") + ":5: keys is empty",
			"2 problem(s) found"}},
		{"bad limits and bad rules", badDefaults, badRules, false, 1, []string{
			filepath.Join(dir, "bad-defaults.yaml") + ":4: APIRequestsPerKey: burst must be greater than 0",
			filepath.Join(dir, "descriptors.yaml") + ":5: keys is empty",
			"2 problem(s) found"}},
		{"bad limits, rules whose names cannot be checked", badDefaults, goodRules, false, 1, []string{
			filepath.Join(dir, "bad-defaults.yaml") + ":4: APIRequestsPerKey: burst must be greater than 0",
			filepath.Join(dir, "descriptors.yaml") + ": the limit names of its rules were not checked",
			"1 problem(s) found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := filepath.Join(dir, "descriptors.yaml")
			os.Remove(rules)
			if !tt.missing {
				write("descriptors.yaml", tt.rules)
			}
			d := defaults
			if tt.defaults != "" {
				d = write("bad-defaults.yaml", tt.defaults)
			}
			var stdout, stderr bytes.Buffer
			code := run([]string{"check-config", "--defaults", d, "--overrides", overrides, "--descriptors", rules}, &stdout, &stderr)
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

// The bundled files check: the descriptors and forward-auth files' rules
// all name limits of the bundled defaults.
func TestCheckConfigBundledFiles(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"check-config", "--defaults", "../../config/defaults.yaml", "--overrides", "../../config/overrides.yaml",
		"--descriptors", "../../config/descriptors.yaml", "--forward-auth", "../../config/forward-auth.yaml"}, &stdout, &stderr)
	if code != 0 || !strings.HasPrefix(stdout.String(), "ok: ") || strings.Contains(stdout.String(), "(0 descriptor rules)") ||
		strings.Contains(stdout.String(), "(0 forward-auth rules)") || strings.Contains(stdout.String(), "no such file") {
		t.Fatalf("exit %d, output:\n%s%s", code, stdout.String(), stderr.String())
	}
}

// The bundled descriptors file goes with the bundled limit files: run from
// the repository root with other limit files and no --descriptors, it is
// not read (its rules name limits those files need not have), and
// check-config says so; named by flag or environment, it is checked.
func TestCheckConfigDescriptorsPairWithTheLimitFiles(t *testing.T) {
	dir := t.TempDir()
	defaults := filepath.Join(dir, "defaults.yaml")
	if err := os.WriteFile(defaults, []byte("NewOrdersPerAccount:\n  burst: 1\n  count: 1\n  period: 1h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir("../..") // the repository root, where config/descriptors.yaml is
	check := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"check-config"}, args...), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	none := emptyOverrides(t, dir)
	if code, out := check("--defaults", defaults, "--overrides", none); code != 0 || !strings.Contains(out, "config/descriptors.yaml (not used: the built-in path, and it does not fit these limit files") {
		t.Errorf("other defaults, no --descriptors: exit %d, output:\n%s", code, out)
	}
	if code, out := check("--defaults", defaults, "--overrides", none, "--descriptors", "config/descriptors.yaml"); code != 1 || !strings.Contains(out, "config/descriptors.yaml:") {
		t.Errorf("other defaults with the bundled descriptors named: exit %d, output:\n%s; want its unknown limits reported", code, out)
	}
	t.Setenv("LIMITER_DESCRIPTORS", "config/descriptors.yaml")
	if code, out := check("--defaults", defaults, "--overrides", none); code != 1 || !strings.Contains(out, "unknown limit name") {
		t.Errorf("LIMITER_DESCRIPTORS set: exit %d, output:\n%s; want it checked", code, out)
	}
	os.Unsetenv("LIMITER_DESCRIPTORS") // restored by t.Setenv's cleanup
	if code, out := check(); code != 0 || !strings.Contains(out, "config/descriptors.yaml (") || strings.Contains(out, "no such file") {
		t.Errorf("the bundled files: exit %d, output:\n%s", code, out)
	}
}

// emptyOverrides writes an overrides file with no overrides in dir and
// returns its path: a file named by a flag must exist.
func emptyOverrides(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "empty-overrides.yaml")
	if err := os.WriteFile(path, []byte("[]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
