package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// server is one system under test.
type server struct {
	name string
	cmd  []string
	env  []string
	proc *exec.Cmd
	url  string
	// limit is the limit every request spends (defaultLimit when empty),
	// or, with checkRate, the rate counter and box every check_rate names.
	limit     string
	checkRate bool
	// leases rows acquire and release a concurrency limit's leases in
	// turn (bench/lease.lua), closed loop only.
	leases bool
	// deniedLimit, when set, takes every other request, on ids spent
	// before the run, so that half the requests are denied.
	deniedLimit string
	// grpc rows call ShouldRateLimit on grpcAddr instead of spending over
	// HTTP.
	grpc     bool
	grpcAddr string
	// redisPIDs are the redis-servers a Redis-backed row uses (each
	// master of a cluster), whose CPU measure reads (rediscpu.go), and
	// redisAddrs their addresses, whose script calls it counts.
	redisPIDs  []int
	redisAddrs []string
	// forwardAuth rows are servers of nginx, started with the limiter
	// and the application they share, not by start; auth is the server
	// a row's nginx asks (the limiter, the bare handler), nil for the
	// direct row.
	forwardAuth *forwardAuthSetup
	auth        *server
}

// script is the wrk script of s's requests.
func (s *server) script(root string) string {
	if s.forwardAuth != nil {
		return filepath.Join(root, faScript)
	}
	if s.checkRate {
		return filepath.Join(root, "bench", "check_rate.lua")
	}
	if s.leases {
		return filepath.Join(root, "bench", "lease.lua")
	}
	return filepath.Join(root, "bench", "spend.lua")
}

// call is the open loop's request of s.
func (s *server) call() call {
	if s.checkRate {
		return checkRateCall(s.limitName())
	}
	if s.deniedLimit != "" {
		return halfDeniedCall(s.limitName(), s.deniedLimit)
	}
	return spendCall(s.limitName())
}

// defaultLimit is the bundled GCRA limit the GCRA rows spend.
const defaultLimit = "APIRequestsPerKey"

func (s *server) limitName() string {
	if s.limit == "" {
		return defaultLimit
	}
	return s.limit
}

var (
	listening     = regexp.MustCompile(`msg=listening addr=(\S+)`)
	grpcListening = regexp.MustCompile(`msg=listening server=grpc addr=(\S+)`)
)

func (s *server) start() error {
	if s.forwardAuth != nil {
		return nil // running since forwardAuthRows
	}
	s.proc = exec.Command(s.cmd[0], s.cmd[1:]...)
	s.proc.Env = append([]string{"PATH=" + os.Getenv("PATH")}, s.env...)
	stderr, err := s.proc.StderrPipe()
	if err != nil {
		return err
	}
	if err := s.proc.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		// The gRPC listener is announced before the HTTP one.
		if m := grpcListening.FindStringSubmatch(sc.Text()); m != nil {
			s.grpcAddr = m[1]
		}
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			if s.grpc && s.grpcAddr == "" {
				return fmt.Errorf("%s listens without announcing a gRPC listener", s.name)
			}
			s.url = "http://" + m[1]
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return nil
		}
	}
	return fmt.Errorf("%s exited before listening", s.name)
}

func (s *server) stop() {
	if s.proc != nil && s.proc.Process != nil {
		_ = s.proc.Process.Kill()
		_ = s.proc.Wait()
	}
}

// cpuSeconds is the user+system CPU time a process has used.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return (utime + stime) / ticksPerSecond, nil
}
