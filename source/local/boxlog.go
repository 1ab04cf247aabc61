package local

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/limiter-dev/limiter/source/syncpush"
)

// boxLogBatch is the most entries of one limit's box log a cycle reads;
// the rest wait for the next cycle.
const boxLogBatch = 4096

// Followed is a limit above 0 with a penalty box, whose box log the layer
// reads (Follow).
type Followed struct {
	Name     string // "<enum>:", the start of its keys
	SyncRate time.Duration
	Capacity int // its box's bound in memory (<= 0: the default)
}

// Follow makes the layer read, at every cycle of their sync_rate, the box
// logs of limits (syncpush.BoxLog), also before this process counts
// anything of theirs: an id boxed in another process is then boxed here
// before its first request here. A configuration load names the limits;
// those named before stay followed, and a limit at or below 0 is skipped.
// The cycles of a sync_rate start with its first followed limit.
func (l *Layer) Follow(limits []Followed) {
	for _, f := range limits {
		if f.SyncRate <= 0 {
			continue
		}
		t := l.groupOf(f.SyncRate).tableOf(f.Name)
		t.mu.Lock()
		t.capacity = capacityOr(f.Capacity)
		t.follows = true
		t.mu.Unlock()
	}
}

// boxLogCycle reads, for each limit of g that the layer follows, the box
// log entries stored since the last cycle, and boxes their ids here as the
// source has them now: an id boxed in one process is then boxed in every
// process within about two sync intervals, also in one that never counted
// it (the totals a cycle reads are only those of the ids a process
// holds). An entry is a hint of which ids to read, not an expiry to
// trust: the source may have taken the id out of its box since (a reset,
// a removal), so the entries still live are read back from the source
// first. Each id boxed longer than this process knew counts as fetched.
func (l *Layer) boxLogCycle(ctx context.Context, g *group) (syncResult, error) {
	var res syncResult
	if l.boxLog == nil || l.rates == nil || g.rate <= 0 {
		return res, nil
	}
	var errs []error
	for name, t := range *g.tables.Load() {
		t.mu.Lock()
		cursor, follows := t.logCursor, t.follows
		t.mu.Unlock()
		if !follows {
			continue
		}
		reads, next, err := l.readBoxLog(ctx, g, name, cursor)
		if err != nil {
			errs = append(errs, fmt.Errorf("local: reading the box log of %s, sync_rate %s: %w", name, g.rate, err))
			continue
		}
		res.Fetched += t.takeLog(l, g, reads, next)
	}
	return res, errors.Join(errs...)
}

// readBoxLog reads name's box log after cursor, and then the box entries
// of the entries still live at now, as the source stores them.
func (l *Layer) readBoxLog(ctx context.Context, g *group, name, cursor string) ([]syncpush.Rate, string, error) {
	cctx, cancel := context.WithTimeout(ctx, l.syncTimeout(g))
	defer cancel()
	entries, next, err := l.boxLog.ReadBoxLog(cctx, name, cursor, boxLogBatch)
	if err != nil {
		return nil, cursor, err
	}
	now := l.opts.Clock.Now().UnixNano()
	var reads []syncpush.Rate
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if e.Expires > now && !seen[e.Box] {
			seen[e.Box] = true
			reads = append(reads, syncpush.Rate{Box: e.Box})
		}
	}
	if len(reads) > 0 {
		if err := l.rates.SyncRates(cctx, now, reads); err != nil {
			return nil, cursor, err
		}
	}
	return reads, next, nil
}

// takeLog boxes the ids that reads found boxed at now, until the expiry
// read, and moves t's cursor to next. It returns how many it boxed longer
// than t knew.
func (t *table) takeLog(l *Layer, g *group, reads []syncpush.Rate, next string) int {
	now := l.opts.Clock.Now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logCursor = next
	taken := 0
	for _, r := range reads {
		if r.TotalBox <= now {
			continue
		}
		b := l.boxOf(t, r.Box, now, t.capacity, g.rate, true)
		// No batch or call holds t: boxOf's pin is only this one's.
		b.pinned = false
		b.fetched = true
		if r.TotalBox > b.read {
			b.read = r.TotalBox
			t.fix(b)
			taken++
		}
	}
	return taken
}
