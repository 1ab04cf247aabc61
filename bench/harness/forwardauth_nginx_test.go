package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// testConf is a filled-in configuration of made-up ports.
func testConf(prefix string) nginxConf {
	return nginxConf{Prefix: prefix, Workers: 2, Upstream: "127.0.0.1:40001", App: "127.0.0.1:40001", Direct: "127.0.0.1:40002",
		ForwardAuth: "127.0.0.1:40003", Limiter: "127.0.0.1:40004", BareForwardAuth: "127.0.0.1:40005", Bare: "127.0.0.1:40006", Rule: faRule}
}

// locationBody is the text inside "location <name> { ... }" of the server
// that listens on listen (locations hold no nested blocks here).
func locationBody(t *testing.T, conf, listen, name string) []string {
	t.Helper()
	i := strings.Index(conf, "listen "+listen+";")
	if i < 0 {
		t.Fatalf("no server listens on %s", listen)
	}
	rest := conf[i:]
	if next := strings.Index(rest[1:], "server {"); next >= 0 {
		rest = rest[:next+1]
	}
	m := regexp.MustCompile(`(?s)location ` + regexp.QuoteMeta(name) + ` \{(.*?)\n\s*\}`).FindStringSubmatch(rest)
	if m == nil {
		t.Fatalf("server on %s has no location %s", listen, name)
	}
	var lines []string
	for _, l := range strings.Split(m[1], "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// The rendered configuration treats both rows alike, and keeps the
// settings that make the comparison fair and the proxying production
// grade: the forward-auth location is the direct one plus auth_request,
// connections to the application and to the limiter are kept, and the
// subrequest carries no body and is asked with HEAD, so nginx can keep
// its connection.
func TestNginxConfRender(t *testing.T) {
	b, err := testConf("/tmp/prefix").render()
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	for _, bad := range []string{"{{", "<no value>"} {
		if strings.Contains(conf, bad) {
			t.Errorf("rendered configuration holds %q", bad)
		}
	}
	for _, want := range []string{
		"worker_processes 2;",
		"access_log off;",
		"upstream app {\n        server 127.0.0.1:40001;\n        keepalive 64;\n    }",
		"upstream limiter {\n        server 127.0.0.1:40004;\n        keepalive 64;\n    }",
		"upstream bare {\n        server 127.0.0.1:40006;\n        keepalive 64;\n    }",
		"pid /tmp/prefix/nginx.pid;",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("rendered configuration lacks %q", want)
		}
	}
	direct := locationBody(t, conf, "127.0.0.1:40002", "/")
	via := locationBody(t, conf, "127.0.0.1:40003", "/")
	for _, want := range []string{"proxy_pass http://app;", "proxy_http_version 1.1;", `proxy_set_header Connection "";`} {
		if !slices.Contains(direct, want) {
			t.Errorf("direct location lacks %q: %q", want, direct)
		}
	}
	var extra []string
	for _, l := range via {
		if !slices.Contains(direct, l) {
			extra = append(extra, l)
		}
	}
	for _, l := range direct {
		if !slices.Contains(via, l) {
			t.Errorf("forward-auth location lacks the direct one's %q", l)
		}
	}
	for _, l := range extra {
		if !strings.HasPrefix(l, "auth_request") && !strings.HasPrefix(l, "error_page 403") {
			t.Errorf("forward-auth location differs from the direct one by %q, not only by asking the limiter", l)
		}
	}
	auth := locationBody(t, conf, "127.0.0.1:40003", "= /.limiter")
	for _, want := range []string{"internal;", "proxy_pass http://limiter/v1/forward-auth/" + faRule + ";", "proxy_method HEAD;",
		"proxy_http_version 1.1;", `proxy_set_header Connection "";`, "proxy_pass_request_body off;", `proxy_set_header Content-Length "";`,
		"proxy_set_header X-Original-Method $request_method;"} {
		if !slices.Contains(auth, want) {
			t.Errorf("auth location lacks %q: %q", want, auth)
		}
	}
	// The bare handler's server is the limiter's but for the upstream
	// it asks.
	if bare := locationBody(t, conf, "127.0.0.1:40005", "/"); !slices.Equal(bare, via) {
		t.Errorf("the bare handler's location / differs from the limiter's:\n%q\n%q", bare, via)
	}
	bareAuth := locationBody(t, conf, "127.0.0.1:40005", "= /.limiter")
	wantAuth := slices.Clone(auth)
	for i, l := range wantAuth {
		wantAuth[i] = strings.Replace(l, "http://limiter/", "http://bare/", 1)
	}
	if !slices.Equal(bareAuth, wantAuth) || slices.Equal(bareAuth, auth) {
		t.Errorf("the bare handler's auth location is not the limiter's asking bare:\n%q\n%q", bareAuth, auth)
	}
}

// nginx itself accepts the rendered configuration.
func TestNginxConfValid(t *testing.T) {
	if _, err := os.Stat(nginxBinary); err != nil {
		t.Skipf("no nginx: %v", err)
	}
	prefix := t.TempDir()
	b, err := testConf(prefix).render()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(context.Background(), nginxBinary, "-t", "-q", "-p", prefix, "-c", path).CombinedOutput(); err != nil {
		t.Errorf("nginx -t: %v\n%s", err, out)
	}
}

// parseStat finds the parent's pid after the command name, whatever the
// name holds, and refuses what is not a stat line.
func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		line string
		ppid int
		ok   bool
	}{
		{"1234 (nginx) S 1200 1234 1234 0 -1 4194624 89 0 0 0 3 1 0 0 20 0 1 0", 1200, true},
		{"77 (a (b) c) R 5 77 77 0", 5, true},
		{"77 (two words) Z 1 0", 1, true},
		{"77 nginx S 1 0", 0, false},
		{"77 (nginx) S", 0, false},
		{"77 (nginx) S x", 0, false},
	} {
		ppid, err := parseStat([]byte(c.line))
		if c.ok && (err != nil || ppid != c.ppid) {
			t.Errorf("parseStat(%q) = %d, %v; want %d", c.line, ppid, err, c.ppid)
		}
		if !c.ok && err == nil {
			t.Errorf("parseStat(%q) = %d, want an error", c.line, ppid)
		}
	}
}

