package test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proxyProc is a reverse proxy the tests run in front of the limiter
// (nginx, Caddy): a child process on a free loopback port, whose stderr is
// kept for the tests' messages, stopped when the test ends.
type proxyProc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	URL  string
	// stopSignal asks the proxy to finish its requests in flight and exit.
	stopSignal syscall.Signal
	// moreLogs, when set, adds what the proxy wrote elsewhere (a file).
	moreLogs func() string

	mu     sync.Mutex
	stderr bytes.Buffer
	exited chan struct{}
}

// errPortTaken is a start that failed because the chosen port was taken.
var errPortTaken = errors.New("the port was taken")

// startProxy starts cmd and waits up to 10 s until it accepts connections
// on listen. A proxy that exits with portTaken in its log (the chosen port
// was taken between choosing it and binding it) is errPortTaken, for
// retryPortTaken to try another port.
func startProxy(t *testing.T, name string, cmd *exec.Cmd, listen, portTaken string, stopSignal syscall.Signal) (*proxyProc, error) {
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proxyProc{t: t, name: name, cmd: cmd, URL: "http://" + listen, stopSignal: stopSignal, exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			conn.Close()
			t.Cleanup(p.stop)
			return p, nil
		}
		select {
		case <-p.exited:
			if strings.Contains(p.logs(), portTaken) {
				return nil, fmt.Errorf("%w: %s", errPortTaken, p.logs())
			}
			return nil, fmt.Errorf("%s exited before listening on %s:\n%s", name, listen, p.logs())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-p.exited
			return nil, fmt.Errorf("%s did not listen on %s within 10s:\n%s", name, listen, p.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// retryPortTaken calls start until it returns without errPortTaken, three
// times at most, and fails the test on any other error.
func retryPortTaken[P any](t *testing.T, start func() (P, error)) P {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p, err := start()
		if err == nil {
			return p
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			t.Fatal(err)
		}
	}
}

// logs is what the proxy has written so far.
func (p *proxyProc) logs() string {
	p.mu.Lock()
	out := p.name + " stderr:\n" + p.stderr.String()
	p.mu.Unlock()
	if p.moreLogs != nil {
		out += p.moreLogs()
	}
	return out
}

// stop ends the proxy with its stop signal, and kills it if it has not
// exited 10 s later.
func (p *proxyProc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(p.stopSignal)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		p.t.Errorf("%s did not stop within 10s of %v:\n%s", p.name, p.stopSignal, p.logs())
	}
}
