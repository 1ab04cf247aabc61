package redis

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/internal/redistest"
	"github.com/limiter-dev/limiter/source/syncpush"
)

// A pipeline carries one sync call of more than lightSyncKeys counters at
// most, wherever they stand in the queue: the others keep their order and
// wait for the next pipelines, and the decisions and small sync calls
// around them go now, in queue order.
func TestNextPipelineCarriesOneSyncCall(t *testing.T) {
	call := func(op operation, name string) *queued {
		keys := []string{name}
		if op == opSync || op == opSyncRates {
			keys = append(keys, make([]string, lightSyncKeys)...)
		}
		return &queued{call: &scriptCall{op: op, keys: keys}}
	}
	names := func(qs []*queued) string {
		s := ""
		for _, q := range qs {
			s += q.call.keys[0] + " "
		}
		return s
	}
	small := &queued{call: &scriptCall{op: opSyncRates, keys: []string{"box"}}}
	queue := []*queued{call(opSpend, "a"), call(opSync, "s1"), call(opCheck, "b"), call(opSyncRates, "r1"), small, call(opSync, "s2"), call(opSpend, "c")}
	for _, want := range []string{"a s1 b box c ", "r1 ", "s2 "} {
		var batch []*queued
		batch, queue = nextPipeline(queue)
		if got := names(batch); got != want {
			t.Fatalf("pipeline %q, want %q", got, want)
		}
	}
	if len(queue) != 0 {
		t.Fatalf("%d calls left", len(queue))
	}
	// Without a second sync call, the queue is cut as it stands.
	var long []*queued
	for i := range maxPipeline + 3 {
		long = append(long, call(opSpend, strconv.Itoa(i)))
	}
	long[5] = call(opSync, "s")
	batch, rest := nextPipeline(long)
	if len(batch) != maxPipeline || len(rest) != 3 || &batch[0] != &long[0] {
		t.Fatalf("%d and %d calls, want %d and 3, the queue's own slice", len(batch), len(rest), maxPipeline)
	}
}

// A sync of many counters runs in Redis as calls of maxSyncKeys counters
// each, never packed together: no script run holds Redis for more than
// one of them, whatever the sync's size, so decisions between them wait
// no longer than one call takes. Redis's slow log, set to record every
// command, shows each script run's declared keys.
func TestLargeSyncRunsOneCallAtATime(t *testing.T) {
	srv := redistest.NewStandalone(t)
	src, _ := coalesceSource(t, srv)
	admin := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer admin.Close()
	ctx := context.Background()
	for _, set := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", "100000"}} {
		if err := admin.ConfigSet(ctx, set[0], set[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.SlowLogReset(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const counters = 40 * maxSyncKeys
	pushes := make([]syncpush.Window, counters)
	for i := range pushes {
		pushes[i] = syncpush.Window{Key: fmt.Sprintf("sync:%d", i), Period: 60_000, Start: coalesceNow / 1e6 / 60_000 * 60_000, Hits: 1}
	}
	if err := src.SyncWindows(ctx, coalesceNow, pushes); err != nil {
		t.Fatal(err)
	}
	entries, err := admin.SlowLogGet(ctx, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	runs, keys := 0, 0
	for _, e := range entries {
		if len(e.Args) < 3 || (e.Args[0] != "evalsha" && e.Args[0] != "EVALSHA") {
			continue
		}
		n, err := strconv.Atoi(e.Args[2])
		if err != nil {
			t.Fatalf("slow log entry %q", e.Args[:3])
		}
		if n > maxSyncKeys {
			t.Fatalf("a script run declared %d keys, more than one sync call's %d", n, maxSyncKeys)
		}
		runs, keys = runs+1, keys+n
	}
	if runs != counters/maxSyncKeys || keys != counters {
		t.Fatalf("%d script runs of %d keys in all, want %d of %d", runs, keys, counters/maxSyncKeys, counters)
	}
}
