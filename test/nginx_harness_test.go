package test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// nginxConfigPath is the shipped nginx configuration, relative to the
// repository root. The tests run it as it is, with only the addresses
// changed (see renderNginxConfig), so that the file the documentation
// shows is the file that is tested.
const nginxConfigPath = "deploy/nginx/limiter.conf"

// nginxToken is the API token the shipped configuration sends the limiter:
// its placeholder, used here as the token itself, so that the line is run
// as it is shipped.
const nginxToken = "REPLACE-WITH-THE-LIMITER-API-TOKEN"

// The addresses of the shipped configuration that renderNginxConfig
// replaces: each must occur exactly once.
const (
	nginxLimiterPlaceholder = "server 127.0.0.1:8080;"
	nginxAppPlaceholder     = "server 127.0.0.1:3000;"
	nginxListenPlaceholder  = "listen 80;"
)

// nginxBinary finds nginx: in PATH, or in /usr/sbin, where Debian puts it
// and which an ordinary user's PATH often lacks.
func nginxBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	t.Fatal("nginx is not installed (looked in PATH and /usr/sbin): install it, e.g. apt-get install -y nginx (scripts/test.sh does, as root)")
	return ""
}

// renderNginxConfig is the shipped configuration with the limiter's, the
// application's and nginx's own addresses put in place of the shipped
// ones. Anything else in it stays as it is.
func renderNginxConfig(template, limiterAddr, appAddr, listenAddr string) (string, error) {
	for _, r := range []struct{ from, to string }{
		{nginxLimiterPlaceholder, "server " + limiterAddr + ";"},
		{nginxAppPlaceholder, "server " + appAddr + ";"},
		{nginxListenPlaceholder, "listen " + listenAddr + ";"},
	} {
		if n := strings.Count(template, r.from); n != 1 {
			return "", fmt.Errorf("%s: %q occurs %d times, want once", nginxConfigPath, r.from, n)
		}
		template = strings.Replace(template, r.from, r.to, 1)
	}
	return template, nil
}

// nginxMain is the main configuration the tests wrap the shipped file in,
// as Debian's nginx.conf includes conf.d: every path nginx writes is in
// the test's directory, so that nginx runs without root. The access log
// records the limiter's status of each request, for failure messages.
const nginxMain = `events {
    worker_connections 128;
}
http {
    client_body_temp_path "%[1]s/client_body";
    proxy_temp_path "%[1]s/proxy";
    fastcgi_temp_path "%[1]s/fastcgi";
    uwsgi_temp_path "%[1]s/uwsgi";
    scgi_temp_path "%[1]s/scgi";
    log_format limiter '$remote_addr "$request" $status limiter=$limiter_status';
    access_log "%[1]s/access.log" limiter;
    include "%[1]s/limiter.conf";
}
`

// nginxProc is one nginx running the shipped configuration in the
// foreground, as a single process.
type nginxProc struct {
	*proxyProc
}

// startNginx runs nginx with the shipped configuration on a free loopback
// port, in front of the limiter at limiterURL and the application at
// appURL, and stops it when the test ends. A port taken between choosing
// it and nginx binding it is retried with another.
func startNginx(t *testing.T, limiterURL, appURL string) *nginxProc {
	t.Helper()
	bin := nginxBinary(t)
	template, err := os.ReadFile(filepath.Join(repoRoot, nginxConfigPath))
	if err != nil {
		t.Fatal(err)
	}
	return retryPortTaken(t, func() (*nginxProc, error) {
		return tryNginx(t, bin, string(template), hostPort(t, limiterURL), hostPort(t, appURL))
	})
}

func tryNginx(t *testing.T, bin, template, limiterAddr, appAddr string) (*nginxProc, error) {
	dir := t.TempDir()
	listen := freeLoopbackAddr(t)
	conf, err := renderNginxConfig(template, limiterAddr, appAddr, listen)
	if err != nil {
		return nil, err
	}
	writeFile(t, dir, "limiter.conf", conf)
	mainConf := writeFile(t, dir, "nginx.conf", fmt.Sprintf(nginxMain, dir))
	// daemon off and master_process off: one process, the test's child,
	// that never changes user; -e and error_log: messages on stderr, as
	// nginx writes a log before it reads the configuration too.
	cmd := exec.Command(bin, "-e", "stderr", "-p", dir, "-c", mainConf,
		"-g", fmt.Sprintf("daemon off; master_process off; pid %q; error_log stderr notice;", filepath.Join(dir, "nginx.pid")))
	// SIGQUIT: finish the requests in flight, then exit.
	p, err := startProxy(t, "nginx", cmd, listen, "Address already in use", syscall.SIGQUIT)
	if err != nil {
		return nil, err
	}
	p.moreLogs = func() string {
		access, _ := os.ReadFile(filepath.Join(dir, "access.log"))
		return "nginx access log:\n" + string(access)
	}
	return &nginxProc{p}, nil
}

// get sends a request without a body through nginx with the given headers
// ("Name: value" each; a Host header sets the request's host).
func (n *nginxProc) get(method, path string, headers ...string) response {
	n.t.Helper()
	return n.send(method, path, "", headers...)
}

// send is get with a body.
func (n *nginxProc) send(method, path, body string, headers ...string) response {
	n.t.Helper()
	req, err := http.NewRequest(method, n.URL+path, strings.NewReader(body))
	if err != nil {
		n.t.Fatal(err)
	}
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			n.t.Fatalf("header %q: want Name: value", h)
		}
		value = strings.TrimSpace(value)
		if strings.EqualFold(name, "Host") {
			req.Host = value
			continue
		}
		req.Header.Add(name, value)
	}
	resp, err := client.Do(req)
	if err != nil {
		n.t.Fatalf("%s %s through nginx: %v\n%s", method, path, err, n.logs())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		n.t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// appHit is one request that reached the application behind nginx.
type appHit struct {
	Method, URI, Body string
	Header            http.Header
}

// appServer is the application behind nginx: it answers every request 200
// and records it, so that a test can tell which requests nginx let pass.
type appServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits []appHit
}

// appBody is the body of every answer of the application.
const appBody = "from the application\n"

func newAppServer(t *testing.T) *appServer {
	t.Helper()
	a := &appServer{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.hits = append(a.hits, appHit{Method: r.Method, URI: r.RequestURI, Body: string(body), Header: r.Header.Clone()})
		a.mu.Unlock()
		_, _ = io.WriteString(w, appBody)
	}))
	t.Cleanup(a.Close)
	return a
}

// count is the number of requests that reached the application.
func (a *appServer) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.hits)
}

// all is every request that reached the application, in order.
func (a *appServer) all() []appHit {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]appHit(nil), a.hits...)
}

// last is the latest request that reached the application.
func (a *appServer) last(t *testing.T) appHit {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.hits) == 0 {
		t.Fatal("no request reached the application")
	}
	return a.hits[len(a.hits)-1]
}

// hostPort is the host:port of an http:// URL.
func hostPort(t *testing.T, url string) string {
	t.Helper()
	hp, ok := strings.CutPrefix(url, "http://")
	if !ok {
		t.Fatalf("%q is not an http:// URL", url)
	}
	return hp
}

// freeLoopbackAddr is a loopback address with a port nothing listens on
// right now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
