package topdenied

import (
	"github.com/limiter-dev/limiter/internal/spacesaving"
)

// ring is one window's buckets of one limit in one shard: a sketch per
// bucket, reused when its slot comes round again.
type ring struct {
	slots []slot
}

type slot struct {
	epoch int64 // which bucket of time the sketch counts: now / width
	sk    *spacesaving.Sketch
}

func newRing(w Window) ring { return ring{slots: make([]slot, w.spec().buckets)} }

// add counts id in the bucket of now (Unix nanoseconds, before 1970 too).
func (r *ring) add(w Window, now int64, id string) {
	epoch := now / int64(w.spec().width)
	i := epoch % int64(len(r.slots))
	if i < 0 {
		i += int64(len(r.slots))
	}
	s := &r.slots[i]
	if s.sk == nil {
		s.sk = spacesaving.New(Counters)
		s.epoch = epoch
	} else if s.epoch != epoch {
		s.sk.Reset()
		s.epoch = epoch
	}
	s.sk.Add(id)
}

// summary merges the buckets of the window ending at now.
func (r *ring) summary(w Window, now int64) spacesaving.Summary {
	cur := now / int64(w.spec().width)
	parts := make([]spacesaving.Summary, 0, len(r.slots))
	for _, s := range r.slots {
		if s.sk != nil && s.epoch <= cur && s.epoch > cur-int64(len(r.slots)) {
			parts = append(parts, s.sk.Summary())
		}
	}
	return spacesaving.Merge(parts...)
}

// size is how many ids the ring's sketches hold.
func (r *ring) size() int {
	n := 0
	for _, s := range r.slots {
		if s.sk != nil {
			n += s.sk.Len()
		}
	}
	return n
}
