package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"text/template"
	"time"
)

// nginxTemplate is the forward-auth rows' nginx configuration; its
// comments say why each setting is there.
//
//go:embed nginx-forward-auth.conf.tmpl
var nginxTemplate string

// nginxBinary is where Debian's nginx package installs nginx.
const nginxBinary = "/usr/sbin/nginx"

// nginxConf is what the template is filled with: the temporary prefix,
// the worker count and the host:port of each server and upstream.
type nginxConf struct {
	Prefix          string
	Workers         int
	Upstream        string // the static application in nginx
	App             string // the application every row proxies to: Upstream, or a Go server
	Direct          string // the server that proxies straight to it
	ForwardAuth     string // the server that asks the limiter first
	BareForwardAuth string // the server that asks the bare handler first
	Limiter         string // the limiter's HTTP address
	Bare            string // the bare forward-auth handler's HTTP address
	Rule            string // the forward-auth rule asked
}

// authServer is what the template's forward-auth server is filled with:
// the upstream it asks, the address it listens on and the rule.
type authServer struct {
	Upstream, Listen, Rule string
}

// Asking is the forward-auth server that listens on listen and asks
// upstream: one template for the limiter's and the bare handler's, so
// that the two differ in nothing else.
func (c nginxConf) Asking(upstream, listen string) authServer {
	return authServer{Upstream: upstream, Listen: listen, Rule: c.Rule}
}

// render fills the template with c.
func (c nginxConf) render() ([]byte, error) {
	t, err := template.New("nginx").Option("missingkey=error").Parse(nginxTemplate)
	if err != nil {
		return nil, fmt.Errorf("nginx template: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, c); err != nil {
		return nil, fmt.Errorf("nginx template: %w", err)
	}
	return b.Bytes(), nil
}

// nginxProcess is a running nginx: its master and the workers it forked.
type nginxProcess struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the master has exited
	workers []int
	errLog  string
}

// startNginx writes c's configuration under c.Prefix, starts nginx in the
// foreground and waits until every listed address accepts connections
// and all c.Workers workers are up.
func startNginx(ctx context.Context, c nginxConf, addrs ...string) (*nginxProcess, error) {
	conf, err := c.render()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.Prefix, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(c.Prefix, "nginx.conf")
	if err := os.WriteFile(path, conf, 0o644); err != nil {
		return nil, err
	}
	n := &nginxProcess{errLog: filepath.Join(c.Prefix, "error.log"), exited: make(chan struct{})}
	n.cmd = exec.Command(nginxBinary, "-p", c.Prefix, "-c", path)
	if out, err := exec.CommandContext(ctx, nginxBinary, "-t", "-q", "-p", c.Prefix, "-c", path).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("nginx -t: %v\n%s", err, out)
	}
	if err := n.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting nginx: %w", err)
	}
	go func() { _ = n.cmd.Wait(); close(n.exited) }()
	fail := func(err error) (*nginxProcess, error) {
		n.stop()
		log, _ := os.ReadFile(n.errLog)
		return nil, fmt.Errorf("%w\n%s", err, log)
	}
	deadline, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		select {
		case <-n.exited:
			return fail(fmt.Errorf("nginx exited at start: %v", n.cmd.ProcessState))
		case <-deadline.Done():
			return fail(errors.New("nginx did not start in 10 s"))
		case <-time.After(20 * time.Millisecond):
		}
		workers, err := childPIDs(n.cmd.Process.Pid)
		if err != nil {
			return fail(err)
		}
		if len(workers) == c.Workers && accepting(deadline, addrs) {
			n.workers = workers
			return n, nil
		}
	}
}

// accepting reports whether every address takes a TCP connection.
func accepting(ctx context.Context, addrs []string) bool {
	var d net.Dialer
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", a)
		if err != nil {
			return false
		}
		c.Close()
	}
	return true
}

// cpuSeconds is the CPU time nginx's master and workers have used.
func (n *nginxProcess) cpuSeconds() (float64, error) {
	total, err := cpuSeconds(n.cmd.Process.Pid)
	for _, w := range n.workers {
		s, werr := cpuSeconds(w)
		if werr != nil {
			return 0, fmt.Errorf("nginx worker %d is gone: %w", w, werr)
		}
		total += s
	}
	return total, err
}

// stop asks nginx to stop at once (SIGTERM: the master stops its
// workers, where SIGKILL would leave them running) and waits for the
// master; one that has not stopped in 5 s is killed with its workers.
func (n *nginxProcess) stop() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		return
	case <-time.After(5 * time.Second):
	}
	_ = n.cmd.Process.Kill()
	for _, w := range n.workers {
		_ = syscall.Kill(w, syscall.SIGKILL)
	}
	<-n.exited
}

// childPIDs lists the processes whose parent is ppid, from /proc.
func childPIDs(ppid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone since the listing
		}
		if parent, err := parseStat(b); err == nil && parent == ppid {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids, nil
}

// errBadStat is what parseStat returns for text that is not a
// /proc/<pid>/stat line.
var errBadStat = errors.New("not a /proc/<pid>/stat line")

// parseStat reads the parent's pid from a /proc/<pid>/stat line:
// "pid (comm) state ppid ...", where comm may itself hold spaces and
// parentheses, so the fields are counted from the last ')'.
func parseStat(b []byte) (ppid int, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errBadStat
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, errBadStat
	}
	ppid, err = strconv.Atoi(string(fields[1]))
	if err != nil {
		return 0, fmt.Errorf("%w: parent %q", errBadStat, fields[1])
	}
	return ppid, nil
}
