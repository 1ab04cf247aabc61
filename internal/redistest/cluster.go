package redistest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of masters without replicas, every slot
// served.
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
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
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
