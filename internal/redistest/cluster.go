package redistest

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a Redis Cluster, every slot served: masters without replicas
// (NewCluster), or with one each (NewClusterWithReplicas).
type Cluster struct {
	Servers []*Server
}

// Addrs returns the masters' host:port addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// URL is the cluster as a --source value: redis-cluster://, or
// rediss-cluster:// for a TLS cluster.
func (c *Cluster) URL() string {
	scheme := "redis-cluster://"
	if c.Servers[0].tls != nil {
		scheme = "rediss-cluster://"
	}
	return scheme + strings.Join(c.Addrs(), ",")
}

// CAFile is the PEM file of the CA that signed a TLS cluster's
// certificates, or "" for a plaintext cluster.
func (c *Cluster) CAFile() string { return c.Servers[0].CAFile() }

// Flush deletes every key on every master.
func (c *Cluster) Flush(t testing.TB) {
	t.Helper()
	for _, s := range c.Servers {
		s.Flush(t)
	}
}

// startCluster starts n cluster-mode servers (speaking TLS only, with
// certificates ca signs, when ca is not nil), joins them with
// `redis-cli --cluster create` and waits until every node reports
// cluster_state:ok with all 16384 slots served.
func startCluster(n int, ca *testCA) (*Cluster, error) {
	return startClusterOf(n, 0, ca)
}

// startClusterOf starts a cluster of masters, each with replicas of its
// own (Servers holds the masters first, as redis-cli makes the first
// addresses masters).
func startClusterOf(masters, replicas int, ca *testCA) (*Cluster, error) {
	n := masters * (1 + replicas)
	c := &Cluster{}
	for range n {
		s, err := startServer(true, ca)
		if err != nil {
			c.destroy()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	var args []string
	if ca != nil {
		args = []string{"--tls", "--cacert", c.CAFile()}
	}
	args = append(args, "--cluster", "create")
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		c.destroy()
		return nil, fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	if err := c.waitReady(); err != nil {
		c.destroy()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) waitReady() error {
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range c.Servers {
		for {
			info, err := s.do("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_slots_ok:16384") &&
				strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", len(c.Servers))) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("cluster node %s not ready: %v\n%s%s", s.Addr(), err, info, lastLines(s.logPath(), 20))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

func (c *Cluster) destroy() {
	for _, s := range c.Servers {
		s.destroy()
	}
}

// ReplicaOf returns the replica of the master m: the server whose role
// names m's port as its master.
func (c *Cluster) ReplicaOf(t testing.TB, m *Server) *Server {
	t.Helper()
	for _, s := range c.Servers {
		role, err := s.do("ROLE") // slave, its master's host, port, ...
		if f := strings.Split(role, "\n"); err == nil && len(f) > 2 && f[0] == "slave" && f[2] == strconv.Itoa(m.port) {
			return s
		}
	}
	t.Fatalf("redistest: no replica of %s", m.Addr())
	return nil
}

// TakeOver makes the replica r its master's master at once (CLUSTER
// FAILOVER TAKEOVER: no election, as when its master is dead) and waits
// until r serves as a master.
func (c *Cluster) TakeOver(t testing.TB, r *Server) {
	t.Helper()
	if _, err := r.do("CLUSTER", "FAILOVER", "TAKEOVER"); err != nil {
		t.Fatalf("redistest: CLUSTER FAILOVER TAKEOVER on %s: %v", r.Addr(), err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		role, err := r.do("ROLE")
		if err == nil && strings.HasPrefix(role, "master") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s is not a master after a takeover: %q, %v", r.Addr(), role, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
