package main

import (
	"fmt"
	"io"
	"path/filepath"
)

// The concurrency limit the harness adds to the bundled defaults: 10,000
// ids of 1,000 slots each, leases of a minute, so that every acquire is
// allowed, as every spend of the GCRA rows is (each lease is released by
// the request after its acquire, bench/lease.lua).
const (
	benchLeases       = "BenchLeases"
	benchLeasesLimits = `
BenchLeases:
  enum: 2000000006
  id: string
  algorithm: concurrency
  count: 1000
  period: 1m
`
)

// Row names of the lease rows.
const (
	leasesMemoryRow = "limiter, memory, acquire+release"
	leasesRedisRow  = "limiter, redis, acquire+release"
)

// leaseRows are the servers of the lease rows: the limiter on memory, and
// on Redis at redisAddr (with its pids, for its CPU) when it is not ""
// (it is skipped without redis-server).
func leaseRows(dir string, env []string, redisAddr string, redisPIDs []int) []*server {
	limiter := filepath.Join(dir, "limiter")
	rows := []*server{{name: leasesMemoryRow, cmd: []string{limiter, "serve"}, env: env, limit: benchLeases, leases: true}}
	if redisAddr != "" {
		rows = append(rows, &server{name: leasesRedisRow, cmd: []string{limiter, "serve", "--source", "redis://" + redisAddr}, env: env,
			limit: benchLeases, leases: true, redisPIDs: redisPIDs, redisAddrs: []string{redisAddr}})
	}
	return rows
}

// printLeaseTargets states the lease rows in pairs per second (half their
// requests), against the GCRA row of the same source in the same run.
func printLeaseTargets(w io.Writer, servers []*server, results [][]result) {
	rps := medianRPS(servers, results)
	for _, r := range []struct{ row, ref string }{
		{leasesMemoryRow, "limiter, memory"},
		{leasesRedisRow, "limiter, redis"},
	} {
		if rps[r.row] > 0 && rps[r.ref] > 0 {
			fmt.Fprintf(w, "- %s: %.0f pairs/s, requests %.2f × %s\n", r.row, rps[r.row]/2, rps[r.row]/rps[r.ref], r.ref)
		}
	}
}
