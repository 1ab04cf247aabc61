// Package topdenied keeps, per limit, the ids denied most over the last
// five minutes and the last hour, in bounded memory whatever the number
// of distinct ids: Space-Saving sketches (internal/spacesaving) per time
// bucket, merged when read.
//
// Denied is on the hot path of every denial. The ids are split over
// shards by a hash, each with its own small lock, so no lock is shared by
// all requests, and counting a denial allocates nothing once the sketches
// have seen ids of its length (a sketch's counters keep their buffers).
package topdenied

import (
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/internal/spacesaving"
)

const (
	// Counters is the size of each sketch: one per limit, shard and time
	// bucket. Above 100, every id with at least 1% of a limit's denials
	// in a window is among the 100 listed (spacesaving.Merge says why).
	Counters = 128
	// MaxList is the most ids an answer lists.
	MaxList = 100
	// shards splits the ids by hash; each shard has its own lock.
	shards = 8
)

// MaxSizePerLimit is the most ids the sketches of one limit hold, all
// windows, buckets and shards together: the bound on memory per limit
// (about 100 bytes an id, plus the id).
func MaxSizePerLimit() int {
	n := 0
	for _, w := range Windows() {
		n += w.spec().buckets
	}
	return n * shards * Counters
}

// Recorder counts denials. Make it with New; it is safe for concurrent
// use.
type Recorder struct {
	clk    clock.Clock
	seed   maphash.Seed
	shards [shards]shard
}

type shard struct {
	mu     sync.Mutex
	limits map[string]*limitRings
	_      [64]byte // keeps two shards' locks off one cache line
}

// limitRings are one limit's windows in one shard.
type limitRings struct {
	rings [numWindows]ring
	last  int64 // the newest denial, Unix nanoseconds
}

// New returns a Recorder reading time from clk.
func New(clk clock.Clock) *Recorder {
	r := &Recorder{clk: clk, seed: maphash.MakeSeed()}
	for i := range r.shards {
		r.shards[i].limits = make(map[string]*limitRings)
	}
	return r
}

// Denied counts one denial of id by limit. id's bytes are copied into the
// sketches, so it may be a view of memory the caller reuses.
func (r *Recorder) Denied(limit, id string) {
	sh := &r.shards[maphash.String(r.seed, id)%shards]
	now := r.clk.Now().UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	lr := sh.limits[limit]
	if lr == nil {
		lr = &limitRings{}
		for _, w := range Windows() {
			lr.rings[w] = newRing(w)
		}
		sh.limits[strings.Clone(limit)] = lr
	}
	lr.last = max(lr.last, now)
	for _, w := range Windows() {
		lr.rings[w].add(w, now, id)
	}
}

// View is what one process counted over one window: per limit, the
// summary of its sketches.
type View map[string]spacesaving.Summary

// View reads the window ending now. Limits with no denial in the longest
// window are forgotten on the way, so limits a reload removed do not stay.
func (r *Recorder) View(w Window) View {
	now := r.clk.Now().UnixNano()
	stale := now - int64(retention())
	perLimit := map[string][]spacesaving.Summary{}
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for limit, lr := range sh.limits {
			if lr.last <= stale {
				delete(sh.limits, limit)
				continue
			}
			if s := lr.rings[w].summary(w, now); s.Total > 0 {
				perLimit[limit] = append(perLimit[limit], s)
			}
		}
		sh.mu.Unlock()
	}
	v := make(View, len(perLimit))
	for limit, parts := range perLimit {
		v[limit] = spacesaving.Concat(parts...)
	}
	return v
}

// Size is how many ids the sketches hold now, every limit together: at
// most MaxSizePerLimit() a limit.
func (r *Recorder) Size() int {
	n := 0
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for _, lr := range sh.limits {
			for j := range lr.rings {
				n += lr.rings[j].size()
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// Now is the Recorder's clock, for callers that say when they read.
func (r *Recorder) Now() time.Time { return r.clk.Now() }
