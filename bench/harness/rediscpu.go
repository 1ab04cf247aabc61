package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Redis's own CPU per request. A Redis-backed row's throughput on a small
// machine says as much about who else shares the cores as about Redis,
// but the CPU time the redis-server process spends per request is its
// cost, and is what bounds a deployment whose Redis is the busiest
// process. Every Redis-backed row carries the pids of the servers it
// uses (one, or each master of a cluster), and measure reads their
// utime + stime from /proc before and after the measured window.

// redisServer is one redis-server the harness started.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
}

func (r *redisServer) pid() int { return r.cmd.Process.Pid }

func (r *redisServer) stop() { _ = r.cmd.Process.Kill(); _ = r.cmd.Wait() }

// startRedis runs a private redis-server on a free loopback port; with
// cluster set, in cluster mode, its bus on another free port; with cpu
// not negative, on that CPU only (taskset, which becomes redis-server).
func startRedis(dir string, cluster bool, cpu int) (*redisServer, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errors.New("redis-server not found")
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", port)
	own := filepath.Join(dir, "redis-"+port)
	if err := os.MkdirAll(own, 0o755); err != nil {
		return nil, err
	}
	args := []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", own}
	if cluster {
		bus, err := freePort()
		if err != nil {
			return nil, err
		}
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", bus, "--cluster-node-timeout", "5000")
	}
	cmd := exec.Command("redis-server", args...)
	if cpu >= 0 {
		cmd = exec.Command("taskset", append([]string{"-c", strconv.Itoa(cpu), "redis-server"}, args...)...)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &redisServer{addr: addr, cmd: cmd}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return r, nil
		}
	}
	r.stop()
	return nil, errors.New("redis-server did not start")
}

// freePort returns a loopback port nothing listens on now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	addr := ln.Addr().String()
	return addr[strings.LastIndexByte(addr, ':')+1:], nil
}

// startCluster runs three cluster-mode redis-servers, every slot served,
// no replicas, joined by redis-cli as internal/redistest does for the
// service's tests.
func startCluster(dir string, cpu int) ([]*redisServer, error) {
	var nodes []*redisServer
	stop := func() {
		for _, n := range nodes {
			n.stop()
		}
	}
	args := []string{"--cluster", "create"}
	for range 3 {
		n, err := startRedis(dir, true, cpu)
		if err != nil {
			stop()
			return nil, err
		}
		nodes = append(nodes, n)
		args = append(args, n.addr)
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range nodes {
		host, port, _ := net.SplitHostPort(n.addr)
		for {
			out, err := exec.Command("redis-cli", "-h", host, "-p", port, "cluster", "info").Output()
			if err == nil && strings.Contains(string(out), "cluster_state:ok") &&
				strings.Contains(string(out), "cluster_slots_ok:16384") &&
				strings.Contains(string(out), "cluster_known_nodes:3") {
				break
			}
			if time.Now().After(deadline) {
				stop()
				return nil, fmt.Errorf("cluster node %s not ready: %v\n%s", n.addr, err, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes, nil
}

// redisSample is what a row's redis-servers have done so far: each one's
// CPU seconds, and their script calls (EVALSHA and EVAL) together.
type redisSample struct {
	cpu     []float64
	scripts float64
}

// sampleRedis reads s's redis-servers: their CPU from /proc, their
// script calls from INFO commandstats.
func sampleRedis(s *server) (redisSample, error) {
	var r redisSample
	for _, pid := range s.redisPIDs {
		c, err := cpuSeconds(pid)
		if err != nil {
			return r, err
		}
		r.cpu = append(r.cpu, c)
	}
	for _, addr := range s.redisAddrs {
		host, port, _ := net.SplitHostPort(addr)
		out, err := exec.Command("redis-cli", "-h", host, "-p", port, "info", "commandstats").Output()
		if err != nil {
			return r, fmt.Errorf("INFO commandstats of %s: %w", addr, err)
		}
		for _, m := range scriptCalls.FindAllStringSubmatch(string(out), -1) {
			n, _ := strconv.ParseFloat(m[1], 64)
			r.scripts += n
		}
	}
	return r, nil
}

var scriptCalls = regexp.MustCompile(`cmdstat_eval(?:sha)?:calls=(\d+)`)

// since turns two samples around a window of requests into each
// server's CPU µs per request and the script calls per request.
func (r redisSample) since(before redisSample, requests float64) ([]float64, float64) {
	if requests <= 0 {
		return nil, 0
	}
	cpu := make([]float64, len(r.cpu))
	for i := range r.cpu {
		cpu[i] = (r.cpu[i] - before.cpu[i]) / requests * 1e6
	}
	return cpu, (r.scripts - before.scripts) / requests
}

func sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

// incrRow is the reference every Redis-backed row's Redis CPU is stated
// against: one INCR, one round trip, per request.
const incrRow = "bare + one Redis INCR"

// printRedisCPU states each Redis-backed row's Redis CPU per request, in
// the closed loop and the open loop, against the INCR row's of the same
// run, and a cluster row's split between its masters.
func printRedisCPU(w io.Writer, servers []*server, results [][]result) {
	closed := map[string]float64{}
	open := map[string]float64{}
	for i, s := range servers {
		if len(s.redisPIDs) == 0 {
			continue
		}
		closed[s.name] = medianOf(results[i], func(r result) float64 { return sum(r.redisCPU) })
		open[s.name] = medianOf(results[i], func(r result) float64 { return sum(r.open.redisCPU) })
	}
	if len(closed) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Redis CPU (redis-server utime + stime over the measured window) per request, medians; × INCR is against the row", incrRow+":")
	ratio := func(v, ref float64) string {
		if v == 0 || ref == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", v/ref)
	}
	for i, s := range servers {
		if len(s.redisPIDs) == 0 {
			continue
		}
		line := fmt.Sprintf("- %s: closed loop %.2f µs/req (%s INCR), open loop %.2f µs/req (%s INCR); script calls per request %.3f closed, %.3f open", s.name,
			closed[s.name], ratio(closed[s.name], closed[incrRow]), open[s.name], ratio(open[s.name], open[incrRow]),
			medianOf(results[i], func(r result) float64 { return r.redisScripts }), medianOf(results[i], func(r result) float64 { return r.open.redisScripts }))
		if len(s.redisPIDs) > 1 {
			split := make([]string, len(s.redisPIDs))
			for m := range s.redisPIDs {
				split[m] = fmt.Sprintf("%.2f", medianOf(results[i], func(r result) float64 {
					if m < len(r.redisCPU) {
						return r.redisCPU[m]
					}
					return 0
				}))
			}
			line += "; closed loop per master " + strings.Join(split, " / ") + " µs/req"
		}
		fmt.Fprintln(w, line)
	}
}

func medianOf(rs []result, f func(result) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return median(xs)
}

// pidsOf returns the pids of servers.
func pidsOf(rs ...*redisServer) []int {
	pids := make([]int, len(rs))
	for i, r := range rs {
		pids[i] = r.pid()
	}
	return pids
}

// addrsOf returns the addresses of nodes.
func addrsOf(nodes []*redisServer) []string {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.addr
	}
	return addrs
}

// clusterSource is a --source value for nodes.
func clusterSource(nodes []*redisServer) string {
	return "redis-cluster://" + strings.Join(addrsOf(nodes), ",")
}

// clusterRow is the GCRA row on a 3-master Redis Cluster.
const clusterRow = "limiter, redis cluster of 3 masters"
