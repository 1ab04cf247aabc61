package test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The shipped systemd unit (deploy/systemd/limiter.service) and its
// environment file example (deploy/systemd/limiter.env).

const (
	unitFile    = "deploy/systemd/limiter.service"
	unitEnvFile = "deploy/systemd/limiter.env"
	unitBinary  = "/usr/local/bin/limiter"
)

// unitLine is one Key=value line of a unit file, with its section.
type unitLine struct {
	section, key, value string
	n                   int
}

// readUnit reads a unit file's settings (comments and blank lines left
// out; the unit has no continued lines).
func readUnit(t *testing.T, path string) []unitLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []unitLine
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line
		case strings.HasSuffix(line, `\`):
			t.Fatalf("%s:%d: a continued line; the test reads single lines only", path, n)
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s:%d: %q is not Key=value", path, n, line)
			}
			lines = append(lines, unitLine{section, strings.TrimSpace(key), strings.TrimSpace(value), n})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// serveEnvVars are the variables `limiter serve --help` names, one per
// flag.
func serveEnvVars(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command(binary, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("limiter serve --help: %v\n%s", err, out)
	}
	vars := map[string]bool{}
	for _, m := range regexp.MustCompile(`\(env (LIMITER_[A-Z0-9_]+)\)`).FindAllStringSubmatch(string(out), -1) {
		vars[m[1]] = true
	}
	if len(vars) < 10 {
		t.Fatalf("limiter serve --help names %d variables:\n%s", len(vars), out)
	}
	return vars
}

var envAssignment = regexp.MustCompile(`^#?\s*(LIMITER_[A-Z0-9_]+)=`)

// The unit passes systemd-analyze verify (with ExecStart pointed at the
// binary the tests built, since verify wants it to exist), keeps its
// sandbox and the admin tokens' credential, and sets no variable the
// binary does not know; its settings, with the credential in place,
// start a limiter that listens beyond loopback and reloads on SIGHUP.
func TestSystemdUnit(t *testing.T) {
	t.Parallel() // its own limiter
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze is not installed: install systemd, e.g. apt-get install -y systemd (scripts/test.sh does, as root)")
	}
	unitPath := filepath.Join(repoRoot, unitFile)
	lines := readUnit(t, unitPath)
	settings := map[string][]string{}
	for _, l := range lines {
		settings[l.key] = append(settings[l.key], l.value)
	}
	one := func(key string) string {
		if v := settings[key]; len(v) == 1 {
			return v[0]
		}
		t.Errorf("%s: want one %s= line, have %q", unitFile, key, settings[key])
		return ""
	}

	// systemd-analyze verify: no warning, no error.
	b, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nExecStart="+unitBinary+" serve\n") {
		t.Fatalf("%s: no ExecStart=%s serve line", unitFile, unitBinary)
	}
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "limiter.service")
	rewritten := strings.Replace(string(b), "\nExecStart="+unitBinary+" ", "\nExecStart="+binary+" ", 1)
	if err := os.WriteFile(copyPath, []byte(rewritten), 0o644); err != nil {
		t.Fatal(err)
	}
	verify := exec.Command(analyze, "verify", copyPath)
	verify.Env = append(os.Environ(), "SYSTEMD_LOG_LEVEL=notice", "SYSTEMD_PAGER=cat")
	out, err := verify.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unitFile, err, out)
	}

	// The sandbox and the settings the service depends on.
	for key, want := range map[string]string{
		"Type":                    "exec",
		"DynamicUser":             "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"NoNewPrivileges":         "yes",
		"PrivateTmp":              "yes",
		"PrivateDevices":          "yes",
		"ProtectKernelTunables":   "yes",
		"ProtectKernelModules":    "yes",
		"ProtectKernelLogs":       "yes",
		"ProtectControlGroups":    "yes",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"RestrictNamespaces":      "yes",
		"LockPersonality":         "yes",
		"MemoryDenyWriteExecute":  "yes",
		"CapabilityBoundingSet":   "",
		"Restart":                 "on-failure",
		"ExecReload":              "/bin/kill -HUP $MAINPID",
		"LoadCredential":          "admin-tokens:/etc/limiter/admin-tokens",
		"EnvironmentFile":         "-/etc/limiter/limiter.env",
	} {
		if got := one(key); got != want {
			t.Errorf("%s: %s=%s, want %s", unitFile, key, got, want)
		}
	}
	if filter := settings["SystemCallFilter"]; len(filter) == 0 || filter[0] != "@system-service" {
		t.Errorf("%s: SystemCallFilter= %q, want @system-service first", unitFile, filter)
	}
	// Stopping may take the drain (--shutdown-timeout, 15 s) and then as
	// long again pushing the hits of limits counted in process memory.
	if d, err := time.ParseDuration(one("TimeoutStopSec")); err != nil || d <= 2*15*time.Second {
		t.Errorf("%s: TimeoutStopSec=%s, want more than twice the 15 s drain (%v)", unitFile, one("TimeoutStopSec"), err)
	}

	// Every LIMITER_* variable of the unit and of the example file is one
	// the binary reads.
	known := serveEnvVars(t)
	env := map[string]string{}
	for _, v := range settings["Environment"] {
		name, value, _ := strings.Cut(v, "=")
		if strings.ContainsAny(value, " \t\"'") {
			t.Errorf("%s: Environment=%s: one plain assignment a line, please", unitFile, v)
		}
		if !known[name] {
			t.Errorf("%s: Environment=%s: limiter serve --help has no %s", unitFile, v, name)
		}
		env[name] = value
	}
	if env["LIMITER_ADMIN_TOKEN_FILE"] != "%d/admin-tokens" {
		t.Errorf("%s: LIMITER_ADMIN_TOKEN_FILE=%q, want the credential, %%d/admin-tokens", unitFile, env["LIMITER_ADMIN_TOKEN_FILE"])
	}
	envExample, err := os.ReadFile(filepath.Join(repoRoot, unitEnvFile))
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for i, line := range strings.Split(string(envExample), "\n") {
		if m := envAssignment.FindStringSubmatch(line); m != nil {
			named++
			if !known[m[1]] {
				t.Errorf("%s:%d: limiter serve --help has no %s", unitEnvFile, i+1, m[1])
			}
		} else if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
			t.Errorf("%s:%d: %q is neither a LIMITER_* assignment nor a comment", unitEnvFile, i+1, line)
		}
	}
	if named == 0 {
		t.Errorf("%s sets no LIMITER_* variable", unitEnvFile)
	}
	if t.Failed() {
		return
	}

	// The unit's environment as systemd would give it: /etc/limiter with
	// the bundled config files installed as the unit's comments say, the
	// credentials directory holding the admin tokens, and the listen
	// address's port made free. It listens beyond loopback, which it
	// refuses to do without the admin tokens.
	etc, creds := t.TempDir(), t.TempDir()
	for _, name := range []string{"defaults.yaml", "overrides.yaml"} {
		content, err := os.ReadFile(filepath.Join(repoRoot, "config", name))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, etc, name, string(content))
	}
	writeFile(t, creds, "admin-tokens", "a-token-for-the-unit-test\n")
	for k, v := range env {
		v = strings.ReplaceAll(v, "/etc/limiter/", etc+"/")
		env[k] = strings.ReplaceAll(v, "%d", creds)
	}
	if env["LIMITER_LISTEN"] != ":8080" {
		t.Fatalf("%s: LIMITER_LISTEN=%q; the test expects :8080", unitFile, env["LIMITER_LISTEN"])
	}
	env["LIMITER_LISTEN"] = ":0"
	p := startLimiter(t, procOptions{Env: env, Dir: "/"})
	p.URL = strings.Replace(p.URL, "http://[::]:", "http://127.0.0.1:", 1)
	if !strings.Contains(p.logs(), "auth=true") {
		t.Errorf("the unit's limiter has no tokens:\n%s", p.logs())
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 10*time.Second, "a reload on SIGHUP (ExecReload)", func() bool {
		return metricValue(p, p.URL, "limiter_config_reloads_total") == 1
	})
	if v := metricValue(p, p.URL, "limiter_config_reload_failures_total"); v != 0 {
		t.Errorf("reload failures: %v\n%s", v, p.logs())
	}
}
