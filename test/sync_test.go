package test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiclient "github.com/limiter-dev/limiter/client"
	"github.com/limiter-dev/limiter/internal/redistest"
)

// syncBackend is a Redis the processes share, with the addresses of its
// nodes for looking at what it holds.
type syncBackend struct {
	name  string
	start func(t *testing.T) (url string, nodes []string)
}

var syncBackends = []syncBackend{
	{"Standalone", func(t *testing.T) (string, []string) {
		s := redistest.NewStandalone(t)
		return s.URL(), []string{s.Addr()}
	}},
	{"Cluster", func(t *testing.T) (string, []string) {
		c := redistest.NewCluster(t)
		return c.URL(), c.Addrs()
	}},
}

// syncDefaults declares a sliding window of count hits per hour with the
// given sync_rate (in seconds, as the defaults file spells it).
func syncDefaults(count int, syncRate string) string {
	return fmt.Sprintf(`
SyncTest:
  enum: 330
  id: string
  algorithm: sliding-window
  count: %d
  period: 1h
  sync_rate: %s
`, count, syncRate)
}

// startSyncProcs starts n processes on url with the defaults given, on
// the fake clock (so that the window never moves during a test; the sync
// loops run on real time, and a sync_rate of an hour keeps them still, so
// that the tests sync with POST /v1/admin/sync only).
func startSyncProcs(t *testing.T, n int, url, defaults string) []*limiterProc {
	t.Helper()
	dir := t.TempDir()
	env := map[string]string{
		"LIMITER_DEFAULTS":  writeFile(t, dir, "defaults.yaml", defaults),
		"LIMITER_OVERRIDES": writeFile(t, dir, "none.yaml", "[]\n"),
		"LIMITER_SOURCE":    url,
		"LIMITER_FAKECLOCK": fakeClockStart,
	}
	return startRedisShared(t, n, env, redisPatientArgs...)
}

// syncSpend is one hit of SyncTest's subscriber 42.
var syncSpend = apiclient.Transaction{Limit: "SyncTest", ID: "42"}

