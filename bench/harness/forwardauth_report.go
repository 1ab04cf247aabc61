package main

import (
	"fmt"
	"io"
)

// The forward-auth targets: what nginx with the limiter may cost against
// nginx alone, proxying to the same application in the same run.
const (
	// faMaxAddedP50 is the most the limiter may add to the median
	// latency, in ms, at the open loop's moderate rate, where the median
	// is service time rather than queueing.
	faMaxAddedP50 = 0.3
	// faMinRatio is the least share of nginx's direct throughput the
	// pair must sustain.
	faMinRatio = 0.5
)

// faVerdict is the forward-auth rows' figures against their targets.
type faVerdict struct {
	// addedP50 is the via row's open-loop p50 less the direct row's (ms),
	// medians over the rounds; addedClosedP50 the same of wrk's p50,
	// which at saturation is mostly queueing.
	addedP50, addedClosedP50 float64
	// ratio is the via row's closed-loop req/s over the direct row's,
	// medians over the rounds; 0 without a closed loop (-duration 0).
	ratio  float64
	errors int64 // non-2xx answers and socket errors of both rows
}

// judgeForwardAuth computes the verdict from each row's rounds.
func judgeForwardAuth(direct, via []result) faVerdict {
	col := func(rs []result, f func(result) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	openP50 := func(r result) float64 { return r.open.p50 }
	p50 := func(r result) float64 { return r.p50 }
	rps := func(r result) float64 { return r.rps }
	v := faVerdict{
		addedP50:       col(via, openP50) - col(direct, openP50),
		addedClosedP50: col(via, p50) - col(direct, p50),
	}
	if d := col(direct, rps); d > 0 {
		v.ratio = col(via, rps) / d
	}
	for _, r := range append(append([]result(nil), direct...), via...) {
		v.errors += r.errors
	}
	return v
}

// passFail spells whether a target is met.
func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// lines are the verdict's target lines, PASS or FAIL each.
func (v faVerdict) lines(rate int) []string {
	out := []string{
		fmt.Sprintf("%s: added p50, open loop at %d req/s: %.3f ms (target ≤ %.1f ms)",
			passFail(v.addedP50 <= faMaxAddedP50), rate, v.addedP50, faMaxAddedP50),
	}
	if v.ratio > 0 {
		out = append(out, fmt.Sprintf("%s: throughput, via the limiter / direct: %.3f (target ≥ %.1f)",
			passFail(v.ratio >= faMinRatio), v.ratio, faMinRatio))
	} else {
		out = append(out, "FAIL: throughput not measured (-duration 0)")
	}
	out = append(out, fmt.Sprintf("%s: errors (non-2xx and socket errors, none expected): %d",
		passFail(v.errors == 0), v.errors))
	return out
}

// printForwardAuth prints the forward-auth rows, when they ran: their
// table, each round's raw figures, the verdict and where the CPU went.
func printForwardAuth(w io.Writer, servers []*server, results [][]result, o options) {
	var direct, via []result
	workers := 0
	for i, s := range servers {
		switch {
		case s.forwardAuth == nil:
			continue
		case s.name == faDirectRow:
			direct = results[i]
		case s.name == faViaRow:
			via = results[i]
		}
		workers = s.forwardAuth.workers
	}
	if direct == nil || via == nil {
		return
	}
	app, link := "a static return 200 in the same nginx", "loopback TCP"
	if o.forwardAuthGoApp {
		app = "a small Go net/http server"
	}
	if o.forwardAuthUnix {
		link = "a Unix socket"
	}
	fmt.Fprintf(w, "\nForward-auth rows: GET / with one of 10,000 ids in %s through nginx (worker_processes %d, keepalive to the app and to the limiter), the app %s; the limiter on the memory source over %s, rule %q spending %s per id.\n",
		faHeader, workers, app, link, faRule, faLimit)
	fmt.Fprintf(w, "Closed loop: wrk -t%d -c%d -d%s. Open loop: %d req/s for %s. Medians of %d alternating rounds.\n\n",
		o.threads, o.connections, o.duration, o.faRate, o.openFor, o.rounds)
	fmt.Fprintln(w, "| row | req/s | p50 ms | p99 ms | nginx CPU µs/req | limiter CPU µs/req | wrk CPU µs/req | open p50 ms | open p99 ms | open p50 from send ms | sender late p99 ms | open req/s | errors |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, row := range []struct {
		name string
		rs   []result
	}{{faDirectRow, direct}, {faViaRow, via}} {
		col := func(f func(result) float64) float64 {
			xs := make([]float64, len(row.rs))
			for i, r := range row.rs {
				xs[i] = f(r)
			}
			return median(xs)
		}
		var errs int64
		for _, r := range row.rs {
			errs += r.errors
		}
		fmt.Fprintf(w, "| %s | %.0f | %.2f | %.2f | %.1f | %.1f | %.1f | %.3f | %.3f | %.3f | %.3f | %.0f | %d |\n", row.name,
			col(func(r result) float64 { return r.rps }), col(func(r result) float64 { return r.p50 }), col(func(r result) float64 { return r.p99 }),
			col(func(r result) float64 { return r.cpuPerReq - r.fa.limiterCPUPerReq }), col(func(r result) float64 { return r.fa.limiterCPUPerReq }),
			col(func(r result) float64 { return r.clientCPUPerReq }),
			col(func(r result) float64 { return r.open.p50 }), col(func(r result) float64 { return r.open.p99 }),
			col(func(r result) float64 { return r.open.sentP50 }), col(func(r result) float64 { return r.open.lateP99 }),
			col(func(r result) float64 { return r.open.achieved }), errs)
	}
	fmt.Fprintln(w, "\nEach round (direct, then via the limiter):")
	for i := range direct {
		d, v := direct[i], via[i]
		fmt.Fprintf(w, "- round %d: %.0f and %.0f req/s (%.3f); wrk p50 %.2f and %.2f ms; open p50 %.3f and %.3f ms (+%.3f), p99 %.3f and %.3f ms; TIME_WAIT to the app %d and %d, to the limiter %d; the rest of the machine %.2f and %.2f cores in the closed loop, %.2f and %.2f in the open loop\n",
			i+1, d.rps, v.rps, ratioOrZero(v.rps, d.rps), d.p50, v.p50, d.open.p50, v.open.p50, v.open.p50-d.open.p50, d.open.p99, v.open.p99,
			d.fa.timeWaitApp, v.fa.timeWaitApp, v.fa.timeWaitLimiter, d.fa.otherCores, v.fa.otherCores, d.fa.openOtherCores, v.fa.openOtherCores)
	}
	if warning := keepaliveWarning(via, o.duration.Seconds()); warning != "" {
		fmt.Fprintln(w, warning)
	}
	verdict := judgeForwardAuth(direct, via)
	fmt.Fprintln(w)
	for _, l := range verdict.lines(o.faRate) {
		fmt.Fprintln(w, l)
	}
	if verdict.ratio > 0 {
		fmt.Fprintf(w, "(for reference: wrk's p50 at saturation, mostly queueing, differs by %.2f ms)\n", verdict.addedClosedP50)
	}
}

// ratioOrZero is a / b, or 0 when b is 0.
func ratioOrZero(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// keepaliveWarning is a warning when nginx closed a sizeable share of its
// connections to the limiter during the via row's closed loops, as it
// does when it cannot keep them (see the template's proxy_method HEAD):
// more than one connection in a hundred requests of the measured run.
func keepaliveWarning(via []result, seconds float64) string {
	for i, r := range via {
		requests := r.rps * seconds
		if requests > 0 && float64(r.fa.timeWaitLimiter) > requests/100 {
			return fmt.Sprintf("WARNING: round %d: %d connections to the limiter closed for %.0f requests: nginx is not keeping its connections to the limiter",
				i+1, r.fa.timeWaitLimiter, requests)
		}
	}
	return ""
}
