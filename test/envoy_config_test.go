package test

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	apiclient "github.com/limiter-dev/limiter/client"
)

// The rules files the config tests swap in, and where their problems are.
const (
	// envoyRulesPlusUser adds [user] → EnvoyDaily to the edge domain.
	envoyRulesPlusUser = `- domain: edge
  descriptors:
    - keys: [api_key]
      limit: EnvoyByKey
    - keys: [user]
      limit: EnvoyDaily
`
	// envoyRulesUnknownField has a misspelt field on line 5.
	envoyRulesUnknownField = `- domain: edge
  descriptors:
    - keys: [api_key]
      limit: EnvoyByKey
      limt: EnvoyDaily
`
	// envoyRulesUnknownLimit names a limit that does not exist on line 4.
	envoyRulesUnknownLimit = `- domain: edge
  descriptors:
    - keys: [api_key]
      limit: NoSuchLimit
`
	// envoyRulesRepeatedKeys gives one key list twice, the second on line 5.
	envoyRulesRepeatedKeys = `- domain: edge
  descriptors:
    - keys: [api_key]
      limit: EnvoyByKey
    - keys: [api_key]
      limit: EnvoyDaily
`
)

// The rules file is reloaded with the limit files: on SIGHUP a new rule
// takes effect; a broken file is refused, by SIGHUP and by the admin
// endpoint, and the rules in use are kept.
func TestEnvoyRulesReload(t *testing.T) {
	env, rules := envoyConfig(t, envoyRules)
	e := startEnvoy(t, procOptions{Env: env})
	limitOf := func(d ...string) string { // the limit a descriptor of edge maps to, "" for none
		t.Helper()
		resp := e.mustShould(t, rlRequest("edge", desc(d...)))
		if len(resp.GetStatuses()) != 1 {
			t.Fatalf("answer %v", resp)
		}
		return resp.GetStatuses()[0].GetCurrentLimit().GetName()
	}
	hup := func() {
		t.Helper()
		if err := e.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	if got := limitOf("user", "u0"); got != "" {
		t.Fatalf("[user] maps to %q before any rule names it", got)
	}

	replaceFile(t, rules, envoyRulesPlusUser)
	hup()
	pollUntil(t, 5*time.Second, "the new rule in use after SIGHUP", func() bool { return limitOf("user", "u1") == "EnvoyDaily" })
	if got := limitOf("remote_address", "192.0.2.1"); got != "" {
		t.Errorf("a rule the new file dropped still maps to %q", got)
	}

	for _, bad := range []struct{ name, rules, where string }{
		{"unknown field", envoyRulesUnknownField, "descriptors.yaml:5"},
		{"unknown limit", envoyRulesUnknownLimit, "descriptors.yaml:4"},
	} {
		failures := metricValue(e.limiterProc, e.URL, "limiter_config_reload_failures_total")
		replaceFile(t, rules, bad.rules)
		hup()
		pollUntil(t, 5*time.Second, bad.name+": the failed reload counted", func() bool {
			return metricValue(e.limiterProc, e.URL, "limiter_config_reload_failures_total") == failures+1
		})
		var refusal *apiclient.Error
		if err := e.api().Reload(context.Background()); !errors.As(err, &refusal) || refusal.StatusCode != 422 || !strings.Contains(refusal.Message, bad.where) {
			t.Errorf("%s: admin reload %v, want 422 naming %s", bad.name, err, bad.where)
		}
		if a, b := limitOf("user", "u2"), limitOf("api_key", "k2"); a != "EnvoyDaily" || b != "EnvoyByKey" {
			t.Errorf("%s: after the refused reload [user] maps to %q and [api_key] to %q; want the rules in use kept", bad.name, a, b)
		}
	}
	if !e.alive() {
		t.Fatalf("the process exited:\n%s", e.logs())
	}
}

// A broken rules file stops `limiter serve` before it listens, and
// `limiter check-config` reports it, each problem at its file and line.
func TestEnvoyBadRulesFile(t *testing.T) {
	dir := t.TempDir()
	defaults := writeFile(t, dir, "defaults.yaml", envoyDefaults)
	overrides := writeFile(t, dir, "overrides.yaml", "[]\n")
	for _, bad := range []struct{ name, rules, where, what string }{
		{"unknown field", envoyRulesUnknownField, "descriptors.yaml:5", "limt"},
		{"unknown limit", envoyRulesUnknownLimit, "descriptors.yaml:4", "NoSuchLimit"},
		{"repeated keys", envoyRulesRepeatedKeys, "descriptors.yaml:5", "api_key"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			rules := writeFile(t, t.TempDir(), "descriptors.yaml", bad.rules)
			out, err := refusesToServe(t, "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0",
				"--defaults", defaults, "--overrides", overrides, "--descriptors", rules)
			if err == nil || !strings.Contains(out, bad.where) || !strings.Contains(out, bad.what) || strings.Contains(out, "msg=listening") {
				t.Errorf("serve with a broken rules file: %v\n%s\nwant a refusal naming %s and %s before listening", err, out, bad.where, bad.what)
			}
			checked, err := exec.Command(binary, "check-config", "--defaults", defaults, "--overrides", overrides, "--descriptors", rules).CombinedOutput()
			out = string(checked)
			exit, ok := err.(*exec.ExitError)
			if !ok || exit.ExitCode() != 1 || !strings.Contains(out, bad.where) || !strings.Contains(out, bad.what) {
				t.Errorf("check-config: %v\n%s\nwant exit 1 naming %s and %s", err, out, bad.where, bad.what)
			}
		})
	}
	good := writeFile(t, dir, "descriptors.yaml", envoyRules)
	out, err := exec.Command(binary, "check-config", "--defaults", defaults, "--overrides", overrides, "--descriptors", good).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok:") {
		t.Errorf("check-config of good files: %v\n%s", err, out)
	}
}

// refusesToServe runs `limiter serve` with args and returns its output
// and exit. A serve that starts listening instead is stopped at once,
// its output ending in the listening line, and the error is nil.
func refusesToServe(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve"}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if listeningLine.MatchString(sc.Text()) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return out.String(), nil
		}
	}
	return out.String(), cmd.Wait()
}
