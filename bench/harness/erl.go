package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// baselineServers builds the limiter of git revision rev from a copy of
// that revision (git archive, so the work tree is not touched) and returns
// a row for each limiter row over HTTP already in servers, running that
// build with the same command and environment, the defaults file
// excepted: the revision's own bundled one, which an older build can read,
// with those of the harness's limits that build accepts (baselineDefaults);
// a row whose limit it refuses has no baseline row.
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
	overrides := filepath.Join(src, "config/overrides.yaml")
	defaults, accepted, err := baselineDefaults(bin, src, dir, overrides)
	if err != nil {
		return nil, err
	}
	var rows []*server
	for _, s := range servers {
		if (s.limit != "" && !accepted[s.limit]) || (s.deniedLimit != "" && !accepted[s.deniedLimit]) ||
			s.grpc || !strings.HasPrefix(s.name, "limiter, ") || s.name == clusterRow {
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

// baselineDefaults writes the bundled defaults of the revision copied to
// src with each group of the harness's limits the build bin accepts
// (check-config), so that a build older than an algorithm still runs the
// rows of the others, and returns the file and the limits it holds.
func baselineDefaults(bin, src, dir, overrides string) (string, map[string]bool, error) {
	bundled, err := os.ReadFile(filepath.Join(src, "config/defaults.yaml"))
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "baseline-defaults.yaml")
	groups := []struct {
		yaml  string
		names []string
	}{
		{benchLimits, []string{benchSliding, benchSlidingSynced, benchRateCounter}},
		{benchCalendarLimits, []string{benchCalendar}},
		{benchOverLimitDef, []string{benchOverLimit}},
		{benchLeasesLimits, []string{benchLeases}},
	}
	accepted := map[string]bool{defaultLimit: true}
	kept := bundled
	for _, g := range groups {
		try := append(slices.Clip(kept), g.yaml...)
		if err := os.WriteFile(path, try, 0o644); err != nil {
			return "", nil, err
		}
		check := exec.Command(bin, "check-config", "--defaults", path, "--overrides", overrides)
		check.Dir = src
		if check.Run() != nil {
			continue
		}
		kept = try
		for _, n := range g.names {
			accepted[n] = true
		}
	}
	return path, accepted, os.WriteFile(path, kept, 0o644)
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
		line("limiter, memory, half denied", baselineName("limiter, memory, half denied", baseline), "target: within noise of 1")
		line("limiter, redis, half denied", baselineName("limiter, redis, half denied", baseline), "target: within noise of 1")
	}
}