// childPIDs finds a process this test starts among its children.
func TestChildPIDs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	kids, err := childPIDs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(kids, cmd.Process.Pid) {
		t.Errorf("children %v lack %d", kids, cmd.Process.Pid)
	}
}

// countTimeWait counts TIME_WAIT sockets on either end of a port, and no
// socket in another state or on another port.
func TestCountTimeWait(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:D431 0100007F:1F90 06 00000000:00000000 03:00000F5E 00000000     0        0 0 3 0000000000000000
   2: 0100007F:1F90 0100007F:D432 06 00000000:00000000 03:00000F5E 00000000     0        0 0 3 0000000000000000
   3: 0100007F:D433 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
   4: 0100007F:D434 0100007F:1F91 06 00000000:00000000 03:00000F5E 00000000     0        0 0 3 0000000000000000
`
	n, err := countTimeWait(strings.NewReader(table), 0x1F90)
	if err != nil || n != 2 {
		t.Errorf("countTimeWait = %d, %v; want 2", n, err)
	}
	for _, bad := range []string{"0: 0100007F 0100007F:1F90 06", "0: 0100007F:1F90 0100007F:1F90 XY", "0: 0100007F:1F90"} {
		if _, err := countTimeWait(strings.NewReader("header\n"+bad+"\n"), 0x1F90); err == nil {
			t.Errorf("counted in %q", bad)
		}
	}
	if _, err := timeWaitCount(8080); err != nil {
		t.Errorf("reading this machine's table: %v", err)
	}
}
