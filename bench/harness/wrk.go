package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// wrk runs wrk against s for d and returns its output and the CPU time
// wrk itself used: the load generator's share of the cores it shares
// with the servers.
func wrk(s *server, script string, d time.Duration, o options) (string, time.Duration, error) {
	cmd := exec.Command("wrk", "-t", strconv.Itoa(o.threads), "-c", strconv.Itoa(o.connections),
		"-d", fmt.Sprintf("%ds", int(d.Seconds())), "--latency", "-s", script, s.url)
	// spend.lua reads the limit to spend from its environment.
	cmd.Env = append(os.Environ(), "LIMITER_BENCH_LIMIT="+s.limitName(), "LIMITER_BENCH_DENIED_LIMIT="+s.deniedLimit)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", 0, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	return string(out), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

var (
	wrkRequests = regexp.MustCompile(`(\d+) requests in`)
	wrkRPS      = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	wrkNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkSocket   = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

func parseWrk(out string) (requests int64, rps, p50, p99 float64, errs int64, err error) {
	m := wrkRequests.FindStringSubmatch(out)
	m2 := wrkRPS.FindStringSubmatch(out)
	if m == nil || m2 == nil {
		return 0, 0, 0, 0, 0, fmt.Errorf("unreadable wrk output:\n%s", out)
	}
	requests, _ = strconv.ParseInt(m[1], 10, 64)
	rps, _ = strconv.ParseFloat(m2[1], 64)
	p50, err = wrkPercentile(out, "50%")
	if err == nil {
		p99, err = wrkPercentile(out, "99%")
	}
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		errs += n
	}
	if m := wrkSocket.FindStringSubmatch(out); m != nil {
		for _, f := range m[1:] {
			n, _ := strconv.ParseInt(f, 10, 64)
			errs += n
		}
	}
	return requests, rps, p50, p99, errs, err
}

// wrkPercentile reads a latency percentile line ("  99%  1.23ms") in ms.
func wrkPercentile(out, pct string) (float64, error) {
	m := regexp.MustCompile(`\s` + regexp.QuoteMeta(pct) + `\s+([\d.]+)(us|ms|s)`).FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no %s latency in wrk output", pct)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	switch m[2] {
	case "us":
		v /= 1000
	case "s":
		v *= 1000
	}
	return v, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
