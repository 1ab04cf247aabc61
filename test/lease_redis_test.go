package test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	apiclient "github.com/limiter-dev/limiter/client"
)

// redisLeaseDefaults declares a concurrency limit of 3 slots whose leases
// live a minute.
const redisLeaseDefaults = `
ExportsInFlight:
  enum: 302
  id: string
  algorithm: concurrency
  count: 3
  period: 1m
`

// Three processes sharing one Redis (or the cluster), in both key
// formats: 24 clients acquire slots of a limit of 3 and release each
// lease they get, renewing it first. The leases held never exceed 3, every
// renewal and release finds its lease, and at the end all 3 slots are
// free again.
func TestRedisLeasesOverHTTP(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	for _, b := range redisBackends {
		t.Run(b.name, func(t *testing.T) {
			url, _ := b.start(t)
			dir := t.TempDir()
			for _, format := range []struct{ name, groups string }{{"v1", "0"}, {"v2", "64"}} {
				t.Run(format.name, func(t *testing.T) {
					env := map[string]string{
						"LIMITER_DEFAULTS":        writeFile(t, dir, "defaults.yaml", redisLeaseDefaults),
						"LIMITER_OVERRIDES":       writeFile(t, dir, "none.yaml", "[]\n"),
						"LIMITER_SOURCE":          url,
						"LIMITER_FAKECLOCK":       fakeClockStart, // no lease expires during the test
						"LIMITER_REDIS_GROUPS":    format.groups,
						"LIMITER_REDIS_NAMESPACE": format.name + ":",
					}
					procs := startRedisShared(t, 3, env, redisPatientArgs...)
					if scheme, _, _ := strings.Cut(url, "://"); !strings.Contains(procs[0].logs(), "source="+scheme) {
						t.Fatalf("not serving from %s:\n%s", url, procs[0].logs())
					}
					redisLeases(t, procs)
				})
			}
		})
	}
}

// redisLeases has 24 clients acquire, renew and release 4 times each,
// spread over procs, and checks that no more than 3 leases are ever held.
func redisLeases(t *testing.T, procs []*limiterProc) {
	t.Helper()
	const clients, each, count = 24, 4, 3
	txn := apiclient.Transaction{Limit: "ExportsInFlight", ID: "acme"}
	var held, peak, acquired atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			api := procs[c%len(procs)].api()
			ctx := context.Background()
			for range each {
				l, d, err := api.Acquire(ctx, txn)
				if err != nil {
					errs <- err
					return
				}
				if l.Lease == "" {
					if d.Allowed {
						errs <- fmt.Errorf("an allowed acquire without a lease: %+v", d)
						return
					}
					continue
				}
				acquired.Add(1)
				h := held.Add(1)
				for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
				}
				if d, err := api.Renew(ctx, l); err != nil || !d.Allowed {
					errs <- fmt.Errorf("renew of a held lease: %+v, %v", d, err)
					return
				}
				held.Add(-1)
				if d, err := api.Release(ctx, l); err != nil || !d.Allowed {
					errs <- fmt.Errorf("release of a held lease: %+v, %v", d, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if p := peak.Load(); p > count || acquired.Load() < count {
		t.Fatalf("peak %d leases held (count %d), %d acquired", p, count, acquired.Load())
	}
	for i := range count {
		if l, d, err := procs[i%len(procs)].api().Acquire(context.Background(), txn); err != nil || l.Lease == "" || d.Remaining != int64(count-1-i) {
			t.Fatalf("acquire %d after every release: %+v, %+v, %v", i, l, d, err)
		}
	}
}