// hammer has clients concurrent clients per process spend txn each times
// and returns how many answers were allowed, per process.
func hammer(t *testing.T, procs []*limiterProc, clients, each int, txn apiclient.Transaction) []int64 {
	t.Helper()
	allowed := make([]atomic.Int64, len(procs))
	errs := make(chan string, clients*len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		for range clients {
			wg.Go(func() {
				for range each {
					a, err := p.api().Spend(context.Background(), txn)
					if err != nil {
						errs <- fmt.Sprintf("process %d spend: %v", i, err)
						return
					}
					if a.Allowed {
						allowed[i].Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	out := make([]int64, len(procs))
	for i := range allowed {
		out[i] = allowed[i].Load()
	}
	return out
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

// adminSync runs POST /v1/admin/sync on p and returns its status and
// answer.
func adminSync(t *testing.T, p *limiterProc) (int, apiclient.SyncResult) {
	t.Helper()
	res, err := p.api().Sync(context.Background())
	var e *apiclient.Error
	switch {
	case err == nil:
		return http.StatusOK, res
	case !errors.As(err, &e):
		t.Fatalf("sync: %v", err)
	case e.Code != "sync_failed":
		t.Fatalf("sync failed without the sync_failed error: %v", err)
	}
	return e.StatusCode, res
}

// syncAll runs a sync on every process, which must succeed.
func syncAll(t *testing.T, procs []*limiterProc) []apiclient.SyncResult {
	t.Helper()
	out := make([]apiclient.SyncResult, len(procs))
	for i, p := range procs {
		status, res := adminSync(t, p)
		if status != 200 {
			t.Fatalf("process %d: sync answered %d", i, status)
		}
		out[i] = res
	}
	return out
}

// remaining reads SyncTest/42 on p.
func remaining(t *testing.T, p *limiterProc) int64 {
	t.Helper()
	d, err := p.api().Subscriber(context.Background(), "SyncTest", "42")
	if err != nil {
		t.Fatalf("GET /v1/limits/SyncTest/42: %v", err)
	}
	return d.Remaining
}

// dbSize is how many keys the nodes hold together.
func dbSize(t *testing.T, nodes []string) int {
	t.Helper()
	n := 0
	for _, addr := range nodes {
		v, err := redistest.Do(addr, "DBSIZE")
		if err != nil {
			t.Fatalf("DBSIZE on %s: %v", addr, err)
		}
		var k int
		if _, err := fmt.Sscan(v, &k); err != nil {
			t.Fatalf("DBSIZE on %s = %q", addr, v)
		}
		n += k
	}
	return n
}

// sync_rate 0: every decision is made on Redis, so three processes with
// 48 concurrent clients each admit exactly count together.
func TestSyncRateZeroIsExact(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	for _, b := range syncBackends {
		t.Run(b.name, func(t *testing.T) {
			url, _ := b.start(t)
			procs := startSyncProcs(t, 3, url, syncDefaults(100, "0"))
			allowed := hammer(t, procs, 48, 2, syncSpend)
			if got := sum(allowed); got != 100 {
				t.Fatalf("allowed %d (per process %v) of %d, want exactly 100", got, allowed, 3*48*2)
			}
			// Nothing is held in the processes: a sync has nothing to do.
			for i, res := range syncAll(t, procs) {
				if res != (apiclient.SyncResult{}) {
					t.Fatalf("process %d synced %+v with sync_rate 0", i, res)
				}
			}
		})
	}
}

// sync_rate below 0: each process counts alone, in its own memory, and
// Redis never holds the limit.
func TestSyncRateNegativeCountsPerProcess(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	for _, b := range syncBackends {
		t.Run(b.name, func(t *testing.T) {
			url, nodes := b.start(t)
			procs := startSyncProcs(t, 3, url, syncDefaults(100, "-1"))
			allowed := hammer(t, procs, 16, 10, syncSpend)
			for i, a := range allowed {
				if a != 100 {
					t.Fatalf("process %d allowed %d of 160, want its own 100 (all: %v)", i, a, allowed)
				}
			}
			if n := dbSize(t, nodes); n != 0 {
				t.Fatalf("Redis holds %d keys for a local-only limit, want none", n)
			}
			for i, res := range syncAll(t, procs) {
				if res != (apiclient.SyncResult{}) {
					t.Fatalf("process %d synced %+v with sync_rate -1", i, res)
				}
			}
		})
	}
}

// sync_rate above 0: each process decides alone between syncs; after a
// sync on every process (twice: the first round's early processes read
// before the later ones pushed), every process reads the same total, the
// hits all of them admitted.
func TestSyncRatePositiveConverges(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	for _, b := range syncBackends {
		t.Run(b.name, func(t *testing.T) {
			url, _ := b.start(t)
			procs := startSyncProcs(t, 3, url, syncDefaults(1000, "3600"))
			allowed := hammer(t, procs, 48, 2, syncSpend)
			if got := sum(allowed); got != 3*48*2 {
				t.Fatalf("allowed %d of %d under a count of 1000", got, 3*48*2)
			}
			// Before a sync, each process sees its own hits only.
			for i, p := range procs {
				if got := remaining(t, p); got != 1000-allowed[i] {
					t.Fatalf("process %d before a sync: remaining %d, want %d", i, got, 1000-allowed[i])
				}
			}
			for i, res := range syncAll(t, procs) {
				if res != (apiclient.SyncResult{Pushed: 1, Fetched: 1}) {
					t.Fatalf("process %d's first sync: %+v, want 1 pushed, 1 fetched", i, res)
				}
			}
			for i, res := range syncAll(t, procs) {
				if res != (apiclient.SyncResult{Pushed: 0, Fetched: 1}) {
					t.Fatalf("process %d's second sync: %+v, want 0 pushed, 1 fetched", i, res)
				}
			}
			for i, p := range procs {
				if got := remaining(t, p); got != 1000-sum(allowed) {
					t.Fatalf("process %d after the syncs: remaining %d, want %d", i, got, 1000-sum(allowed))
				}
			}
		})
	}
}

// sync_rate above 0, count 100: between syncs three processes may admit
// up to 100 each (the documented bound, N × count per window); once
// synced, every one of them denies.
func TestSyncRatePositiveOvershootBound(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	url, _ := syncBackends[0].start(t)
	procs := startSyncProcs(t, 3, url, syncDefaults(100, "3600"))
	allowed := hammer(t, procs, 8, 20, syncSpend)
	for i, a := range allowed {
		if a != 100 {
			t.Fatalf("process %d allowed %d of 160 before any sync, want 100 (all: %v)", i, a, allowed)
		}
	}
	syncAll(t, procs)
	syncAll(t, procs)
	for i, p := range procs {
		if got := remaining(t, p); got != 0 {
			t.Fatalf("process %d after the syncs: remaining %d, want 0", i, got)
		}
		if a := hammer(t, []*limiterProc{p}, 1, 1, syncSpend); a[0] != 0 {
			t.Fatalf("process %d admitted a spend with 300 hits counted", i)
		}
	}
}

// A process stopped with SIGTERM pushes the hits it had not pushed before
// it exits: another process reads them from Redis.
func TestSyncRateShutdownPushes(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	for _, b := range syncBackends {
		t.Run(b.name, func(t *testing.T) {
			url, _ := b.start(t)
			procs := startSyncProcs(t, 2, url, syncDefaults(1000, "3600"))
			leaving, staying := procs[0], procs[1]
			if got := remaining(t, staying); got != 1000 {
				t.Fatalf("remaining %d before any spend", got)
			}
			allowed := hammer(t, []*limiterProc{leaving}, 5, 5, syncSpend)
			if allowed[0] != 25 {
				t.Fatalf("allowed %d of 25", allowed[0])
			}
			leaving.stop() // SIGTERM, and a clean exit
			if logs := leaving.logs(); !strings.Contains(logs, "pushing the hits not synced yet") || strings.Contains(logs, "hits not synced are lost") {
				t.Fatalf("the shutdown push is not logged as done:\n%s", logs)
			}
			if status, res := adminSync(t, staying); status != 200 || res.Fetched != 1 {
				t.Fatalf("sync: %d %+v", status, res)
			}
			if got := remaining(t, staying); got != 1000-25 {
				t.Fatalf("after the stopped process's push: remaining %d, want %d", got, 1000-25)
			}
		})
	}
}

// Redis failing during a cycle loses nothing: the sync answers 503, the
// hits stay in the process (which goes on deciding locally), and the next
// sync once Redis is back pushes them. Killed, Redis comes back empty and
// the push was certainly not applied, so the total is exact; frozen
// (SIGSTOP), the timed-out push may be applied once Redis runs again and
// then pushed again: hits may count twice, never zero times.
func TestSyncRateSurvivesRedisFailure(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	const count = 100_000
	for _, phase := range []struct {
		name      string
		fail, fix func(*redistest.Server, testing.TB)
		exactly   bool
	}{
		{"killed", (*redistest.Server).Stop, (*redistest.Server).Start, true},
		{"frozen", (*redistest.Server).Pause, (*redistest.Server).Resume, false},
	} {
		t.Run(phase.name, func(t *testing.T) {
			srv := redistest.NewStandalone(t)
			procs := startSyncProcs(t, 3, srv.URL(), syncDefaults(count, "3600"))
			for _, p := range procs {
				remaining(t, p) // every process holds the counter, to read it back later
			}
			before := sum(hammer(t, procs, 4, 5, syncSpend))
			phase.fail(srv, t)
			if status, _ := adminSync(t, procs[0]); status != 503 {
				t.Fatalf("sync with Redis %s: %d, want 503", phase.name, status)
			}
			// Decisions go on locally meanwhile, counting the kept hits.
			during := sum(hammer(t, procs[:1], 2, 5, syncSpend))
			if during != 10 {
				t.Fatalf("allowed %d of 10 while Redis was %s", during, phase.name)
			}
			phase.fix(srv, t)
			// The first calls after a restart may meet the connections it
			// broke; each failure keeps its hits.
			for i, p := range procs {
				if !redisPoll(5*time.Second, func() bool { status, _ := adminSync(t, p); return status == 200 }) {
					t.Fatalf("process %d: no successful sync within 5s of Redis coming back:\n%s", i, p.logs())
				}
			}
			syncAll(t, procs)
			admitted := before + during
			totals := make([]int64, len(procs))
			for i, p := range procs {
				totals[i] = count - remaining(t, p)
			}
			for i, total := range totals {
				if total != totals[0] {
					t.Fatalf("processes read different totals: %v", totals)
				}
				if phase.exactly && total != admitted {
					t.Fatalf("process %d reads %d hits, want exactly the %d admitted", i, total, admitted)
				}
				if total < admitted || total > 2*admitted {
					t.Fatalf("process %d reads %d hits, want from %d (none lost) to %d", i, total, admitted, 2*admitted)
				}
			}
			t.Logf("Redis %s during a sync: %d hits admitted, %d counted", phase.name, admitted, totals[0])
		})
	}
}

// mixedDefaults declares a local-only window (Local, 1 an hour) and two
// limits on the source: Plain, GCRA 5 a minute, and Locked, GCRA 2 a
// minute whose denials box the id for 30s.
const mixedDefaults = `
Local:
  enum: 331
  id: string
  algorithm: sliding-window
  count: 1
  period: 1h
  sync_rate: -1
Plain:
  enum: 332
  id: string
  burst: 5
  count: 5
  period: 1m
Locked:
  enum: 333
  id: string
  burst: 2
  count: 2
  period: 1m
  penalty: 30s
`

// A batch whose local part (sync_rate -1) denies it answers its part on
// Redis as one source answers a denied batch: each transaction with its
// own figures, none of its buckets written, and an id that its own denial
// boxes boxed on Redis, where another process sees it.
func TestMixedBatchLocalDenialOverHTTP(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	for _, b := range syncBackends {
		t.Run(b.name, func(t *testing.T) {
			url, _ := b.start(t)
			procs := startSyncProcs(t, 2, url, mixedDefaults)
			api := procs[0].api()
			ctx := context.Background()
			txn := func(limit string, cost int64) apiclient.Transaction {
				return apiclient.Transaction{Limit: limit, ID: "7"}.WithCost(cost)
			}
			for _, first := range []apiclient.Transaction{txn("Local", 1), txn("Locked", 2)} {
				if d, err := api.Spend(ctx, first); err != nil || !d.Allowed {
					t.Fatalf("spend %+v: %+v, %v", first, d, err)
				}
			}
			d, err := api.SpendBatch(ctx, []apiclient.Transaction{txn("Local", 1), txn("Plain", 2), txn("Locked", 1)})
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed || len(d.Decisions) != 3 {
				t.Fatalf("the batch: %+v, want denied", d)
			}
			if p := d.Decisions[1]; !p.Allowed || p.Remaining != 3 || p.ResetIn != 24*time.Second {
				t.Fatalf("Plain in the denied batch: %+v, want allowed, 3 left as if written, full in 24s", p)
			}
			if l := d.Decisions[2]; l.Allowed || !l.Penalized || l.RetryIn != 30*time.Second {
				t.Fatalf("Locked in the denied batch: %+v, want denied and boxed for 30s", l)
			}
			if got := bucket(t, procs[0], "Plain", "7"); got.Remaining != 5 {
				t.Fatalf("Plain after the denied batch: %d left, want 5 (nothing written)", got.Remaining)
			}
			for i, p := range procs {
				if has, in := boxHas(t, p, "Locked", "7"); !has || in != 30*time.Second {
					t.Fatalf("process %d: Locked/7 in the box %v for %v, want boxed for 30s", i, has, in)
				}
			}
		})
	}
}

// refundDefaults declares a fixed window and a rate counter synced every
// 1000 s: the tests sync with POST /v1/admin/sync only.
const refundDefaults = `
SyncFix: {enum: 301, id: string, algorithm: fixed-window, count: 5, period: 1m, sync_rate: 1000}
SyncRC: {enum: 302, id: ip, algorithm: rate-counter, window: 10s, rate: 10, penalty: 1m, sync_rate: 1000}
`

// A refund of hits a sync has pushed gives them back on Redis, and in the
// process at once: the refunding process answers it, and another process
// reads it at its next sync.
func TestSyncRateRefundAfterSync(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	for _, b := range syncBackends {
		t.Run(b.name, func(t *testing.T) {
			url, _ := b.start(t)
			procs := startSyncProcs(t, 2, url, refundDefaults)
			ctx := context.Background()
			fix := apiclient.Transaction{Limit: "SyncFix", ID: "r"}
			rc := apiclient.Transaction{Limit: "SyncRC", ID: "198.51.100.7"}
			for _, txn := range []apiclient.Transaction{fix, rc} {
				bucket(t, procs[1], txn.Limit, txn.ID) // held there, so that its syncs read it
			}
			for _, c := range []struct {
				txn        apiclient.Transaction
				cost, left int64
			}{{fix, 3, 2}, {rc, 5, 95}} {
				if d, err := procs[0].api().Spend(ctx, c.txn.WithCost(c.cost)); err != nil || !d.Allowed || d.Remaining != c.left {
					t.Fatalf("spend of %d on %s: %+v, %v; want allowed with %d left", c.cost, c.txn.Limit, d, err, c.left)
				}
			}
			syncAll(t, procs[:1])
			for _, c := range []struct {
				txn        apiclient.Transaction
				cost, left int64
			}{{fix, 2, 4}, {rc, 5, 100}} {
				if d, err := procs[0].api().Refund(ctx, c.txn.WithCost(c.cost)); err != nil || !d.Allowed || d.Remaining != c.left {
					t.Fatalf("refund of %d on %s after a sync: %+v, %v; want allowed with %d left", c.cost, c.txn.Limit, d, err, c.left)
				}
			}
			syncAll(t, procs)
			for i, p := range procs {
				for txn, want := range map[apiclient.Transaction]int64{fix: 4, rc: 100} {
					if got := bucket(t, p, txn.Limit, txn.ID).Remaining; got != want {
						t.Fatalf("process %d after the syncs: %s has %d left, want %d", i, txn.Limit, got, want)
					}
				}
			}
		})
	}
}

// A reload that changes a window limit's sync_rate keeps what the process
// counted: above 0 to another value above 0, and to 0, where the source
// decides, the 8 hits of 10 counted before still count.
func TestSyncRateChangedByAReload(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	s := redistest.NewStandalone(t)
	dir := t.TempDir()
	defaults := writeFile(t, dir, "defaults.yaml", syncDefaults(10, "3600"))
	env := map[string]string{
		"LIMITER_DEFAULTS":  defaults,
		"LIMITER_OVERRIDES": writeFile(t, dir, "none.yaml", "[]\n"),
		"LIMITER_SOURCE":    s.URL(),
		"LIMITER_FAKECLOCK": fakeClockStart,
	}
	p := startRedisShared(t, 1, env, redisPatientArgs...)[0]
	ctx := context.Background()
	if a, err := p.api().Spend(ctx, syncSpend.WithCost(8)); err != nil || !a.Allowed {
		t.Fatalf("8 of 10: %+v, %v", a, err)
	}
	for _, rate := range []string{"1800", "0"} {
		writeFile(t, dir, "defaults.yaml", syncDefaults(10, rate))
		if err := p.api().Reload(ctx); err != nil {
			t.Fatalf("reload to sync_rate %s: %v", rate, err)
		}
		a, err := p.api().Check(ctx, syncSpend.WithCost(0))
		if err != nil || a.Remaining != 2 {
			t.Fatalf("after the reload to sync_rate %s: %+v, %v; want 2 remaining", rate, a, err)
		}
	}
	if a, err := p.api().Spend(ctx, syncSpend.WithCost(3)); err != nil || a.Allowed {
		t.Fatalf("3 more of 10 after 8, decided on the source: %+v, %v; want denied", a, err)
	}
}
