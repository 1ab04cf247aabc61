package test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiclient "github.com/limiter-dev/limiter/client"
	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/internal/vectors"
	"github.com/limiter-dev/limiter/source/redis"
)

// redisBackend is a Redis the binary is pointed at with --source.
type redisBackend struct {
	name  string
	start func(t *testing.T) (url string, flush func())
}

var redisBackends = []redisBackend{
	{"Standalone", func(t *testing.T) (string, func()) {
		s := redistest.NewStandalone(t)
		return s.URL(), func() { s.Flush(t) }
	}},
	{"Cluster", func(t *testing.T) (string, func()) {
		c := redistest.NewCluster(t)
		return c.URL(), func() { c.Flush(t) }
	}},
}

// redisPatientArgs give a limiter generous timeouts, for tests of what is
// decided rather than how fast: under the race detector, with many
// processes on two cores, a first cluster call (topology, dials) can take
// longer than the default 100 ms. The fault test keeps the defaults.
var redisPatientArgs = []string{"--source-timeout=2s", "--redis-dial-timeout=1s", "--redis-read-timeout=1s", "--redis-write-timeout=1s"}

// startRedisShared starts n limiter processes with the same env and args.
func startRedisShared(t *testing.T, n int, env map[string]string, args ...string) []*limiterProc {
	t.Helper()
	procs := make([]*limiterProc, n)
	for i := range procs {
		procs[i] = startLimiter(t, procOptions{Env: env, Args: args})
	}
	return procs
}

// Every public vector through HTTP, with the fake clock driving decisions
// made in Redis, through three processes sharing one Redis (or cluster):
// the steps go round-robin, so each bucket is decided by all three.
// Both key formats: one key per bucket, and buckets as fields of 64
// hashes (--redis-groups), where the vectors' buckets share hashes; and a
// fleet halfway through turning on --redis-binary-tats, where the second
// process writes TATs as text and the others in binary.
func TestRedisVectorsOverHTTP(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	runRedisVectorsOverHTTP(t, vectorsConfig)
}

// The window vectors the same way: sliding and fixed windows counted in
// Redis (sync_rate 0), alone and in batches with GCRA buckets, decided
// round-robin by three processes.
func TestRedisWindowVectorsOverHTTP(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	runRedisVectorsOverHTTP(t, windowVectorsConfig)
}

func runRedisVectorsOverHTTP(t *testing.T, config func(*testing.T) (*vectors.File, map[string]string)) {
	for _, b := range redisBackends {
		t.Run(b.name, func(t *testing.T) {
			url, _ := b.start(t)
			formats := []struct {
				name, groups string
				binary       []string // per process, when they differ
			}{{"v1", "0", nil}, {"v2", "64", nil}, {"v1-binary-rollout", "0", []string{"true", "false", "true"}}}
			for _, format := range formats {
				t.Run(format.name, func(t *testing.T) {
					f, env := config(t)
					env["LIMITER_SOURCE"] = url
					env["LIMITER_REDIS_GROUPS"] = format.groups
					env["LIMITER_REDIS_NAMESPACE"] = format.name + ":" // each format's buckets apart
					var procs []*limiterProc
					if format.binary == nil {
						procs = startRedisShared(t, 3, env, redisPatientArgs...)
					}
					for _, binary := range format.binary {
						e := maps.Clone(env)
						e["LIMITER_REDIS_BINARY_TATS"] = binary
						procs = append(procs, startLimiter(t, procOptions{Env: e, Args: redisPatientArgs}))
					}
					if scheme, _, _ := strings.Cut(url, "://"); !strings.Contains(procs[0].logs(), "source="+scheme) {
						t.Fatalf("not serving from %s:\n%s", url, procs[0].logs())
					}
					runVectorsOverHTTP(t, f, procs...)
				})
			}
		})
	}
}

