// Package redistest starts real redis-server processes for tests: a
// standalone server and a three-master Redis Cluster on free loopback
// ports (never the standard 6379), without persistence, in temporary
// directories, killed when the tests end (and, on Linux, when the test
// binary dies).
//
// One standalone server and one cluster can be shared by all tests of a
// test binary (Standalone, SharedCluster), started on first use and
// stopped by Main, which the binary's TestMain must then call. Tests
// sharing them keep apart by key prefix or call Flush. A test that stops
// and restarts Redis, or a binary whose TestMain cannot call Main, takes
// servers of its own from NewStandalone and NewCluster instead, and a
// test of TLS one from NewStandaloneTLS (a server speaking TLS only, with
// a certificate from a CA made for it).
//
// A missing redis-server or redis-cli fails the test, never skips it: the
// Redis source is only tested if Redis runs.
package redistest

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// installHint is what a test says when Redis is not installed.
const installHint = "run `apt-get install -y redis-server` (it provides redis-server and redis-cli)"

// shared holds the servers a test binary shares. It is the one piece of
// mutable package state, and only test binaries link this package.
var shared struct {
	mu         sync.Mutex
	standalone *Server
	cluster    *Cluster
}

// Main runs the tests of m and then stops the shared servers. Call it from
// TestMain: os.Exit skips deferred functions and t.Cleanup does not span
// tests, so nothing else would stop them.
func Main(m *testing.M) {
	code := m.Run()
	stopShared()
	os.Exit(code)
}

func stopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.standalone != nil {
		shared.standalone.destroy()
		shared.standalone = nil
	}
	if shared.cluster != nil {
		shared.cluster.destroy()
		shared.cluster = nil
	}
}

// Standalone returns the binary's shared standalone server, starting it
// on first use.
func Standalone(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.standalone == nil {
		s, err := startServer(false, nil)
		if err != nil {
			t.Fatalf("redistest: starting redis-server: %v", err)
		}
		shared.standalone = s
	}
	return shared.standalone
}

// SharedCluster returns the binary's shared three-master cluster, creating
// it on first use.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster == nil {
		c, err := startCluster(3, nil)
		if err != nil {
			t.Fatalf("redistest: starting a Redis Cluster: %v", err)
		}
		shared.cluster = c
	}
	return shared.cluster
}

// NewStandalone starts a standalone server of the test's own, stopped when
// the test ends: for tests that stop and restart it.
func NewStandalone(t testing.TB) *Server {
	t.Helper()
	s, err := startServer(false, nil)
	if err != nil {
		t.Fatalf("redistest: starting redis-server: %v", err)
	}
	t.Cleanup(s.destroy)
	return s
}

// NewStandaloneTLS starts a standalone server of the test's own that
// speaks TLS only, for tests of rediss:// sources; it is stopped when the
// test ends. Its plaintext port is off (--port 0), so a client that works
// cannot have fallen back to plaintext. Its certificate, for 127.0.0.1 and
// localhost, is signed by a CA made for this server alone (CAFile): a
// client that trusts only the system's roots fails verification, as it
// would against a private CA in production. URL gives
// rediss://127.0.0.1:port. Clients are not asked for certificates
// (--tls-auth-clients no). Not shared: few tests need one.
func NewStandaloneTLS(t testing.TB) *Server {
	t.Helper()
	ca, err := newCA()
	if err != nil {
		t.Fatalf("redistest: making a CA: %v", err)
	}
	s, err := startServer(false, ca)
	if err != nil {
		t.Fatalf("redistest: starting redis-server with TLS: %v", err)
	}
	t.Cleanup(s.destroy)
	return s
}

// NewCluster creates a three-master cluster of the test's own, stopped
// when the test ends: for test binaries that cannot call Main.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := startCluster(3, nil)
	if err != nil {
		t.Fatalf("redistest: starting a Redis Cluster: %v", err)
	}
	t.Cleanup(c.destroy)
	return c
}

// NewOneMasterCluster starts a server of the test's own in cluster mode
// that serves every slot alone, as a managed Redis in cluster mode with
// one shard does; it is stopped when the test ends.
func NewOneMasterCluster(t testing.TB) *Server {
	t.Helper()
	s, err := startServer(true, nil)
	if err != nil {
		t.Fatalf("redistest: starting a cluster-mode server: %v", err)
	}
	t.Cleanup(s.destroy)
	if _, err := s.do("CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil {
		t.Fatalf("redistest: CLUSTER ADDSLOTSRANGE on %s: %v", s.Addr(), err)
	}
	return s
}

// NewClusterWithReplicas creates a cluster of three masters, each with a
// replica, of the test's own: for tests of a failover. Servers holds the
// masters first; ReplicaOf finds a master's replica.
func NewClusterWithReplicas(t testing.TB) *Cluster {
	t.Helper()
	c, err := startClusterOf(3, 1, nil)
	if err != nil {
		t.Fatalf("redistest: starting a Redis Cluster with replicas: %v", err)
	}
	t.Cleanup(c.destroy)
	return c
}

// NewClusterTLS creates a three-master cluster of the test's own that
// speaks TLS only, clients and bus alike, stopped when the test ends, for
// tests of rediss-cluster:// sources. Its nodes' certificates are signed
// by one CA made for this cluster (CAFile), as NewStandaloneTLS's are.
func NewClusterTLS(t testing.TB) *Cluster {
	t.Helper()
	ca, err := newCA()
	if err != nil {
		t.Fatalf("redistest: making a CA: %v", err)
	}
	c, err := startCluster(3, ca)
	if err != nil {
		t.Fatalf("redistest: starting a Redis Cluster with TLS: %v", err)
	}
	t.Cleanup(c.destroy)
	return c
}

// lastLines returns the end of a log file, for failure messages.
func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("\n--- %s (last lines) ---\n%s", path, strings.Join(lines, "\n"))
}
