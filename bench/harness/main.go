// Command harness measures POST /v1/spend end to end: limiter on each
// source next to the bare net/http JSON handler (bench/bare), in the same
// run, alternating, and prints the medians of several rounds as a table.
//
// Closed loop (wrk, fixed connections) gives throughput, latency and server
// CPU per request; open loop (a fixed request rate, latency measured from
// when each request was due, so queueing is counted) gives latency where
// queueing does not hide service time.
//
//	go -C bench run ./harness                 # memory and, if redis-server exists, redis
//	go -C bench run ./harness -rounds 5 -duration 20s
//	go -C bench run ./harness -sources memory,redis,redisrate   # with the redis_rate peer
//	go -C bench run ./harness -sources memory,redis,erl -baseline ebd7b57   # check_rate, and GCRA against an older build
//	go -C bench run ./harness -sources memory,redis,halfdenied -baseline 3b6a20c   # GCRA with none and half denied, against an older build
//	go -C bench run ./harness -sources memory,redis,grpc   # Envoy's ShouldRateLimit over gRPC next to /v1/spend
//	go -C bench run ./harness -grpc-addr 127.0.0.1:8081 -duration 30s   # ShouldRateLimit of a running server
//	go -C bench run ./harness -sources forwardauth   # nginx auth_request to the limiter against a bare handler and nginx alone
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

type options struct {
	rounds      int
	duration    time.Duration
	warmup      time.Duration
	connections int
	threads     int
	rate        int
	openFor     time.Duration
	sources     string
	env         string
	url         string
	baseline    string
	// The gRPC rows' closed loop: calls in flight, and the HTTP/2
	// connections they share.
	grpcInFlight int
	grpcConns    int
	grpcAddr     string
	// The forward-auth rows' open-loop rate, and nginx's worker count
	// (0: one per core).
	faRate       int
	nginxWorkers int
	// forwardAuthUnix puts the forward-auth rows' limiter on a Unix socket.
	forwardAuthUnix bool
	// forwardAuthGoApp puts a Go net/http application behind both rows.
	forwardAuthGoApp bool
	// redisCPU is the CPU every redis-server runs on alone (-1: any).
	redisCPU int
}

