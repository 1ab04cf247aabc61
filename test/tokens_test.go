package test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	apiclient "github.com/limiter-dev/limiter/client"
)

// spendWith spends one login attempt presenting token, and returns the
// answer's status.
func spendWith(p *limiterProc, token string) int {
	p.t.Helper()
	c := p.apiWith(apiclient.Options{APIToken: token})
	defer c.Close()
	_, err := c.Spend(context.Background(), apiclient.Transaction{Limit: "LoginAttemptsPerUser", ID: "tok"})
	status, ok := statusOf(err)
	if !ok {
		p.t.Fatalf("spend with a token: %v\n%s", err, p.logs())
	}
	return status
}

// A leaked token is revoked by editing its file and reloading, by SIGHUP
// or the admin endpoint, with no restart; a token file that breaks keeps
// the tokens in use and counts a failed reload.
func TestTokenRotationOnReload(t *testing.T) {
	dir := t.TempDir()
	api := writeFile(t, dir, "api.tokens", "old-token\n")
	admin := writeFile(t, dir, "admin.tokens", "admin-1\n")
	p := startLimiter(t, procOptions{
		Args: []string{"--api-token-file", api, "--admin-token-file", admin},
		Env:  map[string]string{"LIMITER_RELOAD_INTERVAL": "0"},
	})
	hup := func() {
		t.Helper()
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	if s := spendWith(p, "old-token"); s != 200 {
		t.Fatalf("old-token at start: %d", s)
	}

	// Rotation without downtime: both tokens for a while, then only the new.
	replaceFile(t, api, "old-token\nnew-token\n")
	hup()
	pollUntil(t, 3*time.Second, "new-token accepted after SIGHUP", func() bool { return spendWith(p, "new-token") == 200 })
	if s := spendWith(p, "old-token"); s != 200 {
		t.Fatalf("old-token while both are listed: %d", s)
	}
	replaceFile(t, api, "new-token\n")
	hup()
	pollUntil(t, 3*time.Second, "old-token refused after SIGHUP", func() bool { return spendWith(p, "old-token") == 401 })

	// A broken (empty) token file changes nothing and counts as a failure.
	failures := metricValue(p, p.URL, "limiter_config_reload_failures_total")
	replaceFile(t, api, "# every token removed by mistake\n")
	hup()
	pollUntil(t, 3*time.Second, "the failed reload counted", func() bool {
		return metricValue(p, p.URL, "limiter_config_reload_failures_total") == failures+1
	})
	if s := spendWith(p, "new-token"); s != 200 {
		t.Fatalf("new-token after a reload of an empty token file: %d, want it kept", s)
	}

	// The admin endpoint reloads token files too, the admin file included.
	replaceFile(t, api, "newer-token\n")
	replaceFile(t, admin, "admin-2\n")
	operator := p.apiWith(apiclient.Options{AdminToken: "admin-1"})
	if err := operator.Reload(context.Background()); err != nil {
		t.Fatalf("admin reload: %v", err)
	}
	if a, b := spendWith(p, "new-token"), spendWith(p, "newer-token"); a != 401 || b != 200 {
		t.Fatalf("after the admin reload: new-token %d (want 401), newer-token %d (want 200)", a, b)
	}
	if status, _ := statusOf(operator.Reload(context.Background())); status != 401 {
		t.Fatalf("reload with the replaced admin token: %d, want 401", status)
	}
	for _, secret := range []string{"old-token", "new-token", "newer-token", "admin-1", "admin-2"} {
		if strings.Contains(p.logs(), secret) {
			t.Errorf("the log contains %q", secret)
		}
	}
}

// The file watch reloads token files as it does the limit files.
func TestTokenRevocationByFileWatch(t *testing.T) {
	dir := t.TempDir()
	api := writeFile(t, dir, "api.tokens", "leaked-token\n")
	p := startLimiter(t, procOptions{
		Args: []string{"--api-token-file", api},
		Env:  map[string]string{"LIMITER_RELOAD_INTERVAL": "50ms"},
	})
	if s := spendWith(p, "leaked-token"); s != 200 {
		t.Fatalf("leaked-token at start: %d", s)
	}
	replaceFile(t, api, "fresh-token\n")
	pollUntil(t, 3*time.Second, "leaked-token refused after the file changed", func() bool { return spendWith(p, "leaked-token") == 401 })
	if s := spendWith(p, "fresh-token"); s != 200 {
		t.Fatalf("fresh-token after the watch reloaded: %d", s)
	}
}
