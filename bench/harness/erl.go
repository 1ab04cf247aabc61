package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// baselineServers builds the limiter of git revision rev from a copy of
// that revision (git archive, so the work tree is not touched) and returns
// a row for each limiter row over HTTP already in servers, running that
// build with the same command and environment, the defaults file
// excepted: the revision's own bundled one, which an older build can read,
// with the harness's limits appended when that build accepts them (and
// otherwise only the GCRA rows).
func baselineServers(root, dir, rev string, servers []*server) ([]*server, error) {
	src := filepath.Join(dir, "baseline-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return nil, err
	}
	archive := exec.Command("sh", "-c", "git archive --format=tar "+shellQuote(rev)+" | tar -x -C "+shellQuote(src))
	archive.Dir = root
	if out, err := archive.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copying revision %s: %v\n%s", rev, err, out)
	}
	bin := filepath.Join(dir, "limiter-baseline")
	build := exec.Command("go", "build", "-o", bin, "./cmd/limiter")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building revision %s: %v\n%s", rev, err, out)
	}
	defaults := filepath.Join(src, "config/defaults.yaml")
	overrides := filepath.Join(src, "config/overrides.yaml")
	withBench, err := benchDefaults(src, filepath.Join(dir, "baseline-defaults.yaml"))
	if err != nil {
		return nil, err
	}
	check := exec.Command(bin, "check-config", "--defaults", withBench, "--overrides", overrides)
	check.Dir = src
	limits := check.Run() == nil
	if limits {
		defaults = withBench
	}
	var rows []*server
	for _, s := range servers {
		if (s.limit != "" && !limits) || s.grpc || !strings.HasPrefix(s.name, "limiter, ") || s.name == clusterRow {
			continue
		}
		env := make([]string, 0, len(s.env))
		for _, e := range s.env {
			switch {
			case strings.HasPrefix(e, "LIMITER_DEFAULTS="):
				e = "LIMITER_DEFAULTS=" + defaults
			case strings.HasPrefix(e, "LIMITER_OVERRIDES="):
				e = "LIMITER_OVERRIDES=" + overrides
			}
			env = append(env, e)
		}
		cmd := append([]string{bin}, s.cmd[1:]...)
		row := *s
		row.name, row.cmd, row.env = baselineName(s.name, rev), cmd, env
		rows = append(rows, &row)
	}
	return rows, nil
}

// baselineName is the name of the baseline's row of the row named name.
func baselineName(name, rev string) string {
	return strings.Replace(name, "limiter, ", "limiter at "+rev+", ", 1)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// printERLTargets states the check_rate rows against bare, and each GCRA
// row against the same row of the baseline build, when they ran.
func printERLTargets(w io.Writer, servers []*server, results [][]result, baseline string) {
	rps := medianRPS(servers, results)
	bare := servers[0].name
	line := func(row, ref, target string) {
		if rps[row] > 0 && rps[ref] > 0 {
			fmt.Fprintf(w, "- %s: %.2f × %s (%s)\n", row, rps[row]/rps[ref], ref, target)
		}
	}
	line("limiter, memory, check_rate", bare, "target ≥ 0.8")
	line("limiter, redis, check_rate", bare, "target ≥ 0.4")
	if baseline != "" {
		line("limiter, memory", baselineName("limiter, memory", baseline), "target: within noise of 1")
		line("limiter, redis", baselineName("limiter, redis", baseline), "target: within noise of 1")
	}
}
