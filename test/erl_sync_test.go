package test

import (
	"context"
	"testing"
	"time"

	apiclient "github.com/limiter-dev/limiter/client"
)

// erlSyncDefaults declares a rate counter synced through the shared
// source (sync_rate of an hour, 3600: the tests sync with POST /v1/admin/sync
// only) and one counted in each process alone.
const erlSyncDefaults = `
SyncedHits:
  enum: 331
  id: ip
  algorithm: rate-counter
  window: 60s
  rate: 10
  penalty: 5m
  sync_rate: 3600
LocalHits:
  enum: 332
  id: ip
  algorithm: rate-counter
  window: 60s
  rate: 10
  penalty: 5m
  sync_rate: -1
`

// Rate counters with sync_rate through two processes on one Redis and on a
// cluster: above 0, each counts alone until it syncs, then reads back what
// both counted, and an entry boxed in one process reaches the other at
// their syncs, and a third process that never saw the id or the limit at
// its own; below 0, nothing is shared.
func TestSyncRateRateCountersOverHTTP(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	for _, b := range syncBackends {
		t.Run(b.name, func(t *testing.T) {
			url, _ := b.start(t)
			procs := startSyncProcs(t, 3, url, erlSyncDefaults)
			counting := procs[:2]
			checkRate := func(p *limiterProc, counter string, delta int64) apiclient.RateResult {
				t.Helper()
				a, err := p.api().CheckRate(context.Background(), "198.51.100.9",
					apiclient.RateCheck{RateCounter: counter, Delta: delta, Window: 60, Limit: 10}, counter, 5*time.Minute)
				if err != nil {
					t.Fatalf("check_rate: %v", err)
				}
				return a
			}
			bucket60 := func(p *limiterProc, counter string) int64 {
				t.Helper()
				return rateCounter(t, p, counter, "198.51.100.9").Buckets[5]
			}
			syncAll := func() {
				t.Helper()
				// Both push, then the first reads back the second's push.
				for _, p := range []*limiterProc{procs[0], procs[1], procs[0]} {
					if status, _ := adminSync(t, p); status != 200 {
						t.Fatalf("sync answered %d", status)
					}
				}
			}

			// 300 hits in each process: neither alone goes above 600 a minute.
			for _, p := range counting {
				if a := checkRate(p, "SyncedHits", 300); a.Penalized {
					t.Fatalf("300 hits in one process: %+v, want not penalized", a)
				}
				checkRate(p, "LocalHits", 300)
			}
			if n := bucket60(procs[0], "SyncedHits"); n != 300 {
				t.Fatalf("before a sync, process 0 counts %d, want its own 300", n)
			}
			syncAll()
			for i, p := range counting {
				if n := bucket60(p, "SyncedHits"); n != 600 {
					t.Errorf("after syncing, process %d counts %d, want both processes' 600", i, n)
				}
				if n := bucket60(p, "LocalHits"); n != 300 {
					t.Errorf("sync_rate -1: process %d counts %d, want its own 300 only", i, n)
				}
			}
			// The 601st hit, in process 1, boxes the entry there; process 0
			// learns it at the syncs.
			if a := checkRate(procs[1], "SyncedHits", 1); !a.Penalized || a.PenaltyExpiresIn == 0 {
				t.Fatalf("the 601st hit: %+v, want penalized", a)
			}
			if has, in := boxHas(t, procs[0], "SyncedHits", "198.51.100.9"); has {
				t.Fatalf("process 0 before a sync: boxed for %v, want not boxed yet", in)
			}
			syncAll()
			if has, _ := boxHas(t, procs[0], "SyncedHits", "198.51.100.9"); !has {
				t.Fatalf("process 0 after the syncs: not boxed, want boxed")
			}
			if a := checkRate(procs[0], "SyncedHits", 0); !a.Penalized {
				t.Fatalf("check_rate in process 0 after the syncs: %+v, want penalized", a)
			}
			if status, _ := adminSync(t, procs[2]); status != 200 {
				t.Fatalf("process 2's sync answered %d", status)
			}
			if has, _ := boxHas(t, procs[2], "SyncedHits", "198.51.100.9"); !has {
				t.Fatalf("process 2, which never saw the id, after its sync: not boxed, want boxed")
			}
		})
	}
}
