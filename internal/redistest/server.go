package redistest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long a server may take to answer after start.
const startTimeout = 10 * time.Second

// Server is one redis-server process on a loopback port.
type Server struct {
	port    int
	busPort int // cluster bus port, 0 for a standalone server
	dir     string
	// tls, for a TLS-only server (NewStandaloneTLS), is a client config
	// trusting the server's CA, for the readiness check and Flush; nil for
	// a plaintext server.
	tls *tls.Config

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's address as a --source value: redis://, or
// rediss:// for a TLS server.
func (s *Server) URL() string {
	if s.tls != nil {
		return "rediss://" + s.Addr()
	}
	return "redis://" + s.Addr()
}

// CAFile is the PEM file of the CA that signed a TLS server's
// certificate (the value for --redis-tls-ca), or "" for a plaintext
// server.
func (s *Server) CAFile() string {
	if s.tls == nil {
		return ""
	}
	return filepath.Join(s.dir, caFileName)
}

// Stop kills the server (its data is not kept). The address stays
// reserved for Start.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if err := s.stop(); err != nil {
		t.Fatalf("redistest: stopping %s: %v", s.Addr(), err)
	}
}

// Start starts a stopped server again on the same port, empty, and waits
// until it answers.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("redistest: restarting %s: %v", s.Addr(), err)
	}
}

// Pause freezes the server (SIGSTOP): connections stay open and accepted,
// but nothing is answered, as with a Redis that hangs. Resume ends it.
func (s *Server) Pause(t testing.TB) { s.signal(t, syscall.SIGSTOP) }

// Resume lets a paused server run again (SIGCONT).
func (s *Server) Resume(t testing.TB) { s.signal(t, syscall.SIGCONT) }

func (s *Server) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		t.Fatalf("redistest: %s is not running", s.Addr())
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("redistest: %v to %s: %v", sig, s.Addr(), err)
	}
}

// Flush deletes every key of the server.
func (s *Server) Flush(t testing.TB) {
	t.Helper()
	if _, err := s.do("FLUSHALL"); err != nil {
		t.Fatalf("redistest: FLUSHALL on %s: %v", s.Addr(), err)
	}
}

// do sends one command to the server as Do does, over TLS (trusting the
// server's CA) for a TLS server.
func (s *Server) do(args ...string) (string, error) {
	if s.tls == nil {
		return Do(s.Addr(), args...)
	}
	// The dialer's timeout covers the handshake too.
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: s.tls}
	conn, err := d.Dial("tcp", s.Addr())
	if err != nil {
		return "", err
	}
	return roundTrip(conn, args)
}

// startServer starts a new server on free ports; cluster adds the
// cluster mode and a bus port, and a CA makes it speak TLS only, with a
// certificate that CA signs (see NewStandaloneTLS). A port is free when
// chosen, but a connection made elsewhere meanwhile (tests run in
// parallel, and every client connection takes an ephemeral port) may take
// it before redis-server binds it: a start that fails so is tried again on
// other ports.
func startServer(cluster bool, ca *testCA) (*Server, error) {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s is not installed: %s", bin, installHint)
		}
	}
	for attempt := 1; ; attempt++ {
		s, err := startServerOnce(cluster, ca)
		if err == nil || attempt == 3 || !errors.Is(err, errPortTaken) {
			return s, err
		}
	}
}

// errPortTaken is a start that failed because a chosen port was taken.
var errPortTaken = errors.New("a port was taken before redis-server bound it")

// startServerOnce is one try of startServer.
func startServerOnce(cluster bool, ca *testCA) (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	if s.port, err = freePort(); err != nil {
		s.destroy()
		return nil, err
	}
	if cluster {
		if s.busPort, err = freePort(); err != nil {
			s.destroy()
			return nil, err
		}
	}
	if ca != nil {
		if s.tls, err = writeTLSFiles(dir, ca); err != nil {
			s.destroy()
			return nil, fmt.Errorf("making TLS certificates: %w", err)
		}
	}
	if err := s.start(); err != nil {
		s.destroy()
		return nil, err
	}
	return s, nil
}

func (s *Server) args() []string {
	port := []string{"--port", strconv.Itoa(s.port)}
	if s.tls != nil {
		// TLS only: the plaintext port is off.
		port = []string{
			"--port", "0",
			"--tls-port", strconv.Itoa(s.port),
			"--tls-cert-file", filepath.Join(s.dir, certFileName),
			"--tls-key-file", filepath.Join(s.dir, keyFileName),
			"--tls-ca-cert-file", filepath.Join(s.dir, caFileName),
			"--tls-auth-clients", "no",
		}
	}
	args := append(port,
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", s.logPath(),
		"--daemonize", "no",
	)
	if s.busPort != 0 {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(s.busPort),
			"--cluster-node-timeout", "5000",
		)
		if s.tls != nil {
			// The bus speaks TLS too, and the nodes announce their TLS
			// port, the only one they have, in redirects and CLUSTER SLOTS.
			args = append(args, "--tls-cluster", "yes")
		}
	}
	return args
}

func (s *Server) logPath() string { return filepath.Join(s.dir, "redis.log") }

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("already running")
	}
	cmd := exec.Command("redis-server", s.args()...)
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redis-server: %w (%s)", err, installHint)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	deadline := time.Now().Add(startTimeout)
	for {
		_, err := s.do("PING")
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			s.cmd = nil
			log := lastLines(s.logPath(), 20)
			if strings.Contains(log, "Address already in use") {
				return fmt.Errorf("%w: redis-server on port %d%s", errPortTaken, s.port, log)
			}
			return fmt.Errorf("redis-server on port %d exited at start%s", s.port, log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			// The last error tells a TLS handshake failure from silence.
			return fmt.Errorf("redis-server on port %d did not answer within %v (last: %v)%s", s.port, startTimeout, err, lastLines(s.logPath(), 20))
		}
	}
}

func (s *Server) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(startTimeout):
		return errors.New("redis-server did not exit after SIGKILL")
	}
	s.cmd = nil
	return nil
}

// destroy stops the server and removes its directory.
func (s *Server) destroy() {
	_ = s.stop()
	_ = os.RemoveAll(s.dir)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
