package local

import (
	"context"
	"errors"
	"slices"

	"github.com/limiter-dev/limiter/source/syncpush"

	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// ErrNoRateSyncer is the error of a cycle with rate-counter hits or box
// entries to push when the source offers no syncpush.RateSyncer.
var ErrNoRateSyncer = errors.New("local: the source offers no rate counter and box sync")

// rateChunk is the most pushes one SyncRates call carries: a push holds
// two per-second counters (about half a kilobyte), so a large table goes
// in several calls rather than all at once.
const rateChunk = 4096

// held is one push of a cycle: a counter or an orphan's hits, a box entry
// or box orphan, or a counter and the box entry of the same key.
type held struct {
	t   *table
	key string
	r   *rate
	b   *box
}

func (h *held) push() syncpush.Rate {
	var p syncpush.Rate
	if h.r != nil {
		p.Key = h.key
		if h.r.inflight != nil {
			p.Hits = *h.r.inflight
		}
	}
	if h.b != nil {
		p.Box, p.BoxExpires = h.key, h.b.inflight
	}
	return p
}

// carries reports whether h pushes anything rather than only reading.
func (h *held) carries() bool {
	return (h.r != nil && h.r.inflight != nil) || (h.b != nil && h.b.inflight != 0)
}

// snapshot appends to hs one push per key t holds, with t locked (those
// with nothing to push too, to read what the source holds), and one per
// orphan. Unpushed hits and box expiries become the cycle's in-flight
// ones. Counters and entries that count or box nothing are forgotten
// instead.
func (t *table) snapshot(now int64, hs []held) []held {
	s := ratecounter.Second(now)
	t.stamp++
	// Removing an entry moves the last one into its place: going down
	// from the last, that one was visited already.
	for p := t.counters.Len() - 1; p >= 0; p-- {
		r := *t.counters.At(p)
		key := r.key
		b := t.box(key)
		if b != nil && b.idle(now) {
			t.removeBox(b)
			b = nil
		}
		if r.idle(now) {
			t.counters.Remove(p)
			if b == nil {
				continue
			}
			r = nil
		} else {
			if !emptyRate(r.pending, s) {
				r.inflight = r.pending
			}
			r.pending = nil
		}
		if b != nil {
			b.stamp = t.stamp
			t.takeBox(b, now)
		}
		hs = append(hs, held{t: t, key: key, r: r, b: b})
	}
	for p := t.boxes.Len() - 1; p >= 0; p-- {
		b := *t.boxes.At(p)
		key := b.key
		if b.stamp == t.stamp {
			continue
		}
		if b.idle(now) {
			t.boxes.Remove(p)
			continue
		}
		t.takeBox(b, now)
		hs = append(hs, held{t: t, key: key, b: b})
	}
	for key, o := range t.orphans {
		if !emptyRate(o.pending, s) {
			o.inflight, o.pending = o.pending, nil
			hs = append(hs, held{t: t, key: key, r: o})
		}
	}
	clear(t.orphans)
	for key, o := range t.boxOrphans {
		if o.pending > now {
			o.inflight, o.pending = o.pending, 0
			hs = append(hs, held{t: t, key: key, b: o})
		}
	}
	clear(t.boxOrphans)
	return hs
}

// takeBox makes b's expiry set here, if it still boxes, in flight.
func (t *table) takeBox(b *box, now int64) {
	if b.pending > now {
		b.inflight = b.pending
	}
	if b.pending != 0 {
		b.pending = 0
		t.fix(b)
	}
}

// rateCycle is g's cycle for rate counters and box entries, in SyncRates
// calls of at most rateChunk pushes. After a failed call the calls left
// are not made (a source that fails once in a cycle would likely fail
// them all, each after its timeout): their pushes are put back, as are
// those of the failed call that were not applied.
func (l *Layer) rateCycle(ctx context.Context, g *group) (syncResult, error) {
	now := l.opts.Clock.Now().UnixNano()
	var hs []held
	for _, t := range g.tableList() {
		t.mu.Lock()
		hs = t.snapshot(now, hs)
		t.mu.Unlock()
	}
	var res syncResult
	var err error
	quiet := false // nothing to push, only to read
	if l.rates == nil {
		// Nothing can be read either: every push goes back, and only
		// those carrying something make the cycle fail.
		err = ErrNoRateSyncer
		quiet = !slices.ContainsFunc(hs, func(h held) bool { return h.carries() })
	}
	pushes := make([]syncpush.Rate, 0, min(len(hs), rateChunk))
	for start := 0; start < len(hs); start += rateChunk {
		part := hs[start:min(start+rateChunk, len(hs))]
		pushes = pushes[:0]
		for i := range part {
			pushes = append(pushes, part[i].push())
		}
		if err == nil {
			err = l.syncCall(ctx, g, "rate counters and box entries", len(pushes), func(ctx context.Context) error {
				return l.rates.SyncRates(ctx, now, pushes)
			})
		}
		r := l.settle(part, pushes, err)
		res.Pushed += r.Pushed
		res.Fetched += r.Fetched
	}
	if err != nil {
		if quiet {
			err = nil
		}
		return syncResult{}, err
	}
	return res, nil
}

// settle takes back, under the tables' locks, what hs pushed: a push the
// source certainly applied gives its counter and box entry what was read;
// any other puts its hits and expiry back for the next cycle. It reads the
// clock's now: hits that waited for a failed push are read as of when
// they are put back.
func (l *Layer) settle(hs []held, pushes []syncpush.Rate, err error) syncResult {
	now := l.opts.Clock.Now().UnixNano()
	s := ratecounter.Second(now)
	var res syncResult
	var t *table
	for i := range hs {
		h, p := &hs[i], &pushes[i]
		if h.t != t {
			if t != nil {
				t.mu.Unlock()
			}
			t = h.t
			t.mu.Lock()
		}
		failed := err != nil && !p.Applied
		carried, fetched := h.carries(), false
		if h.r != nil {
			hits := h.r.inflight
			h.r.inflight = nil
			switch {
			case failed:
				t.keepRate(h.key, hits, h.r, s)
			case t.rate(h.key) == h.r:
				h.r.read(&p.Total, s)
				fetched = true
			}
		}
		if h.b != nil {
			expires := h.b.inflight
			h.b.inflight = 0
			live := t.box(h.key) == h.b
			switch {
			case failed:
				t.keepBox(h.key, expires, now)
			case live:
				h.b.read, h.b.fetched = p.TotalBox, true
				if h.b.read <= now {
					h.b.read = 0
				}
				fetched = true
			}
			if live {
				t.fix(h.b)
			}
		}
		if !failed {
			if carried {
				res.Pushed++
			}
			if fetched {
				res.Fetched++
			}
		}
	}
	if t != nil {
		t.mu.Unlock()
	}
	return res
}
