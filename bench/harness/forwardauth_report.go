package main

import (
	"fmt"
	"io"
)

// The forward-auth targets: what nginx with the limiter may cost against
// the same nginx asking a bare net/http handler that decides nothing, and
// against nginx alone, proxying to the same application in the same run.
const (
	// faMaxAddedP50 is the most the limiter may add to nginx's direct
	// median latency, in ms, at the open loop's moderate rate, where the
	// median is service time rather than queueing.
	faMaxAddedP50 = 0.3
	// faMinBareRatio is the least share of the bare row's throughput
	// the limiter's row must sustain. Both pay for nginx, the
	// subrequest and net/http alike, so what is left is the limiter's
	// own handling and decision, a few µs of CPU in some 70 per request
	// on two shared cores: 0.9 leaves room for a round's noise and
	// fails a limiter that costs a tenth more per call than it should.
	faMinBareRatio = 0.9
)

// faVerdict is the forward-auth rows' figures against their targets.
type faVerdict struct {
	// addedP50 is the via row's open-loop p50 less the direct row's (ms),
	// medians over the rounds, and bareAddedP50 the bare row's;
	// addedClosedP50 the via row's of wrk's p50, which at saturation is
	// mostly queueing.
	addedP50, bareAddedP50, addedClosedP50 float64
	// ratio is the via row's closed-loop req/s over the bare row's,
	// medians over the rounds; 0 without a closed loop (-duration 0).
	// viaDirect and bareDirect are the via and bare rows' over the
	// direct row's, for reference.
	ratio, viaDirect, bareDirect float64
	errors                       int64 // non-2xx answers and socket errors of every row
}

