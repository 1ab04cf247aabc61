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
	if code != 1 || !strings.Contains(out, defaults+":2: YAML syntax error") || !strings.HasSuffix(out, "1 problem(s) found\n") {
		t.Fatalf("exit %d, output:\n%s%s", code, out, stderr.String())
	}
	if strings.Contains(out, "unknown limit name") {
		t.Errorf("overrides reported as unknown names:\n%s", out)
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
