package test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	apiclient "github.com/limiter-dev/limiter/client"
)

// bundledConfigCopy copies the four bundled configuration files to a
// directory of the test's own and returns the environment that names
// each of them, with the file watch off so that only the test reloads.
func bundledConfigCopy(t *testing.T) (env map[string]string, dir string) {
	t.Helper()
	dir = t.TempDir()
	env = map[string]string{"LIMITER_RELOAD_INTERVAL": "0"}
	for name, variable := range map[string]string{
		"defaults.yaml": "LIMITER_DEFAULTS", "overrides.yaml": "LIMITER_OVERRIDES",
		"descriptors.yaml": "LIMITER_DESCRIPTORS", "forward-auth.yaml": "LIMITER_FORWARD_AUTH",
	} {
		data, err := os.ReadFile(filepath.Join(repoRoot, "config", name))
		if err != nil {
			t.Fatal(err)
		}
		env[variable] = writeFile(t, dir, name, string(data))
	}
	return env, dir
}

// A reload that finds a file whose rules are in use gone, or blank (as a
// write in place leaves it for a moment), keeps everything in use and
// fails: 422 naming the file, a failed-reload count. Only the file's
// explicit empty form removes its rules.
func TestReloadKeepsRulesOfAFileGoneOrBlank(t *testing.T) {
	t.Parallel()
	env, dir := bundledConfigCopy(t)
	e := startEnvoy(t, procOptions{Env: env})
	api := e.api()
	ctx := context.Background()
	override := func() bool { // the bundled override of key-batch-importer in use
		t.Helper()
		d, err := api.Subscriber(ctx, "APIRequestsPerKey", "key-batch-importer")
		if err != nil {
			t.Fatal(err)
		}
		return d.Override
	}
	rule := func() int { return forwardAuth(t, e.limiterProc, "GET", "site", "").Status }
	descriptorRule := func() string { // the limit of an edge descriptor, "" when none
		resp := e.mustShould(t, rlRequest("edge", desc("remote_address", "192.0.2.77")))
		return resp.GetStatuses()[0].GetCurrentLimit().GetName()
	}
	if !override() || rule() != 200 || descriptorRule() == "" {
		t.Fatalf("the bundled rules are not in use at the start: override %v, forward-auth %d, descriptor limit %q", override(), rule(), descriptorRule())
	}
	limitBefore := descriptorRule()

	for _, file := range []string{"overrides.yaml", "descriptors.yaml", "forward-auth.yaml"} {
		path := filepath.Join(dir, file)
		good, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, broken := range []struct {
			name string
			do   func() error
			says string
		}{
			{"moved away", func() error { return os.Rename(path, path+".moved") }, "is gone"},
			{"truncated", func() error { return os.WriteFile(path, nil, 0o644) }, "is empty"},
			{"comments alone", func() error { return os.WriteFile(path, []byte("# being rewritten\n"), 0o644) }, "is empty"},
		} {
			failures := metricValue(e.limiterProc, e.URL, "limiter_config_reload_failures_total")
			if err := broken.do(); err != nil {
				t.Fatal(err)
			}
			var refusal *apiclient.Error
			err := api.Reload(ctx)
			if !errors.As(err, &refusal) || refusal.StatusCode != 422 || !strings.Contains(refusal.Message, path+": ") || !strings.Contains(refusal.Message, broken.says) {
				t.Errorf("%s %s: admin reload %v; want 422 naming %s and saying it %s", file, broken.name, err, path, broken.says)
			}
			if n := metricValue(e.limiterProc, e.URL, "limiter_config_reload_failures_total"); n != failures+1 {
				t.Errorf("%s %s: %v failed reloads counted, want %v", file, broken.name, n, failures+1)
			}
			if !override() || rule() != 200 || descriptorRule() != limitBefore {
				t.Errorf("%s %s: rules dropped: override %v, forward-auth %d, descriptor limit %q", file, broken.name, override(), rule(), descriptorRule())
			}
			os.Remove(path + ".moved")
			if err := os.WriteFile(path, good, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if !strings.Contains(e.logs(), "reload failed; keeping the running configuration and tokens") || !strings.Contains(e.logs(), path) {
			t.Errorf("%s: no error logged naming the file:\n%s", file, e.logs())
		}
	}

	// The explicit empty forms remove every rule, and say so.
	writeFile(t, dir, "overrides.yaml", "[]\n")
	writeFile(t, dir, "descriptors.yaml", "[]\n")
	writeFile(t, dir, "forward-auth.yaml", "{}\n")
	if err := api.Reload(ctx); err != nil {
		t.Fatalf("reload to the empty forms: %v", err)
	}
	if override() || rule() != 404 || descriptorRule() != "" {
		t.Errorf("after the empty forms: override %v, forward-auth %d, descriptor limit %q; want no rules", override(), rule(), descriptorRule())
	}
	// A file that went blank after its empty form was in use fails too.
	writeFile(t, dir, "overrides.yaml", "")
	if err := api.Reload(ctx); err == nil {
		t.Error("reload with an overrides file blanked after [] succeeded")
	}
}

// A file named by a flag or the environment that is not there stops the
// start (exit 2, the path in the message) and fails check-config; only
// the built-in paths may be absent.
func TestStartRefusesAMissingNamedFile(t *testing.T) {
	t.Parallel()
	env, dir := bundledConfigCopy(t)
	missing := filepath.Join(dir, "nowhere.yaml")
	for _, named := range []struct {
		flag     string
		variable string
	}{
		{"--defaults", "LIMITER_DEFAULTS"},
		{"--overrides", "LIMITER_OVERRIDES"},
		{"--descriptors", "LIMITER_DESCRIPTORS"},
		{"--forward-auth", "LIMITER_FORWARD_AUTH"},
	} {
		for _, how := range []string{"flag", "environment"} {
			args := []string{"--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"}
			cmdEnv := []string{"PATH=" + os.Getenv("PATH")}
			for k, v := range env {
				if k != named.variable || how == "flag" {
					cmdEnv = append(cmdEnv, k+"="+v)
				}
			}
			if how == "flag" {
				args = append(args, named.flag, missing)
			} else {
				cmdEnv = append(cmdEnv, named.variable+"="+missing)
			}
			cmd := exec.Command(binary, append([]string{"serve"}, args...)...)
			cmd.Env = cmdEnv
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), missing+": no such file") {
				t.Errorf("serve with %s by %s missing: %v, output:\n%s\nwant exit 2 naming %s", named.flag, how, err, out, missing)
			}
			check := exec.Command(binary, append([]string{"check-config"}, args[4:]...)...)
			check.Env = cmdEnv
			out, err = check.CombinedOutput()
			if err == nil || !strings.Contains(string(out), missing+": no such file") {
				t.Errorf("check-config with %s by %s missing: %v, output:\n%s\nwant a failure naming %s", named.flag, how, err, out, missing)
			}
		}
	}
}