func main() {
	var o options
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; each server runs once per round, alternating")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "closed-loop measurement time per run (0: open loop only)")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "closed-loop warm-up per run, not measured")
	flag.IntVar(&o.connections, "connections", 50, "wrk connections")
	flag.IntVar(&o.threads, "threads", 2, "wrk threads")
	flag.IntVar(&o.rate, "rate", 5000, "open-loop requests per second")
	flag.DurationVar(&o.openFor, "open-duration", 5*time.Second, "open-loop measurement time per run")
	flag.StringVar(&o.sources, "sources", "memory,redis,windows", "what to measure besides bare: memory, redis (the limiter and bare + INCR), halfdenied (the GCRA rows with every other request on an id already over its limit, so half are denied), windows (a sliding-window limit on memory, and on Redis with sync_rate 0 and 1), calendar (a monthly calendar limit on memory and on Redis), leases (acquire and release pairs of a concurrency limit on memory and on Redis, closed loop only), cluster (the limiter's GCRA row on a 3-master Redis Cluster, with each master's CPU), erl (check_rate), grpc (Envoy's ShouldRateLimit on memory and Redis), redisrate (go-redis/redis_rate behind net/http), forwardauth (nginx with auth_request to the limiter against the same to a bare net/http handler and nginx alone, needs /usr/sbin/nginx); redis ones are skipped without redis-server")
	flag.IntVar(&o.faRate, "forward-auth-rate", 2000, "forward-auth rows: open-loop requests per second, a rate every row sustains")
	flag.BoolVar(&o.forwardAuthGoApp, "forward-auth-go-app", false, "forward-auth rows: the application every row proxies to is a small Go net/http server answering \"ok\" (in the harness's process) instead of a static return inside nginx")
	flag.BoolVar(&o.forwardAuthUnix, "forward-auth-unix", false, "forward-auth rows: the limiter and the bare handler listen on Unix sockets (--listen unix:PATH) and nginx asks them there, instead of over loopback TCP")
	flag.IntVar(&o.nginxWorkers, "nginx-workers", 0, "forward-auth rows: nginx's worker_processes, the same for every row (0: one per core, as auto)")
	flag.IntVar(&o.grpcInFlight, "grpc-inflight", 50, "gRPC rows: calls in flight")
	flag.IntVar(&o.grpcConns, "grpc-conns", 2, "gRPC rows: HTTP/2 connections the calls share")
	flag.StringVar(&o.grpcAddr, "grpc-addr", "", "measure only this running server's ShouldRateLimit (host:port) with the gRPC rows' closed loop, building and starting nothing; its rules must map domain \"bench\", key api_key to "+defaultLimit)
	flag.IntVar(&o.redisCPU, "redis-cpu", -1, "run every redis-server alone on this CPU, and the harness with everything it starts on the others, as a host with a core for Redis would: then Redis's CPU per request is not inflated by sharing a core and its caches with the load and the servers (-1: no pinning)")
	flag.StringVar(&o.env, "env", "", "extra environment for the limiter processes, comma-separated (e.g. GOGC=400)")
	flag.StringVar(&o.baseline, "baseline", "", "a git revision whose limiter also runs the GCRA rows (memory, and redis when measured), built from a copy of that revision: to tell whether a change slowed them")
	flag.StringVar(&o.url, "url", "", "measure only this running server (e.g. http://127.0.0.1:8080), building and starting nothing")
	flag.Parse()
	if o.redisCPU >= 0 {
		if err := pinOffCPU(o.redisCPU); err != nil {
			fmt.Fprintln(os.Stderr, "harness:", err)
			os.Exit(1)
		}
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}

// result is one run's measurements.
type result struct {
	rps, p50, p99, cpuPerReq float64 // req/s, ms, ms, µs
	open                     openLoopResult
	errors                   int64
	clientCPUPerReq          float64   // µs, the load generator's own (gRPC and forward-auth rows)
	redisCPU                 []float64 // µs per request, each of the row's redis-servers, closed loop
	redisScripts             float64   // script calls (EVALSHA, EVAL) per request, all its redis-servers, closed loop
	fa                       faFigures
}

func run(o options) error {
	if o.grpcAddr != "" {
		return measureGRPCAddr(o)
	}
	if o.url != "" && o.duration == 0 {
		r, err := openLoop(o.url, spendCall(defaultLimit).post(), o.rate, o.openFor)
		if err != nil {
			return err
		}
		fmt.Printf("open loop, %d req/s for %s: p50 %.2f ms, p99 %.2f ms, p99 from send %.2f ms, sender late p99 %.2f ms, %.0f req/s, %d not 200\n",
			o.rate, o.openFor, r.p50, r.p99, r.sentP99, r.lateP99, r.achieved, r.failed)
		return nil
	}
	if o.url != "" {
		return errors.New("-url measures the open loop only: give -duration 0")
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		return errors.New("wrk is needed: apt-get install -y wrk")
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "limiter-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The limiter is the service module's; the bare handler is this
	// module's, in bench/.
	for _, b := range []struct{ out, pkg, dir string }{{"limiter", "./cmd/limiter", root}, {"bare", "./bare", filepath.Join(root, "bench")}} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, b.out), b.pkg)
		build.Dir = b.dir
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %v\n%s", b.pkg, err, out)
		}
	}
	// The limiter lets its heap grow to 64 MiB between collections (serve's
	// --gc-heap-floor-mib); the bare handler gets the same policy, so the
	// ceiling is not lowered by a garbage collector the limiter does not
	// run. With a live heap of a few hundred kilobytes, GOGC=1600 puts Go's
	// minimum heap goal (4 MiB at GOGC=100) at the same 64 MiB.
	servers := []*server{{name: "bare net/http + encoding/json", cmd: []string{filepath.Join(dir, "bare")}, env: []string{"GOGC=1600"}}}
	defaults, err := benchDefaults(root, filepath.Join(dir, "defaults.yaml"))
	if err != nil {
		return err
	}
	limiterEnv := []string{"LIMITER_LISTEN=127.0.0.1:0",
		"LIMITER_DEFAULTS=" + defaults, "LIMITER_OVERRIDES=" + filepath.Join(root, "config/overrides.yaml")}
	var extraEnv []string
	if o.env != "" {
		extraEnv = strings.Split(o.env, ",")
		limiterEnv = append(limiterEnv, extraEnv...)
	}
	// One private Redis serves every Redis-backed server, started when the
	// first one needs it; the cluster rows' three masters likewise.
	var single *redisServer
	var masters []*redisServer
	redis := func() (string, []int, error) {
		if single == nil {
			var err error
			if single, err = startRedis(dir, false, o.redisCPU); err != nil {
				return "", nil, err
			}
		}
		return single.addr, pidsOf(single), nil
	}
	defer func() {
		for _, r := range append(masters, single) {
			if r != nil {
				r.stop()
			}
		}
	}()
	for _, src := range strings.Split(o.sources, ",") {
		switch src {
		case "memory":
			servers = append(servers, &server{name: "limiter, memory", cmd: []string{filepath.Join(dir, "limiter"), "serve"}, env: limiterEnv})
		case "redis":
			addr, pids, err := redis()
			if err != nil {
				fmt.Fprintln(os.Stderr, "harness: skipping redis:", err)
				continue
			}
			servers = append(servers,
				&server{name: incrRow, cmd: []string{filepath.Join(dir, "bare"), "-redis", addr}, env: []string{"GOGC=1600"}, redisPIDs: pids, redisAddrs: []string{addr}},
				&server{name: "limiter, redis", cmd: []string{filepath.Join(dir, "limiter"), "serve", "--source", "redis://" + addr}, env: limiterEnv, redisPIDs: pids, redisAddrs: []string{addr}})
		case "cluster":
			if masters == nil {
				var err error
				if masters, err = startCluster(dir, o.redisCPU); err != nil {
					fmt.Fprintln(os.Stderr, "harness: skipping the Redis Cluster row:", err)
					continue
				}
			}
			servers = append(servers, &server{name: clusterRow, cmd: []string{filepath.Join(dir, "limiter"), "serve", "--source", clusterSource(masters)}, env: limiterEnv, redisPIDs: pidsOf(masters...), redisAddrs: addrsOf(masters)})
		case "halfdenied":
			servers = append(servers, &server{name: "limiter, memory, half denied", cmd: []string{filepath.Join(dir, "limiter"), "serve"}, env: limiterEnv, deniedLimit: benchOverLimit})
			if addr, pids, err := redis(); err == nil {
				servers = append(servers, &server{name: "limiter, redis, half denied", cmd: []string{filepath.Join(dir, "limiter"), "serve", "--source", "redis://" + addr}, env: limiterEnv, deniedLimit: benchOverLimit, redisPIDs: pids, redisAddrs: []string{addr}})
			}
		case "windows":
			servers = append(servers, &server{name: "limiter, memory, sliding window", cmd: []string{filepath.Join(dir, "limiter"), "serve"}, env: limiterEnv, limit: benchSliding})
			addr, pids, err := redis()
			if err != nil {
				fmt.Fprintln(os.Stderr, "harness: skipping the Redis window rows:", err)
				continue
			}
			redisSource := []string{filepath.Join(dir, "limiter"), "serve", "--source", "redis://" + addr}
			servers = append(servers,
				&server{name: "limiter, redis, sliding window, sync_rate 0", cmd: redisSource, env: limiterEnv, limit: benchSliding, redisPIDs: pids, redisAddrs: []string{addr}},
				&server{name: "limiter, redis, sliding window, sync_rate 1", cmd: redisSource, env: limiterEnv, limit: benchSlidingSynced, redisPIDs: pids, redisAddrs: []string{addr}})
		case "calendar":
			addr, _, err := redis()
			if err != nil {
				fmt.Fprintln(os.Stderr, "harness: skipping the Redis calendar row:", err)
			}
			servers = append(servers, calendarRows(dir, limiterEnv, addr)...)
		case "leases":
			addr, pids, err := redis()
			if err != nil {
				fmt.Fprintln(os.Stderr, "harness: skipping the Redis acquire+release row:", err)
			}
			servers = append(servers, leaseRows(dir, limiterEnv, addr, pids)...)
		case "erl":
			servers = append(servers, &server{name: "limiter, memory, check_rate", cmd: []string{filepath.Join(dir, "limiter"), "serve"}, env: limiterEnv, limit: benchRateCounter, checkRate: true})
			addr, pids, err := redis()
			if err != nil {
				fmt.Fprintln(os.Stderr, "harness: skipping the Redis check_rate row:", err)
				continue
			}
			servers = append(servers, &server{name: "limiter, redis, check_rate", cmd: []string{filepath.Join(dir, "limiter"), "serve", "--source", "redis://" + addr}, env: limiterEnv, limit: benchRateCounter, checkRate: true, redisPIDs: pids, redisAddrs: []string{addr}})
		case "grpc":
			env, err := grpcEnv(dir, limiterEnv)
			if err != nil {
				return err
			}
			servers = append(servers, &server{name: grpcMemoryRow, cmd: []string{filepath.Join(dir, "limiter"), "serve"}, env: env, grpc: true})
			addr, _, err := redis()
			if err != nil {
				fmt.Fprintln(os.Stderr, "harness: skipping the Redis gRPC row:", err)
				continue
			}
			servers = append(servers, &server{name: grpcRedisRow, cmd: []string{filepath.Join(dir, "limiter"), "serve", "--source", "redis://" + addr}, env: env, grpc: true})
		case "forwardauth":
			rows, stop, err := forwardAuthRows(context.Background(), dir, filepath.Join(dir, "limiter"), filepath.Join(dir, "bare"), extraEnv, o.nginxWorkers, o.forwardAuthUnix, o.forwardAuthGoApp)
			if err != nil {
				return err
			}
			defer stop()
			servers = append(servers, rows...)
		case "redisrate":
			addr, pids, err := redis()
			if err != nil {
				fmt.Fprintln(os.Stderr, "harness: skipping redisrate:", err)
				continue
			}
			// A module of its own (bench/peers/redisrate), built from its
			// directory; the first build fetches redis_rate.
			out := filepath.Join(dir, "redisrate-http")
			build := exec.Command("go", "build", "-o", out, "./cmd/redisrate-http")
			build.Dir = filepath.Join(root, "bench", "peers", "redisrate")
			if b, err := build.CombinedOutput(); err != nil {
				return fmt.Errorf("building bench/peers/redisrate: %v\n%s", err, b)
			}
			servers = append(servers, &server{name: "redis_rate behind net/http", cmd: []string{out, "-redis", addr}, env: []string{"GOGC=1600"}, redisPIDs: pids, redisAddrs: []string{addr}})
		default:
			return fmt.Errorf("unknown source %q in -sources (memory, redis, halfdenied, cluster, windows, calendar, leases, erl, grpc, redisrate, forwardauth)", src)
		}
	}
	if o.baseline != "" {
		rows, err := baselineServers(root, dir, o.baseline, servers)
		if err != nil {
			return err
		}
		servers = append(servers, rows...)
	}
	// The rows share one Redis: each limiter row keeps its buckets apart,
	// under a namespace of its own, so that none starts from another's
	// buckets, nor reads a form of them that its build does not know (a
	// baseline's, beside a build writing binary TATs).
	for i, s := range servers {
		if len(s.redisAddrs) > 0 && strings.HasPrefix(s.name, "limiter") {
			s.env = append(slices.Clip(s.env), fmt.Sprintf("LIMITER_REDIS_NAMESPACE=row%02d:", i))
		}
	}
	for _, s := range servers {
		if err := s.start(); err != nil {
			return err
		}
		defer s.stop()
		if s.deniedLimit != "" {
			if err := s.exhaust(context.Background()); err != nil {
				return err
			}
		}
	}
	results := make([][]result, len(servers))
	for round := range o.rounds {
		for i, s := range servers {
			fmt.Fprintf(os.Stderr, "round %d/%d: %s\n", round+1, o.rounds, s.name)
			r, err := measure(s, s.script(root), o)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			results[i] = append(results[i], r)
		}
	}
	printTable(os.Stdout, servers, results, o)
	printRedisCPU(os.Stdout, servers, results)
	printWindowTargets(os.Stdout, servers, results)
	printCalendarTargets(os.Stdout, servers, results)
	printLeaseTargets(os.Stdout, servers, results)
	printERLTargets(os.Stdout, servers, results, o.baseline)
	printGRPCTargets(os.Stdout, servers, results, o)
	printForwardAuth(os.Stdout, servers, results, o)
	return nil
}

