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
