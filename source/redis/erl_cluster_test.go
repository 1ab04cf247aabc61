package redis_test

import (
	"fmt"
	"testing"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/source/redis"
)

// clusters are the cluster backends, in both key formats.
var clusters = []backend{backends[1], backends[3]}

// idsInSlots returns n ids whose entries (rate counters, buckets of limits
// with a box, box entries) are in n different hash slots, in ascending
// slot order: the order a multi-slot batch is applied in.
func idsInSlots(src *redis.Source, n int) []string {
	var out []string
	last := -1
	for i := 0; len(out) < n; i++ {
		id := fmt.Sprintf("id%d", i)
		k, _ := src.EntryKey("130:" + id)
		if s := redis.Slot(k); s > last+500 {
			out, last = append(out, id), s
		}
	}
	return out
}

// A batch across slots denied in its later part: the earlier part's GCRA
// bucket is given back, but its rate counter's hits and the box entry a
// spend-only rate op made stay, as they would after the same batch denied
// on one Redis; the denied part writes its own hits and box entry.
func TestClusterDeniedLaterKeepsHitsAndBoxes(t *testing.T) {
	for _, b := range clusters {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			c := rawClient(t, opts)
			ids := idsInSlots(src, 2)
			x, y := ids[0], ids[1]
			until := now + secs(300)
			spend(t, src, now, withBox(hourly("140:"+y, 100), until)) // y's bucket is empty
			out := spend(t, src, now,
				withBox(hourly("140:"+x, 3), until),
				rateOp("130:"+x, 10, 3, 5, until),
				withMode(rateOp("131:"+x, 1, 2, 5, until), bucket.SpendOnly),
				withBox(hourly("140:"+y, 1), until),
				rateOp("130:"+y, 10, 3, 4, until))
			if !out[0].Allowed || !out[1].Allowed || out[2].Allowed || out[3].Allowed || !out[4].Allowed {
				t.Fatalf("outcomes %+v", out)
			}
			if k, f := src.EntryKey("140:" + x); func() bool { _, ok := rawGet(t, c, k, f); return ok }() {
				t.Fatal("the earlier part's GCRA bucket was not given back")
			}
			checks := []struct {
				key, box string
				hits     int64
				expires  int64
			}{
				{"130:" + x, "130:" + x, 5, 0},
				{"131:" + x, "131:" + x, 5, until},
				{"130:" + y, "130:" + y, 4, 0},
			}
			for _, ch := range checks {
				got := lookup(t, src, now, ch.key, ch.box)
				if h := windowHits(got.Counters[0], now, 60); h != ch.hits || got.Expires != ch.expires {
					t.Errorf("%s: %d hits, box until %d; want %d, %d", ch.key, h, got.Expires, ch.hits, ch.expires)
				}
			}
			if got := call(t, src, now, bucket.Call{Box: "140:" + y, Action: bucket.BoxRead}); got.Expires != until {
				t.Errorf("the denying op's box entry: %d, want %d", got.Expires, until)
			}
		})
	}
}

// A batch across slots denied in its earlier part: the later part is
// decided as part of a denied batch, so its GCRA bucket is not written,
// and its rate counter's hits and box entry are.
func TestClusterDeniedEarlierStillCountsLaterHits(t *testing.T) {
	for _, b := range clusters {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			src := newSource(t, opts)
			c := rawClient(t, opts)
			ids := idsInSlots(src, 2)
			x, y := ids[0], ids[1]
			until := now + secs(300)
			spend(t, src, now, withBox(hourly("140:"+x, 100), until))
			out := spend(t, src, now,
				withBox(hourly("140:"+x, 1), until),
				withBox(hourly("141:"+y, 2), until),
				rateOp("130:"+y, 1, 2, 3, until))
			if out[0].Allowed || !out[1].Allowed || out[2].Allowed || out[1].Write || !out[2].Write || !out[2].WriteBox {
				t.Fatalf("outcomes %+v", out)
			}
			if k, f := src.EntryKey("141:" + y); func() bool { _, ok := rawGet(t, c, k, f); return ok }() {
				t.Fatal("a later part of a denied batch wrote its GCRA bucket")
			}
			got := lookup(t, src, now, "130:"+y, "130:"+y)
			if h := windowHits(got.Counters[0], now, 1); h != 3 || got.Expires != until {
				t.Fatalf("the later part's rate counter: %d hits, box until %d; want 3, %d", h, got.Expires, until)
			}
			if got := call(t, src, now, bucket.Call{Box: "140:" + x, Action: bucket.BoxRead}); got.Expires != until {
				t.Fatalf("the denying op's box entry: %d, want %d", got.Expires, until)
			}
		})
	}
}

// A call whose counter and box entry are of two ids in two slots (limits
// that canonicalise an entry differently) is applied in steps: the hits
// are counted and the entry boxed as in one step.
func TestClusterCallAcrossSlots(t *testing.T) {
	for _, b := range clusters {
		t.Run(b.name, func(t *testing.T) {
			src := newSource(t, b.opts(t))
			ids := idsInSlots(src, 2)
			until := now + secs(300)
			c := bucket.Call{Counters: []bucket.CounterCheck{
				{Key: "130:" + ids[0], Delta: 3, Limit: rateLimit(1, 2)},
				{Key: "131:" + ids[1], Delta: 1, Limit: rateLimit(1, 2)},
			}, Box: "135:" + ids[1], Action: bucket.BoxWhenAbove, Until: until}
			res := call(t, src, now, c)
			if !res.Above[0] || res.Above[1] || res.Expires != until {
				t.Fatalf("call across slots: %+v", res)
			}
			if got := call(t, src, now, bucket.Call{Box: "135:" + ids[1], Action: bucket.BoxRead}); got.Expires != until {
				t.Fatalf("box entry %d, want %d", got.Expires, until)
			}
		})
	}
}
