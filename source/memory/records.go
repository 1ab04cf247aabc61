package memory

import (
	"hash/maphash"
	"sync"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/calendar"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// recordStripes is how many locks the idempotency records are spread
// over, so that idempotent calls with different keys rarely wait on each
// other.
const recordStripes = 64

// minRecords is the fewest idempotency records a source keeps, however
// small its bucket bound.
const minRecords = 1024

// record is what an idempotent call leaves behind: enough to compute its
// outcomes again exactly (the states it read and its now), and what a retry
// must match.
type record struct {
	fingerprint string
	expires     int64
	now         int64
	// words are the states the call read, packed (see packStates): a GCRA
	// op's TAT takes one word and a window op's counter four, rather than
	// a whole bucket.State (five) each.
	words []int64
	// n is how many ops the call had, and windowed whether any of them
	// was a window op (the words then begin with a bitmask of them).
	n        int32
	windowed bool
	// leased are the leases the call's concurrency ops read, and the
	// lease ids they were given (nil when it had none).
	leased *leaseRecord
}

// packStates returns the states read for ops as a record keeps them: in
// the ops' order, a GCRA op's TAT, a window op's Period, Start, Cur and
// Prev, or a calendar op's Tag, Start, End and Used. When any op is a
// window or calendar op, a bitmask of which ones are comes first, one word
// per 64 ops; a request of GCRA limits alone needs none.
func packStates(ops []bucket.Op, states []bucket.State) (words []int64, windowed bool) {
	size := len(ops)
	for i := range ops {
		if ops[i].Algorithm.Counted() {
			windowed = true
			size += 3
		}
	}
	if !windowed {
		words = make([]int64, len(ops))
		for i := range ops {
			words[i] = states[i].TAT
		}
		return words, false
	}
	masks := (len(ops) + 63) / 64
	words = make([]int64, masks, masks+size)
	for i := range ops {
		switch {
		case ops[i].Algorithm == bucket.Calendar:
			words[i/64] = int64(uint64(words[i/64]) | 1<<(i%64))
			c := &states[i].Calendar
			words = append(words, c.Tag, c.Start, c.End, c.Used)
		case ops[i].Algorithm.Windowed():
			words[i/64] = int64(uint64(words[i/64]) | 1<<(i%64))
			c := &states[i].Window
			words = append(words, c.Period, c.Start, c.Cur, c.Prev)
		default:
			words = append(words, states[i].TAT)
		}
	}
	return words, true
}

// unpackStates appends to buf the states r kept, as ops (as many as the
// recorded call had) read them. An op whose algorithm is not of the kind
// recorded at its place (the limit's algorithm changed in between) reads
// an empty state, as it would have in the table of its own kind.
func (r *record) unpackStates(ops []bucket.Op, buf []bucket.State) []bucket.State {
	if !r.windowed {
		for i := range ops {
			st := bucket.State{TAT: gcra.Missing}
			if !ops[i].Algorithm.Counted() {
				st.TAT = r.words[i]
			}
			buf = append(buf, st)
		}
		return buf
	}
	w := r.words[(len(ops)+63)/64:]
	for i := range ops {
		st := bucket.State{TAT: gcra.Missing}
		if uint64(r.words[i/64])>>(i%64)&1 != 0 {
			// The record's fingerprint holds each op's algorithm, so
			// the words are of the op's kind.
			switch {
			case ops[i].Algorithm == bucket.Calendar:
				st.Calendar = calendar.Counter{Tag: w[0], Start: w[1], End: w[2], Used: w[3]}
			case ops[i].Algorithm.Windowed():
				st.Window = window.Counter{Period: w[0], Start: w[1], Cur: w[2], Prev: w[3]}
			}
			w = w[4:]
		} else {
			if !ops[i].Algorithm.Counted() {
				st.TAT = w[0]
			}
			w = w[1:]
		}
		buf = append(buf, st)
	}
	return buf
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
