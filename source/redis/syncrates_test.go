package redis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/limiter-dev/limiter/source/syncpush"

	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/source/redis"
)

// hitsAt returns a counter holding n[i] hits at second s - i.
func hitsAt(s int64, n ...int64) ratecounter.Counter {
	var c ratecounter.Counter
	for i := len(n) - 1; i >= 0; i-- {
		c.Add(s-int64(i), n[i])
	}
	return c
}

// syncRates runs one sync and fails the test on an error or a push not
// applied.
func syncRates(t testing.TB, src *redis.Source, at int64, pushes []syncpush.Rate) {
	t.Helper()
	if err := src.SyncRates(context.Background(), at, pushes); err != nil {
		t.Fatalf("SyncRates: %v", err)
	}
	for i, p := range pushes {
		if !p.Applied {
			t.Fatalf("push %d not applied", i)
		}
	}
}

// Pushed hits merge into the stored counter second by second, as
// ratecounter.Counter.Merge does (seconds the stored counter no longer
// keeps are dropped, a later second moves it on); a box entry becomes the
// later of the stored and pushed expiries; Total and TotalBox are what is
// stored after. A push without hits and expiry only reads.
func TestSyncRatesMerge(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			src := newSource(t, b.opts(t))
			s := ratecounter.Second(now)
			until := now + secs(600)
			spend(t, src, now, rateOp("130:alice", 10, 3, 4, until), rateOp("131:alice", 10, 3, 2, until))
			want := hitsAt(s, 4)
			// 70 s old: dropped; 30 s old: counted; one second ahead:
			// the counter moves on.
			pushed := hitsAt(s+1, 5, 0, 0)
			pushed.Add(s-30, 6)
			old := hitsAt(s-70, 9)
			want.Merge(&old)
			want.Merge(&pushed)
			pushes := []syncpush.Rate{
				{Key: "130:alice", Hits: old},
				{Key: "131:alice", Hits: hitsAt(s, 1), Box: "131:alice", BoxExpires: until},
				{Box: "135:alice", BoxExpires: now - 1}, // an expiry already past: nothing to store
			}
			syncRates(t, src, now, pushes)
			// A push whose last second lost its hits to a refund moves the
			// stored counter on only to its newest hit.
			refunded := hitsAt(s+2, 3)
			refunded.Add(s+5, 1)
			refunded.Remove(s+5, 1)
			wantRefunded := hitsAt(s, 1)
			wantRefunded.Merge(&refunded)
			spend(t, src, now, rateOp("132:alice", 10, 3, 1, until))
			pushes = []syncpush.Rate{
				{Key: "130:alice", Hits: pushed, Box: "130:alice"},
				{Key: "131:alice", Box: "131:alice", BoxExpires: until - 1}, // never shortens
				{Box: "135:alice"},
				{Key: "132:alice", Hits: refunded},
			}
			syncRates(t, src, now, pushes)
			if pushes[3].Total != wantRefunded || wantRefunded.Last != s+2 {
				t.Fatalf("merged a refunded push: %+v, want %+v", pushes[3].Total, wantRefunded)
			}
			if pushes[0].Total != want || pushes[0].TotalBox != 0 {
				t.Fatalf("merged counter %+v, box %d; want %+v, 0", pushes[0].Total, pushes[0].TotalBox, want)
			}
			if got := pushes[1].Total.Window(s, 60); got != 3 || pushes[1].TotalBox != until {
				t.Fatalf("131: %d hits, box %d; want 3, %d", got, pushes[1].TotalBox, until)
			}
			if pushes[2].TotalBox != 0 {
				t.Fatalf("a past expiry was stored: %d", pushes[2].TotalBox)
			}
			// Decisions read what was synced.
			if got := lookup(t, src, now+secs(1), "130:alice", "131:alice"); got.Counters[0] != want || got.Expires != until {
				t.Fatalf("lookup after the sync: %+v", got)
			}
		})
	}
}

