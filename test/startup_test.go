package test

import (
	"net"
	"strings"
	"testing"
)

// A Redis source that does not answer at start-up: the service still
// starts, logs one warning naming the source's kind (not its URL, which
// may hold a password), and /readyz answers 503. On the memory source
// there is no such warning.
func TestStartWarnsWhenTheSourceDoesNotAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().String()
	ln.Close() // nothing listens there now: a dial is refused at once
	const warning = "the source does not answer"

	p := startLimiter(t, procOptions{Env: map[string]string{"LIMITER_SOURCE": "redis://:hunter2@" + closedPort}})
	var line string
	for _, l := range strings.Split(p.logs(), "\n") {
		if strings.Contains(l, warning) {
			line = l
		}
	}
	if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "source=redis") || !strings.Contains(line, "/readyz answers 503") {
		t.Errorf("no start-up warning naming the source and /readyz:\n%s", p.logs())
	}
	if strings.Contains(p.logs(), "hunter2") {
		t.Errorf("the log shows the password:\n%s", p.logs())
	}
	if r := p.do("GET", "/readyz", ""); r.Status != 503 {
		t.Errorf("/readyz with Redis down: %d, want 503", r.Status)
	}

	mem := startLimiter(t, procOptions{})
	if strings.Contains(mem.logs(), warning) {
		t.Errorf("the memory source warned:\n%s", mem.logs())
	}
}
