package test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// caddyConfigPath is the shipped Caddyfile, relative to the repository
// root. The tests run it as it is, with only the addresses changed (see
// renderCaddyfile), so that the file the documentation shows is the file
// that is tested.
const caddyConfigPath = "deploy/caddy/Caddyfile"

// The addresses of the shipped Caddyfile that renderCaddyfile replaces:
// each must occur exactly once.
const (
	caddySitePlaceholder    = "api.example.com {"
	caddyLimiterPlaceholder = "forward_auth 127.0.0.1:8080 {"
	caddyAppPlaceholder     = "reverse_proxy 127.0.0.1:3000"
)

// caddyToken is the limiter's API token the tests give Caddy in
// LIMITER_TOKEN, which the shipped file sends.
const caddyToken = "caddy-limiter-token"

// caddyBinary finds caddy: in PATH, or in /usr/bin, where Debian puts it.
func caddyBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("caddy"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/caddy"); err == nil {
		return "/usr/bin/caddy"
	}
	t.Fatal("caddy is not installed (looked in PATH and /usr/bin): install it, e.g. apt-get install -y caddy (scripts/test.sh does, as root)")
	return ""
}

// renderCaddyfile is the shipped Caddyfile with the site's, the limiter's
// and the application's addresses put in place of the shipped ones: the
// site on plain HTTP at listenPort (Caddy would otherwise get a
// certificate for the shipped name). Anything else stays as it is.
func renderCaddyfile(template, limiterAddr, appAddr, listenPort string) (string, error) {
	for _, r := range []struct{ from, to string }{
		{caddySitePlaceholder, "http://:" + listenPort + " {"},
		{caddyLimiterPlaceholder, "forward_auth " + limiterAddr + " {"},
		{caddyAppPlaceholder, "reverse_proxy " + appAddr},
	} {
		if n := strings.Count(template, r.from); n != 1 {
			return "", fmt.Errorf("%s: %q occurs %d times, want once", caddyConfigPath, r.from, n)
		}
		template = strings.Replace(template, r.from, r.to, 1)
	}
	return template, nil
}

// caddyMain is the Caddyfile the tests wrap the shipped site in, as an
// operator's own Caddyfile would import it: global options that keep Caddy
// off the network and in the test's directory (no admin endpoint, no
// certificates, every listener on the loopback, storage in the test's
// directory).
const caddyMain = `{
	admin off
	auto_https off
	default_bind 127.0.0.1
	storage file_system "%[1]s/storage"
}
import "%[1]s/site.caddyfile"
`

// caddyProc is one `caddy run` with the shipped site, in the foreground.
type caddyProc struct {
	*proxyProc
}

// startCaddy runs Caddy with the shipped Caddyfile on a free loopback
// port, in front of the limiter at limiterURL (which token opens) and the
// application at appURL, and stops it when the test ends. A port taken
// between choosing it and Caddy binding it is retried with another.
func startCaddy(t *testing.T, limiterURL, appURL, token string) *caddyProc {
	t.Helper()
	bin := caddyBinary(t)
	template, err := os.ReadFile(filepath.Join(repoRoot, caddyConfigPath))
	if err != nil {
		t.Fatal(err)
	}
	return retryPortTaken(t, func() (*caddyProc, error) {
		return tryCaddy(t, bin, string(template), hostPort(t, limiterURL), hostPort(t, appURL), token)
	})
}

func tryCaddy(t *testing.T, bin, template, limiterAddr, appAddr, token string) (*caddyProc, error) {
	dir := t.TempDir()
	listen := freeLoopbackAddr(t)
	_, port, _ := net.SplitHostPort(listen)
	site, err := renderCaddyfile(template, limiterAddr, appAddr, port)
	if err != nil {
		return nil, err
	}
	writeFile(t, dir, "site.caddyfile", site)
	main := writeFile(t, dir, "Caddyfile", fmt.Sprintf(caddyMain, dir))
	cmd := exec.Command(bin, "run", "--config", main, "--adapter", "caddyfile")
	cmd.Dir = dir
	// A clean environment: Caddy keeps its data and an autosaved copy of
	// its configuration under HOME and the XDG directories, here the
	// test's.
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(dir, "home"),
		"XDG_DATA_HOME=" + filepath.Join(dir, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"LIMITER_TOKEN=" + token,
	}
	// SIGTERM: Caddy's graceful stop.
	p, err := startProxy(t, "caddy", cmd, listen, "address already in use", syscall.SIGTERM)
	if err != nil {
		return nil, err
	}
	return &caddyProc{p}, nil
}

// from is a client whose connections come from the loopback address ip
// (any of 127.0.0.0/8), so that Caddy sees requests from several client
// addresses.
func (c *caddyProc) from(ip string) *caddyClient {
	c.t.Helper()
	tr := &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)},
		Timeout:   5 * time.Second,
	}).DialContext}
	c.t.Cleanup(tr.CloseIdleConnections)
	return &caddyClient{caddy: c, client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// caddyClient sends requests through Caddy from one address.
type caddyClient struct {
	caddy  *caddyProc
	client *http.Client
}

// send makes a request with a body (none when empty) and the given
// headers ("Name: value" each) through Caddy.
func (cc *caddyClient) send(method, path, body string, headers ...string) response {
	t := cc.caddy.t
	t.Helper()
	req, err := http.NewRequest(method, cc.caddy.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			t.Fatalf("header %q: want Name: value", h)
		}
		req.Header.Add(name, strings.TrimSpace(value))
	}
	resp, err := cc.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s through caddy: %v\n%s", method, path, err, cc.caddy.logs())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// get is send without a body.
func (cc *caddyClient) get(path string, headers ...string) response {
	cc.caddy.t.Helper()
	return cc.send("GET", path, "", headers...)
}