func repoRoot() (string, error) {
	// The service's module, which this one (bench/) reaches by a replace
	// of ../: its directory is the repository's root.
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/limiter-dev/limiter").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func measure(s *server, script string, o options) (result, error) {
	if s.grpc {
		return measureGRPC(s, o)
	}
	if s.forwardAuth != nil {
		return measureForwardAuth(s, script, o)
	}
	var r result
	if o.duration == 0 { // open loop only
		if s.leases {
			return r, fmt.Errorf("the acquire+release rows need a closed loop (-duration above 0)")
		}
		var err error
		r.open, err = measureOpenLoop(s, o)
		return r, err
	}
	if _, _, err := wrk(s, script, o.warmup, o); err != nil {
		return r, err
	}
	before, err := cpuSeconds(s.proc.Process.Pid)
	if err != nil {
		return r, err
	}
	redisBefore, err := sampleRedis(s)
	if err != nil {
		return r, err
	}
	out, _, err := wrk(s, script, o.duration, o)
	if err != nil {
		return r, err
	}
	after, err := cpuSeconds(s.proc.Process.Pid)
	if err != nil {
		return r, err
	}
	redisAfter, err := sampleRedis(s)
	if err != nil {
		return r, err
	}
	requests, rps, p50, p99, errs, err := parseWrk(out)
	if err != nil {
		return r, err
	}
	r.rps, r.p50, r.p99, r.errors = rps, p50, p99, errs
	r.cpuPerReq = (after - before) / float64(requests) * 1e6
	r.redisCPU, r.redisScripts = redisAfter.since(redisBefore, float64(requests))
	if s.leases {
		return r, nil // an open loop of one request can acquire but not release
	}
	r.open, err = measureOpenLoop(s, o)
	return r, err
}