// The start-up log names every file it loaded, with its absolute path and
// the number of rules it gave, and "none" for a built-in path with no file.
func TestStartLogsTheFilesItLoaded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	defaults, err := os.ReadFile(filepath.Join(repoRoot, "config", "defaults.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "config"), "defaults.yaml", string(defaults))
	writeFile(t, filepath.Join(dir, "config"), "overrides.yaml", "- LoginAttemptsPerUser:\n    burst: 1\n    count: 1\n    period: 1m\n    ids: [{id: alice}, {id: bob}]\n")
	p := startLimiter(t, procOptions{Dir: dir, Env: map[string]string{"LIMITER_GRPC_LISTEN": "127.0.0.1:0"}})
	for _, want := range []string{
		`msg="config file loaded" file=defaults path=` + filepath.Join(dir, "config", "defaults.yaml") + " rules=",
		`msg="config file loaded" file=overrides path=` + filepath.Join(dir, "config", "overrides.yaml") + " rules=2",
		`msg="config file absent: no rules from it" file=descriptors path=` + filepath.Join(dir, "config", "descriptors.yaml") + " rules=none",
		`msg="config file absent: no rules from it" file=forward-auth path=` + filepath.Join(dir, "config", "forward-auth.yaml") + " rules=none",
	} {
		if !strings.Contains(p.logs(), want) {
			t.Errorf("the start-up log lacks %q:\n%s", want, p.logs())
		}
	}
}