// With --redis-groups the buckets are fields of hashes: three processes
// sharing one Redis that way still allow exactly 100 of 192 concurrent
// spends, and Redis holds the bucket as a field of its group's hash, not
// as a key of its own.
func TestRedisGroupsOverHTTP(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	srv := redistest.NewStandalone(t)
	dir := t.TempDir()
	env := map[string]string{
		"LIMITER_DEFAULTS":  writeFile(t, dir, "defaults.yaml", redisOvershootDefaults),
		"LIMITER_OVERRIDES": writeFile(t, dir, "none.yaml", "[]\n"),
		"LIMITER_SOURCE":    srv.URL(),
		"LIMITER_FAKECLOCK": fakeClockStart,
	}
	procs := startRedisShared(t, 3, env, append([]string{"--redis-groups=16"}, redisPatientArgs...)...)
	if !strings.Contains(procs[0].logs(), "redis_groups=16") {
		t.Fatalf("the start-up line does not name the key format:\n%s", procs[0].logs())
	}
	redisOvershoot(t, procs, []apiclient.Transaction{{Limit: "OvershootTest", ID: "42"}})

	layout, err := redis.New(redis.Options{Addrs: []string{srv.Addr()}, Groups: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer layout.Close()
	key, field := layout.Key("301:42"), layout.Field("301:42")
	if typ, err := redistest.Do(srv.Addr(), "TYPE", key); err != nil || typ != "hash" {
		t.Fatalf("TYPE %s = %q (%v), want hash", key, typ, err)
	}
	if tat, err := redistest.Do(srv.Addr(), "HGET", key, field); err != nil || len(tat) != 19 {
		t.Fatalf("HGET %s %s = %q (%v), want a TAT", key, field, tat, err)
	}
	if n, err := redistest.Do(srv.Addr(), "DBSIZE"); err != nil || n != "1" {
		t.Fatalf("DBSIZE = %q (%v), want 1: the hash alone", n, err)
	}
}

// redisOvershootDefaults declares a limit of burst 100 refilling over an
// hour.
const redisOvershootDefaults = `
OvershootTest:
  enum: 301
  id: string
  burst: 100
  count: 100
  period: 1h
`

// redisIDsInSlots returns n ids of OvershootTest whose buckets fall into
// n different cluster hash slots, so a batch of them is applied per slot.
func redisIDsInSlots(n int) []string {
	var ids []string
	seen := map[int]bool{}
	for i := 0; len(ids) < n; i++ {
		id := fmt.Sprintf("id%d", i)
		if s := redis.Slot("301:" + id); !seen[s] {
			seen[s] = true
			ids = append(ids, id)
		}
	}
	return ids
}

// Three processes sharing one Redis (or the cluster), 48 concurrent
// clients spending cost 1: exactly 100 spends are allowed, on one bucket,
// and on a batch of three buckets in three hash slots.
func TestRedisNoOvershootOverHTTP(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	for _, b := range redisBackends {
		t.Run(b.name, func(t *testing.T) {
			url, flush := b.start(t)
			dir := t.TempDir()
			env := map[string]string{
				"LIMITER_DEFAULTS":  writeFile(t, dir, "defaults.yaml", redisOvershootDefaults),
				"LIMITER_OVERRIDES": writeFile(t, dir, "none.yaml", "[]\n"),
				"LIMITER_SOURCE":    url,
				"LIMITER_FAKECLOCK": fakeClockStart, // no refill during the test
			}
			procs := startRedisShared(t, 3, env, redisPatientArgs...)
			t.Run("OneBucket", func(t *testing.T) {
				flush()
				redisOvershoot(t, procs, []apiclient.Transaction{{Limit: "OvershootTest", ID: "42"}})
			})
			t.Run("BatchAcrossSlots", func(t *testing.T) {
				flush()
				var txns []apiclient.Transaction
				for _, id := range redisIDsInSlots(3) {
					txns = append(txns, apiclient.Transaction{Limit: "OvershootTest", ID: id})
				}
				redisOvershoot(t, procs, txns)
			})
		})
	}
}

// redisOvershoot has 48 clients spend txns (as one transaction, or a
// batch) 4 times each, spread over procs, and demands exactly 100
// allowed answers.
func redisOvershoot(t *testing.T, procs []*limiterProc, txns []apiclient.Transaction) {
	t.Helper()
	const clients, each = 48, 4
	var allowed, denied atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan string, clients)
	for c := range clients {
		wg.Go(func() {
			p := procs[c%len(procs)]
			for range each {
				a, err := spendTxns(p, txns)
				if err != nil {
					errs <- fmt.Sprintf("spend: %v", err)
					return
				}
				if a.Allowed {
					allowed.Add(1)
				} else {
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if allowed.Load() != 100 || denied.Load() != clients*each-100 {
		t.Fatalf("allowed %d, denied %d; want exactly 100 and %d", allowed.Load(), denied.Load(), clients*each-100)
	}
}

// spendTxns spends txns on p through the Go client, once: one
// transaction in the single form, several as a batch. Unlike the harness's
// helpers it never fails the test, so load goroutines can use it.
func spendTxns(p *limiterProc, txns []apiclient.Transaction) (*apiclient.Decision, error) {
	if len(txns) == 1 {
		return p.api().Spend(context.Background(), txns[0])
	}
	return p.api().SpendBatch(context.Background(), txns)
}

// redisSample is one request of the fault test's load.
type redisSample struct {
	proc     int
	start    time.Time
	took     time.Duration
	status   int
	degraded bool
	code     string
	err      error
}

// redisLoad keeps a few clients spending on each process until stop is
// closed, and returns a function that waits for them and returns what
// they saw.
func redisLoad(procs []*limiterProc, stop <-chan struct{}) func() []redisSample {
	var mu sync.Mutex
	var samples []redisSample
	var wg sync.WaitGroup
	for i, p := range procs {
		for c := range 3 {
			wg.Go(func() {
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					a, err := p.api().Spend(context.Background(), apiclient.Transaction{Limit: "FaultTest", ID: fmt.Sprintf("c%d-%d", c, n%50)})
					s := redisSample{proc: i, start: start, took: time.Since(start)}
					var e *apiclient.Error
					switch {
					case err == nil:
						s.status, s.degraded = http.StatusOK, a.Degraded
					case errors.As(err, &e):
						s.status, s.code = e.StatusCode, e.Code
					default:
						s.err = err
					}
					mu.Lock()
					samples = append(samples, s)
					mu.Unlock()
					time.Sleep(2 * time.Millisecond)
				}
			})
		}
	}
	return func() []redisSample {
		wg.Wait()
		return samples
	}
}

// redisPoll polls cond every 20 ms until it holds or limit passes.
func redisPoll(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Redis hanging, then stopped, under load: answers come within
// --source-timeout + 150 ms (the time is the client's, on a 2-core machine
// that runs other tests' processes beside these), as 503
// source_unavailable or source_outcome_unknown (or, with --fail-open,
// allowed and degraded); /readyz says 503; nothing crashes.
// Redis back on the same port: answers are right again within 2 s,
// without restarting the service.
func TestRedisFaultsOverHTTP(t *testing.T) {
	const sourceTimeout, grace = 100 * time.Millisecond, 150 * time.Millisecond
	srv := redistest.NewStandalone(t)
	dir := t.TempDir()
	env := map[string]string{
		"LIMITER_DEFAULTS":  writeFile(t, dir, "defaults.yaml", "FaultTest:\n  enum: 310\n  id: string\n  burst: 1000000\n  count: 1000000\n  period: 1h\n"),
		"LIMITER_OVERRIDES": writeFile(t, dir, "none.yaml", "[]\n"),
		"LIMITER_SOURCE":    srv.URL(),
	}
	closed := startLimiter(t, procOptions{Env: env})
	open := startLimiter(t, procOptions{Env: env, Args: []string{"--fail-open"}})
	procs := []*limiterProc{closed, open}

	healthy := func(p *limiterProc, id string) bool {
		a, err := p.api().Spend(context.Background(), apiclient.Transaction{Limit: "FaultTest", ID: id})
		return err == nil && a.Allowed && !a.Degraded && len(a.Decisions) == 1 && a.Decisions[0].Remaining == 999_999
	}
	ready := func(p *limiterProc) int {
		resp, err := client.Get(p.URL + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	for _, phase := range []struct {
		name      string
		fail, fix func(testing.TB)
	}{
		{"hanging", srv.Pause, srv.Resume},
		{"stopped", srv.Stop, srv.Start},
	} {
		t.Run(phase.name, func(t *testing.T) {
			stop := make(chan struct{})
			collect := redisLoad(procs, stop)
			time.Sleep(100 * time.Millisecond) // load running against a healthy Redis
			failed := time.Now()
			phase.fail(t)
			time.Sleep(400 * time.Millisecond) // load running against a failed Redis
			for i, p := range procs {
				if s := ready(p); s != 503 {
					t.Errorf("process %d /readyz with Redis %s: %d, want 503", i, phase.name, s)
				}
			}
			fixed := time.Now()
			phase.fix(t)
			for i, p := range procs {
				n := 0
				if !redisPoll(2*time.Second-time.Since(fixed), func() bool {
					n++
					return healthy(p, fmt.Sprintf("fresh-%s-%d-%d", phase.name, i, n))
				}) {
					t.Errorf("process %d not answering correctly within 2s of Redis coming back:\n%s", i, p.logs())
				}
			}
			close(stop)
			samples := collect()
			var during, unavailable, degraded int
			for _, s := range samples {
				if s.start.Before(failed) || s.start.After(fixed) {
					continue
				}
				during++
				if s.took > sourceTimeout+grace {
					t.Errorf("process %d answered after %v with Redis %s, want at most %v", s.proc, s.took, phase.name, sourceTimeout+grace)
				}
				failedClosed := s.code == "source_unavailable" || s.code == "source_outcome_unknown"
				if failedClosed {
					unavailable++
				}
				if s.degraded {
					degraded++
				}
				switch {
				case s.err != nil:
					t.Errorf("process %d: %v", s.proc, s.err)
				case s.proc == 0 && s.status != 200 && (s.status != 503 || !failedClosed):
					t.Errorf("fail-closed answer %d %q, want 503 source_unavailable or source_outcome_unknown", s.status, s.code)
				case s.proc == 1 && s.status != 200:
					t.Errorf("fail-open answer %d, want 200", s.status)
				}
			}
			if during < 20 || unavailable == 0 || degraded == 0 {
				t.Errorf("%d requests while Redis was %s (%d unavailable, %d degraded): the load did not exercise the failure", during, phase.name, unavailable, degraded)
			}
			for i, p := range procs {
				select {
				case <-p.exited:
					t.Fatalf("process %d exited while Redis was %s:\n%s", i, phase.name, p.logs())
				default:
				}
				if s := ready(p); s != 200 {
					t.Errorf("process %d /readyz after Redis came back: %d", i, s)
				}
			}
			t.Logf("Redis %s: %d requests during the failure: %d unavailable, %d degraded", phase.name, during, unavailable, degraded)
		})
	}
}

// The binary on a TLS-only Redis whose certificate comes from a CA of its
// own: with --redis-tls-ca naming that CA, spends are decided in Redis and
// /readyz is 200; without, the binary trusts the system's roots, so every
// call fails verification: a spend answers 503 and /readyz 503.
func TestRedisTLSOverHTTP(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	srv := redistest.NewStandaloneTLS(t)
	spend := apiclient.Transaction{Limit: "NewOrdersPerAccount", ID: "42"}
	t.Run("WithCA", func(t *testing.T) {
		p := startLimiter(t, procOptions{Args: append([]string{"--source", srv.URL(), "--redis-tls-ca", srv.CAFile()}, redisPatientArgs...)})
		if !strings.Contains(p.logs(), "source=rediss ") {
			t.Fatalf("not serving from rediss:\n%s", p.logs())
		}
		a, err := p.api().Spend(context.Background(), spend)
		if err != nil || !a.Allowed || len(a.Decisions) != 1 || a.Decisions[0].Remaining != a.Decisions[0].Burst-1 {
			t.Fatalf("spend over TLS: %+v %v", a, err)
		}
		if r := p.do("GET", "/readyz", ""); r.Status != 200 {
			t.Fatalf("/readyz over TLS: %d %s", r.Status, r.Body)
		}
	})
	t.Run("WithoutCA", func(t *testing.T) {
		p := startLimiter(t, procOptions{Args: append([]string{"--source", srv.URL()}, redisPatientArgs...)})
		var e *apiclient.Error
		if _, err := p.api().Spend(context.Background(), spend); !errors.As(err, &e) || e.StatusCode != 503 || e.Code != "source_unavailable" {
			t.Fatalf("spend with an untrusted certificate: %v, want 503 source_unavailable", err)
		}
		if r := p.do("GET", "/readyz", ""); r.Status != 503 {
			t.Fatalf("/readyz with an untrusted certificate: %d %s, want 503", r.Status, r.Body)
		}
		if !strings.Contains(p.logs(), "certificate signed by unknown authority") {
			t.Fatalf("the failure is not logged as a certificate error:\n%s", p.logs())
		}
	})
}

// skewedWindowsDefaults are a fixed and a sliding window of 3 hits per
// 10 s for TestRedisSkewedClocksOverHTTP.
const skewedWindowsDefaults = `
FixedThree:
  enum: 901
  id: string
  algorithm: fixed-window
  count: 3
  period: 10s
SlidingThree:
  enum: 902
  id: string
  algorithm: sliding-window
  count: 3
  period: 10s
`

// Two processes share a Redis with clocks 2 ms apart across a window
// boundary: the one behind reads the hits the one ahead counted in its
// window, from the counter the one ahead has already moved to the next
// window, and together they never admit more than the limit.
func TestRedisSkewedClocksOverHTTP(t *testing.T) {
	t.Parallel() // its own limiters and redis-server
	for _, b := range redisBackends {
		t.Run(b.name, func(t *testing.T) {
			url, _ := b.start(t)
			dir := t.TempDir()
			env := map[string]string{
				"LIMITER_DEFAULTS":  writeFile(t, dir, "defaults.yaml", skewedWindowsDefaults),
				"LIMITER_OVERRIDES": writeFile(t, dir, "none.yaml", "[]\n"),
				"LIMITER_SOURCE":    url,
				"LIMITER_FAKECLOCK": fakeClockStart,
			}
			procs := startRedisShared(t, 2, env, redisPatientArgs...)
			ahead, behind := procs[0], procs[1]
			spendOne := func(p *limiterProc, limit string, cost int64) *apiclient.Decision {
				t.Helper()
				d, err := p.api().Spend(context.Background(), apiclient.Transaction{Limit: limit, ID: "k"}.WithCost(cost))
				if err != nil {
					t.Fatalf("spend %s: %v", limit, err)
				}
				return d
			}
			for _, step := range []error{ahead.advance(9 * time.Second), behind.advance(10*time.Second - 2*time.Millisecond)} {
				if step != nil {
					t.Fatal(step)
				}
			}
			if d := spendOne(ahead, "FixedThree", 3); !d.Allowed {
				t.Fatalf("the first 3: %+v", d)
			}
			if d := spendOne(ahead, "SlidingThree", 2); !d.Allowed {
				t.Fatalf("the first 2: %+v", d)
			}
			if err := ahead.advance(1001 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if d := spendOne(ahead, "FixedThree", 1); !d.Allowed || d.Remaining != 2 {
				t.Fatalf("the next window, ahead: %+v", d)
			}
			if d := spendOne(ahead, "SlidingThree", 1); !d.Allowed || d.Remaining != 0 {
				t.Fatalf("the next window, ahead, the 2 weighing 9,999/10,000: %+v", d)
			}
			for i := range 3 {
				if d := spendOne(behind, "FixedThree", 1); d.Allowed {
					t.Fatalf("spend %d behind a full fixed window: %+v", i, d)
				}
			}
			if d := spendOne(behind, "SlidingThree", 1); !d.Allowed || d.Remaining != 0 {
				t.Fatalf("the third hit behind: %+v", d)
			}
			if d := spendOne(behind, "SlidingThree", 1); d.Allowed {
				t.Fatalf("a fourth hit behind: %+v", d)
			}
		})
	}
}
