package main

import (
	"fmt"
	"io"
	"path/filepath"
)

// The calendar limit the harness adds to the bundled defaults: 10,000 ids
// each allowed a billion hits per month of Paris, so that every spend is
// allowed, as every spend of the GCRA rows is.
const (
	benchCalendar       = "BenchCalendarMonth"
	benchCalendarLimits = `
BenchCalendarMonth:
  enum: 2000000004
  id: string
  algorithm: calendar
  count: 1000000000
  period: month
  timezone: Europe/Paris
`
)

// Row names of the calendar rows.
const (
	calendarMemoryRow = "limiter, memory, calendar month"
	calendarRedisRow  = "limiter, redis, calendar month"
)

// calendarRows are the servers of the calendar rows: the limiter on
// memory, and on Redis at redisAddr when it is not "" (it is skipped
// without redis-server).
func calendarRows(dir string, env []string, redisAddr string) []*server {
	limiter := filepath.Join(dir, "limiter")
	rows := []*server{{name: calendarMemoryRow, cmd: []string{limiter, "serve"}, env: env, limit: benchCalendar}}
	if redisAddr != "" {
		rows = append(rows, &server{name: calendarRedisRow, cmd: []string{limiter, "serve", "--source", "redis://" + redisAddr}, env: env, limit: benchCalendar})
	}
	return rows
}

// printCalendarTargets states the calendar rows against the GCRA row of
// the same source in the same run: the memory one's target is 0.9 × the
// GCRA row's; the Redis one has none and is shown beside its GCRA row.
func printCalendarTargets(w io.Writer, servers []*server, results [][]result) {
	rps := medianRPS(servers, results)
	for _, r := range []struct {
		row, ref string
		target   string
	}{
		{calendarMemoryRow, "limiter, memory", " (target ≥ 0.9)"},
		{calendarRedisRow, "limiter, redis", ""},
	} {
		if rps[r.row] > 0 && rps[r.ref] > 0 {
			fmt.Fprintf(w, "- %s: %.2f × %s%s\n", r.row, rps[r.row]/rps[r.ref], r.ref, r.target)
		}
	}
}