// measureOpenLoop runs s's open loop, and reads its Redis CPU around it.
func measureOpenLoop(s *server, o options) (openLoopResult, error) {
	before, err := sampleRedis(s)
	if err != nil {
		return openLoopResult{}, err
	}
	r, err := openLoop(s.url, s.call().post(), o.rate, o.openFor)
	if err != nil {
		return r, err
	}
	after, err := sampleRedis(s)
	if err != nil {
		return r, err
	}
	r.redisCPU, r.redisScripts = after.since(before, r.achieved*o.openFor.Seconds())
	return r, nil
}

func printTable(w io.Writer, servers []*server, results [][]result, o options) {
	fmt.Fprintf(w, "Closed loop: wrk -t%d -c%d -d%s, POST /v1/spend, 10,000 random ids. Open loop: %d req/s for %s.\n",
		o.threads, o.connections, o.duration, o.rate, o.openFor)
	fmt.Fprintf(w, "Medians of %d alternating rounds.\n\n", o.rounds)
	fmt.Fprintln(w, "| server | req/s | × bare | p50 ms | p99 ms | server CPU µs/req | Redis CPU µs/req | open p50 ms | open p99 ms | open p99 from send ms | sender late p99 ms | open req/s | errors |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	col := func(rs []result, f func(result) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	bare := col(results[0], func(r result) float64 { return r.rps })
	for i, s := range servers {
		if s.forwardAuth != nil {
			continue // in a table of their own, at their own open-loop rate
		}
		rs := results[i]
		var errs int64
		for _, r := range rs {
			errs += r.errors + r.open.failed
		}
		rps := col(rs, func(r result) float64 { return r.rps })
		ratio := "-" // no closed loop run (-duration 0)
		if bare > 0 {
			ratio = fmt.Sprintf("%.2f", rps/bare)
		}
		open := "- | - | - | - | -" // the gRPC and acquire+release rows have no open loop
		if !s.grpc && !s.leases {
			open = fmt.Sprintf("%.2f | %.2f | %.2f | %.2f | %.0f",
				col(rs, func(r result) float64 { return r.open.p50 }), col(rs, func(r result) float64 { return r.open.p99 }),
				col(rs, func(r result) float64 { return r.open.sentP99 }), col(rs, func(r result) float64 { return r.open.lateP99 }),
				col(rs, func(r result) float64 { return r.open.achieved }))
		}
		redisCol := "-"
		if len(s.redisPIDs) > 0 {
			redisCol = fmt.Sprintf("%.2f", col(rs, func(r result) float64 { return sum(r.redisCPU) }))
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %.2f | %.2f | %.1f | %s | %s | %d |\n", s.name, rps, ratio,
			col(rs, func(r result) float64 { return r.p50 }), col(rs, func(r result) float64 { return r.p99 }),
			col(rs, func(r result) float64 { return r.cpuPerReq }), redisCol, open, errs)
	}
}

// medianRPS is each server's median closed-loop req/s, by name.
func medianRPS(servers []*server, results [][]result) map[string]float64 {
	rps := map[string]float64{}
	for i, s := range servers {
		xs := make([]float64, len(results[i]))
		for j, r := range results[i] {
			xs[j] = r.rps
		}
		rps[s.name] = median(xs)
	}
	return rps
}

// printWindowTargets states the window rows as the ratios their targets
// are written in: the memory sliding window and the locally counted one
// (sync_rate 1) against bare, the one counted on Redis (sync_rate 0)
// against the GCRA limit on Redis of the same run.
func printWindowTargets(w io.Writer, servers []*server, results [][]result) {
	rps := medianRPS(servers, results)
	bare := rps[servers[0].name]
	ratio := func(row, ref string, target float64) {
		if rps[row] > 0 && rps[ref] > 0 {
			fmt.Fprintf(w, "- %s: %.2f × %s (target ≥ %.1f)\n", row, rps[row]/rps[ref], ref, target)
		}
	}
	if bare == 0 {
		return
	}
	fmt.Fprintln(w)
	ratio("limiter, memory, sliding window", servers[0].name, 0.8)
	ratio("limiter, redis, sliding window, sync_rate 0", "limiter, redis", 0.9)
	ratio("limiter, redis, sliding window, sync_rate 1", servers[0].name, 0.8)
}
