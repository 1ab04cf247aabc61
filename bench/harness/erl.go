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
// a row for each GCRA row already in servers (memory, redis), running that
// build with the same command and environment, the defaults file
// excepted: the revision's own bundled one, which an older build can read.
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
	var rows []*server
	for _, s := range servers {
		if s.limit != "" || s.grpc || !strings.HasPrefix(s.name, "limiter, ") {
			continue // only the GCRA rows of the limiter over HTTP
		}
		env := make([]string, 0, len(s.env))
		for _, e := range s.env {
			switch {
			case s.deniedLimit != "":
				// The half-denied rows' limit is the harness's: the
				// baseline reads the same defaults file.
			case strings.HasPrefix(e, "LIMITER_DEFAULTS="):
				e = "LIMITER_DEFAULTS=" + filepath.Join(src, "config/defaults.yaml")
			case strings.HasPrefix(e, "LIMITER_OVERRIDES="):
				e = "LIMITER_OVERRIDES=" + filepath.Join(src, "config/overrides.yaml")
			}
			env = append(env, e)
		}
		cmd := append([]string{bin}, s.cmd[1:]...)
		rows = append(rows, &server{name: strings.Replace(s.name, "limiter, ", "limiter at "+rev+", ", 1), cmd: cmd, env: env, deniedLimit: s.deniedLimit})
	}
	return rows, nil
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
		line("limiter, memory", "limiter at "+baseline+", memory", "target: within noise of 1")
		line("limiter, redis", "limiter at "+baseline+", redis", "target: within noise of 1")
		line("limiter, memory, half denied", "limiter at "+baseline+", memory, half denied", "target: within noise of 1")
		line("limiter, redis, half denied", "limiter at "+baseline+", redis, half denied", "target: within noise of 1")
	}
}
