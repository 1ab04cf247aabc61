package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"
)

// The gRPC rows: limiter serve's Envoy rate-limit service, called with
// ShouldRateLimit in a closed loop by the harness's own HTTP/2 client
// (grpcLoad), on the limit and the 10,000 ids the HTTP GCRA rows spend.
const (
	grpcMemoryRow = "limiter, memory, gRPC ShouldRateLimit"
	grpcRedisRow  = "limiter, redis, gRPC ShouldRateLimit"

	// envoyRatelimitRedisRPS is twice envoyproxy/ratelimit's own measured
	// figure on Redis (13,400 req/s): what the Redis row is held to.
	envoyRatelimitRedisRPS = 26800
)

// grpcRules is the rules file of the gRPC rows: a descriptor of one
// api_key entry in domain "bench" spends the GCRA limit of the HTTP rows,
// its value being the id.
const grpcRules = `- domain: ` + grpcBenchDomain + `
  descriptors:
    - keys: [` + grpcBenchKey + `]
      limit: ` + defaultLimit + `
`

// grpcEnv writes the rules file into dir and returns env with what makes
// a limiter serve gRPC on a free loopback port with those rules.
func grpcEnv(dir string, env []string) ([]string, error) {
	path := filepath.Join(dir, "descriptors.yaml")
	if err := os.WriteFile(path, []byte(grpcRules), 0o644); err != nil {
		return nil, err
	}
	out := append([]string(nil), env...)
	return append(out, "LIMITER_GRPC_LISTEN=127.0.0.1:0", "LIMITER_DESCRIPTORS="+path), nil
}

// measureGRPC is measure for a gRPC row: a warm-up, then the measured run
// with the server's CPU time read around it, on the same connections.
func measureGRPC(s *server, o options) (result, error) {
	if o.duration == 0 {
		return result{}, nil // the open loop speaks HTTP/1.1 only
	}
	return grpcClosedLoop(s.grpcAddr, s.proc.Process.Pid, s.limitName(), o)
}

// grpcClosedLoop measures the ShouldRateLimit service on addr, reading
// the CPU time of the process pid around the measured run (none when pid
// is 0), and checking first that the answers are limit's.
func grpcClosedLoop(addr string, pid int, limit string, o options) (result, error) {
	var r result
	ctx := context.Background()
	requests, err := encodeRequests(grpcBenchDomain, grpcBenchKey, 10000)
	if err != nil {
		return r, err
	}
	load, err := newGRPCLoad(ctx, addr, o.grpcConns, recvWindow, requests)
	if err != nil {
		return r, err
	}
	defer load.close()
	// The servers collect garbage only every 64 MiB (GOGC=1600 for the
	// bare ones); the load generator, whose live heap is a few MiB of
	// requests and latencies, gets the same policy while it runs, so its
	// collections take less of the cores it shares with them.
	defer debug.SetGCPercent(debug.SetGCPercent(1600))
	if err := load.preflight(ctx, limit); err != nil {
		return r, err
	}
	if _, err := load.run(ctx, o.grpcInFlight, o.warmup); err != nil {
		return r, err
	}
	serverCPU := func() (float64, error) {
		if pid == 0 {
			return 0, nil
		}
		return cpuSeconds(pid)
	}
	before, err := serverCPU()
	if err != nil {
		return r, err
	}
	ownBefore, err := ownCPUSeconds()
	if err != nil {
		return r, err
	}
	st, err := load.run(ctx, o.grpcInFlight, o.duration)
	if err != nil {
		return r, err
	}
	after, err := serverCPU()
	if err != nil {
		return r, err
	}
	ownAfter, err := ownCPUSeconds()
	if err != nil {
		return r, err
	}
	if st.calls == 0 {
		return r, fmt.Errorf("no call answered in %s", o.duration)
	}
	if st.firstErr != nil {
		fmt.Fprintf(os.Stderr, "harness: %s: %d failed calls, %d bad answers; first: %v\n", addr, st.errors, st.badAnswer, st.firstErr)
	}
	r.rps = float64(st.calls) / st.elapsed.Seconds()
	r.p50 = float64(percentile(st.latencies, 0.50)) / 1e6
	r.p99 = float64(percentile(st.latencies, 0.99)) / 1e6
	r.errors = st.errors + st.badAnswer
	r.cpuPerReq = (after - before) / float64(st.calls) * 1e6
	r.clientCPUPerReq = (ownAfter - ownBefore) / float64(st.calls) * 1e6
	return r, nil
}

// measureGRPCAddr is -grpc-addr: the closed loop against a running
// server, whose rules must map the harness's descriptors to the GCRA
// limit.
func measureGRPCAddr(o options) error {
	r, err := grpcClosedLoop(o.grpcAddr, 0, defaultLimit, o)
	if err != nil {
		return err
	}
	fmt.Printf("ShouldRateLimit, %d calls in flight over %d connections for %s: %.0f req/s, p50 %.2f ms, p99 %.2f ms, %d errors, the load generator's CPU %.1f µs per call\n",
		o.grpcInFlight, o.grpcConns, o.duration, r.rps, r.p50, r.p99, r.errors, r.clientCPUPerReq)
	return nil
}

// ownCPUSeconds is the user+system CPU time the harness itself has used:
// for the gRPC rows, what the load generator took from the cores it
// shares with the server.
func ownCPUSeconds() (float64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds(), nil
}

// printGRPCTargets states the gRPC rows as their targets are written: the
// memory row against the HTTP memory row of the same run, the Redis row
// against twice envoyproxy/ratelimit's figure.
func printGRPCTargets(w io.Writer, servers []*server, results [][]result, o options) {
	rps := medianRPS(servers, results)
	if rps[grpcMemoryRow] == 0 && rps[grpcRedisRow] == 0 {
		return
	}
	fmt.Fprintf(w, "\ngRPC rows: the harness's own HTTP/2 client, a closed loop of %d calls in flight over %d connections, ShouldRateLimit of one descriptor for one of 10,000 ids; no open loop.\n",
		o.grpcInFlight, o.grpcConns)
	for i, s := range servers {
		if !s.grpc {
			continue
		}
		xs := make([]float64, len(results[i]))
		for j, r := range results[i] {
			xs[j] = r.clientCPUPerReq
		}
		fmt.Fprintf(w, "- %s: the load generator's own CPU %.1f µs per call\n", s.name, median(xs))
	}
	if rps[grpcMemoryRow] > 0 {
		if http := rps["limiter, memory"]; http > 0 {
			fmt.Fprintf(w, "- %s: %.2f × limiter, memory over HTTP (target ≥ 1.0)\n", grpcMemoryRow, rps[grpcMemoryRow]/http)
		} else {
			fmt.Fprintf(w, "- %s: no HTTP memory row in this run to compare with (add memory to -sources)\n", grpcMemoryRow)
		}
	}
	if rps[grpcRedisRow] > 0 {
		fmt.Fprintf(w, "- %s: %.2f × %d req/s, twice envoyproxy/ratelimit's measured figure (target ≥ 1.0)\n",
			grpcRedisRow, rps[grpcRedisRow]/envoyRatelimitRedisRPS, envoyRatelimitRedisRPS)
	}
}