// Eight sources push at once, forty times each, to thirty counters and
// their box entries: every total is the exact sum of the hits pushed, and
// every box entry the latest expiry pushed.
func TestSyncRatesAddUp(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			opts.Namespace = fmt.Sprintf("t%x:", rand.Uint64())
			s := ratecounter.Second(now)
			const sources, rounds, counters = 8, 40, 30
			var wg sync.WaitGroup
			errs := make(chan error, sources)
			for w := range sources {
				src := openSource(t, opts)
				wg.Go(func() {
					for r := range rounds {
						pushes := make([]syncpush.Rate, counters)
						for i := range pushes {
							k := fmt.Sprintf("130:id%d", i)
							pushes[i] = syncpush.Rate{Key: k, Hits: hitsAt(s, 1, int64(w+1)), Box: k, BoxExpires: now + secs(int64(60+w*rounds+r))}
						}
						if err := src.SyncRates(context.Background(), now, pushes); err != nil {
							errs <- err
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
			src := openSource(t, opts)
			read := make([]syncpush.Rate, counters)
			for i := range read {
				k := fmt.Sprintf("130:id%d", i)
				read[i] = syncpush.Rate{Key: k, Box: k}
			}
			syncRates(t, src, now, read)
			wantNow, wantBefore := int64(sources*rounds), int64(rounds*sources*(sources+1)/2)
			wantBox := now + secs(60+(sources-1)*rounds+rounds-1)
			for i, p := range read {
				if p.Total.At(s) != wantNow || p.Total.At(s-1) != wantBefore || p.TotalBox != wantBox {
					t.Fatalf("counter %d: %d and %d hits, box %d; want %d, %d, %d", i, p.Total.At(s), p.Total.At(s-1), p.TotalBox, wantNow, wantBefore, wantBox)
				}
			}
		})
	}
}

// An invalid push fails the sync before anything is sent: nothing is
// applied, and the error says so.
func TestSyncRatesRefusesInvalidPushes(t *testing.T) {
	src := newSource(t, standalone(t))
	for _, bad := range [][]syncpush.Rate{
		{{Key: "130:a"}, {}},
		{{Key: "130:a", BoxExpires: now}},
		{{Box: "130:a", BoxExpires: -1}},
	} {
		err := src.SyncRates(context.Background(), now, bad)
		if !errors.Is(err, redis.ErrInvalidOp) || !errors.Is(err, once.ErrNotApplied) {
			t.Errorf("pushes %+v: %v, want ErrInvalidOp and ErrNotApplied", bad, err)
		}
		for i, p := range bad {
			if p.Applied {
				t.Errorf("pushes %+v: push %d applied", bad, i)
			}
		}
	}
}

// A box entry that a push stores goes to its limit's box log, which any
// process reads from a cursor: in the order stored, each once, the
// limits apart. A push that does not raise the stored expiry, or only
// reads, logs nothing.
func TestBoxLog(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			src := newSource(t, b.opts(t))
			ctx := context.Background()
			until := now + secs(600)
			entries, cursor, err := src.ReadBoxLog(ctx, "131:", "", 10)
			if err != nil || len(entries) != 0 {
				t.Fatalf("an empty log: %v, %v", entries, err)
			}
			syncRates(t, src, now, []syncpush.Rate{
				{Key: "131:alice", Hits: hitsAt(ratecounter.Second(now), 1), Box: "131:alice", BoxExpires: until},
				{Box: "131:bob", BoxExpires: until + 1},
				{Box: "132:alice", BoxExpires: until},
				{Box: "131:carol", BoxExpires: now - 1}, // past: not stored
			})
			syncRates(t, src, now, []syncpush.Rate{
				{Box: "131:alice", BoxExpires: until - 1}, // never shortens: not logged
				{Box: "131:bob"}, // a read
				{Box: "131:dave", BoxExpires: until + 2},
			})
			want := []syncpush.BoxEntry{{Box: "131:alice", Expires: until}, {Box: "131:bob", Expires: until + 1}}
			entries, cursor, err = src.ReadBoxLog(ctx, "131:", cursor, 2)
			if err != nil || !slices.Equal(entries, want) {
				t.Fatalf("the first two entries of 131's log: %v, %v; want %v", entries, err, want)
			}
			entries, cursor, err = src.ReadBoxLog(ctx, "131:", cursor, 10)
			if want := []syncpush.BoxEntry{{Box: "131:dave", Expires: until + 2}}; err != nil || !slices.Equal(entries, want) {
				t.Fatalf("the rest of 131's log: %v, %v; want %v", entries, err, want)
			}
			if again, next, err := src.ReadBoxLog(ctx, "131:", cursor, 10); err != nil || len(again) != 0 || next != cursor {
				t.Fatalf("131's log past its end: %v, %q, %v; want nothing and cursor %q", again, next, err, cursor)
			}
			if entries, _, err := src.ReadBoxLog(ctx, "132:", "", 10); err != nil || !slices.Equal(entries, []syncpush.BoxEntry{{Box: "132:alice", Expires: until}}) {
				t.Fatalf("132's log: %v, %v", entries, err)
			}
			// A key of another type at a log's name fails no push, and is
			// left as it is.
			raw := rawClient(t, b.opts(t))
			foreign := src.BoxLogKey("133:")
			if err := raw.Set(ctx, foreign, "not a log", 0).Err(); err != nil {
				t.Fatal(err)
			}
			syncRates(t, src, now, []syncpush.Rate{{Box: "133:alice", BoxExpires: until}})
			if ttl, err := raw.PTTL(ctx, foreign).Result(); err != nil || ttl != -1 {
				t.Errorf("the foreign key's time to live: %v, %v; want none (-1ms)", ttl, err)
			}
			if _, _, err := src.ReadBoxLog(ctx, "133:", "", 10); err == nil {
				t.Error("reading a foreign key as a box log succeeded")
			}
		})
	}
}