// judgeForwardAuth computes the verdict from each row's rounds.
func judgeForwardAuth(direct, via, bare []result) faVerdict {
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
		bareAddedP50:   col(bare, openP50) - col(direct, openP50),
		addedClosedP50: col(via, p50) - col(direct, p50),
		ratio:          ratioOrZero(col(via, rps), col(bare, rps)),
		viaDirect:      ratioOrZero(col(via, rps), col(direct, rps)),
		bareDirect:     ratioOrZero(col(bare, rps), col(direct, rps)),
	}
	for _, rs := range [][]result{direct, via, bare} {
		for _, r := range rs {
			v.errors += r.errors
		}
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
		fmt.Sprintf("%s: added p50, open loop at %d req/s, via the limiter less direct: %.3f ms (target ≤ %.1f ms; the bare handler adds %.3f ms)",
			passFail(v.addedP50 <= faMaxAddedP50), rate, v.addedP50, faMaxAddedP50, v.bareAddedP50),
	}
	if v.ratio > 0 {
		out = append(out, fmt.Sprintf("%s: throughput, via the limiter / via the bare handler: %.3f (target ≥ %.1f; against direct: %.3f and %.3f)",
			passFail(v.ratio >= faMinBareRatio), v.ratio, faMinBareRatio, v.viaDirect, v.bareDirect))
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
	var direct, via, bare []result
	workers := 0
	for i, s := range servers {
		switch {
		case s.forwardAuth == nil:
			continue
		case s.name == faDirectRow:
			direct = results[i]
		case s.name == faViaRow:
			via = results[i]
		case s.name == faBareRow:
			bare = results[i]
		}
		workers = s.forwardAuth.workers
	}
	if direct == nil || via == nil || bare == nil {
		return
	}
	app, link := "a static return 200 in the same nginx", "loopback TCP"
	if o.forwardAuthGoApp {
		app = "a small Go net/http server"
	}
	if o.forwardAuthUnix {
		link = "Unix sockets"
	}
	fmt.Fprintf(w, "\nForward-auth rows: GET / with one of 10,000 ids in %s through nginx (worker_processes %d, keepalive to the app and to the server it asks), the app %s; the limiter on the memory source, rule %q spending %s per id, and the bare net/http handler (bench/bare -forward-auth, no decision), both over %s.\n",
		faHeader, workers, app, faRule, faLimit, link)
	fmt.Fprintf(w, "Closed loop: wrk -t%d -c%d -d%s. Open loop: %d req/s for %s. Medians of %d alternating rounds.\n\n",
		o.threads, o.connections, o.duration, o.faRate, o.openFor, o.rounds)
	fmt.Fprintln(w, "| row | req/s | p50 ms | p99 ms | nginx CPU µs/req | asked server's CPU µs/req | wrk CPU µs/req | open p50 ms | open p99 ms | open p50 from send ms | sender late p99 ms | open req/s | errors |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, row := range []struct {
		name string
		rs   []result
	}{{faDirectRow, direct}, {faViaRow, via}, {faBareRow, bare}} {
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
			col(func(r result) float64 { return r.cpuPerReq - r.fa.authCPUPerReq }), col(func(r result) float64 { return r.fa.authCPUPerReq }),
			col(func(r result) float64 { return r.clientCPUPerReq }),
			col(func(r result) float64 { return r.open.p50 }), col(func(r result) float64 { return r.open.p99 }),
			col(func(r result) float64 { return r.open.sentP50 }), col(func(r result) float64 { return r.open.lateP99 }),
			col(func(r result) float64 { return r.open.achieved }), errs)
	}
	fmt.Fprintln(w, "\nEach round (direct, via the limiter, via the bare handler):")
	for i := range direct {
		d, v, b := direct[i], via[i], bare[i]
		fmt.Fprintf(w, "- round %d: %.0f, %.0f and %.0f req/s (limiter / bare %.3f); wrk p50 %.2f, %.2f and %.2f ms; open p50 %.3f, %.3f and %.3f ms (+%.3f, +%.3f), p99 %.3f, %.3f and %.3f ms; TIME_WAIT to the app %d, %d and %d, to the limiter %d, to the bare handler %d; the rest of the machine %.2f, %.2f and %.2f cores in the closed loop, %.2f, %.2f and %.2f in the open loop\n",
			i+1, d.rps, v.rps, b.rps, ratioOrZero(v.rps, b.rps), d.p50, v.p50, b.p50,
			d.open.p50, v.open.p50, b.open.p50, v.open.p50-d.open.p50, b.open.p50-d.open.p50, d.open.p99, v.open.p99, b.open.p99,
			d.fa.timeWaitApp, v.fa.timeWaitApp, b.fa.timeWaitApp, v.fa.timeWaitAuth, b.fa.timeWaitAuth,
			d.fa.otherCores, v.fa.otherCores, b.fa.otherCores, d.fa.openOtherCores, v.fa.openOtherCores, b.fa.openOtherCores)
	}
	for _, row := range []struct {
		name string
		rs   []result
	}{{"the limiter", via}, {"the bare handler", bare}} {
		if warning := keepaliveWarning(row.name, row.rs, o.duration.Seconds()); warning != "" {
			fmt.Fprintln(w, warning)
		}
	}
	verdict := judgeForwardAuth(direct, via, bare)
	fmt.Fprintln(w)
	for _, l := range verdict.lines(o.faRate) {
		fmt.Fprintln(w, l)
	}
	if verdict.ratio > 0 {
		fmt.Fprintf(w, "(for reference: wrk's p50 at saturation, mostly queueing, differs by %.2f ms between via the limiter and direct)\n", verdict.addedClosedP50)
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
// connections to the server it asks (named asked) during a row's closed
// loops, as it does when it cannot keep them (see the template's
// proxy_method HEAD): more than one connection in a hundred requests of
// the measured run.
func keepaliveWarning(asked string, rs []result, seconds float64) string {
	for i, r := range rs {
		requests := r.rps * seconds
		if requests > 0 && float64(r.fa.timeWaitAuth) > requests/100 {
			return fmt.Sprintf("WARNING: round %d: %d connections to %s closed for %.0f requests: nginx is not keeping its connections to %s",
				i+1, r.fa.timeWaitAuth, asked, requests, asked)
		}
	}
	return ""
}
