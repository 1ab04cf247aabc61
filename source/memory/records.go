package memory

import (
	"hash/maphash"
	"sync"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// recordStripes is how many locks the idempotency records are spread
// over, so that idempotent calls with different keys rarely wait on each
// other.
const recordStripes = 64

// minRecords is the fewest idempotency records a source keeps, however
// small its bucket bound.
const minRecords = 1024

// record is what an idempotent call leaves behind: enough to compute its
// outcomes again exactly (the TATs it read and its now), and what a retry
// must match.
type record struct {
	fingerprint string
	expires     int64
	now         int64
	states      []bucket.State
}

// recordStripe holds the records whose key hashes to it. Its lock is
// taken before any shard lock and held across the batch it records, so
// that the decision and its record are one atomic step; calls without a
// record never take it.
type recordStripe struct {
	mu    sync.Mutex
	byKey map[string]*record
	// order is the stripe's keys in the order they were recorded, from
	// head on. Every record lives equally long, so that is also the order
	// in which they expire: forgetting expired records is a walk from the
	// front, O(1) per record.
	order   []queued
	head    int
	bound   int
	evicted uint64 // records forgotten before they expired, to stay in bound
}

// queued is one entry of a stripe's order: a key and the expiry it was
// recorded with, which tells a stale entry (its key recorded again since)
// from the current one.
type queued struct {
	key     string
	expires int64
}

// records is the idempotency records of a source, bounded in number.
type records struct {
	seed    maphash.Seed
	stripes [recordStripes]recordStripe
}

func newRecords(seed maphash.Seed, bound int) *records {
	r := &records{seed: seed}
	per := max(bound/recordStripes, 1)
	for i := range r.stripes {
		r.stripes[i].byKey = make(map[string]*record)
		r.stripes[i].bound = per
	}
	return r
}

// stripe returns the stripe of key, locked.
func (r *records) stripe(key string) *recordStripe {
	st := &r.stripes[maphash.String(r.seed, key)%recordStripes]
	st.mu.Lock()
	return st
}

// lookup returns key's record if it has not expired at now. Expired
// records at the front of the stripe are forgotten on the way.
func (st *recordStripe) lookup(key string, now int64) (*record, bool) {
	st.forget(now, 0)
	rec, ok := st.byKey[key]
	if !ok || now >= rec.expires {
		return nil, false
	}
	return rec, true
}

// add records rec under key, making room within the bound by forgetting
// the oldest records first.
func (st *recordStripe) add(key string, rec *record, now int64) {
	st.forget(now, 1)
	st.byKey[key] = rec
	st.order = append(st.order, queued{key: key, expires: rec.expires})
}

// forget drops the records that have expired at now, and the oldest live
// ones while fewer than room places are free.
func (st *recordStripe) forget(now int64, room int) {
	for st.head < len(st.order) {
		q := st.order[st.head]
		if rec, ok := st.byKey[q.key]; ok && rec.expires == q.expires {
			live := now < q.expires
			if live && len(st.byKey)+room <= st.bound {
				break
			}
			if live {
				st.evicted++
			}
			delete(st.byKey, q.key)
		}
		st.order[st.head] = queued{}
		st.head++
	}
	// Reuse the front of the queue once most of it is spent.
	if st.head > 64 && st.head*2 > len(st.order) {
		n := copy(st.order, st.order[st.head:])
		clear(st.order[n:])
		st.order = st.order[:n]
		st.head = 0
	}
}

// evictions returns how many records were forgotten early, summed over
// the stripes.
func (r *records) evictions() uint64 {
	var n uint64
	for i := range r.stripes {
		st := &r.stripes[i]
		st.mu.Lock()
		n += st.evicted
		st.mu.Unlock()
	}
	return n
}
