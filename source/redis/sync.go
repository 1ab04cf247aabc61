package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/limiter-dev/limiter/source/syncpush"

	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

var _ syncpush.WindowSyncer = (*Source)(nil)

// maxSyncKeys bounds the counters one sync script call adds to: Redis runs
// nothing else while a script runs, and a few hundred counters take it
// well under a millisecond. Longer syncs are cut into calls of this size,
// which still share round trips (pipe.go).
const maxSyncKeys = 256

// maxSyncCalls bounds the sync calls in flight at once: enough to fill
// every node's pipelines, few enough that a sync over every slot of a
// cluster does not start thousands of goroutines.
const maxSyncCalls = 64

// SyncWindows implements syncpush.WindowSyncer: it adds each push's hits
// to its window counter and reads the counter back, atomically per
// counter (the bucket script, operation A), so hits pushed by any number of
// processes add up. On one Redis the pushes go in one script call (one
// per maxSyncKeys); on a cluster, in one call per hash slot, all of them
// in parallel and sharing round trips per master.
//
// A push's hits count in its window Start and its PrevHits in the window
// before. The stored counter rolls forward to the latest of its own
// window, Start and the window of now, and hits of a window older than
// the one before that are dropped, since no decision counts them any
// more. Each push's Total is the counter after the add, as
// window.Counter.At reads it at now (Period and Start are always set).
//
// Each push's Applied says whether its call got its answer (its hits were
// added and its Total read). The error wraps ratelimits.ErrNotApplied only
// when no call changed anything; when some calls were applied and others
// failed, the error says so without that mark, and the pushes of the
// failed calls are the ones not Applied (a failed call that timed out may
// still have added its hits).
func (s *Source) SyncWindows(ctx context.Context, now int64, pushes []syncpush.Window) error {
	if len(pushes) == 0 {
		return nil
	}
	keys := make([]string, len(pushes))
	for i := range pushes {
		pushes[i].Applied = false
	}
	for i := range pushes {
		if err := s.checkPush(&pushes[i]); err != nil {
			return notApplied(err)
		}
		keys[i] = s.format.name(pushes[i].Key)
	}
	jobs := make([]syncJob, 0, 1)
	for _, idx := range s.syncGroups(keys, maxSyncKeys) {
		c := &scriptCall{op: opSync, now: now, keys: make([]string, len(idx)), extra: &extraArgs{pushes: make([]syncpush.Window, len(idx))}}
		for j, i := range idx {
			c.keys[j], c.extra.pushes[j] = keys[i], pushes[i]
		}
		jobs = append(jobs, syncJob{idx: idx, call: c})
	}
	errs := s.runSync(ctx, jobs)
	for i, j := range jobs {
		if errs[i] != nil {
			continue
		}
		for k, p := range j.idx {
			pushes[p].Total, pushes[p].Applied = j.call.extra.pushes[k].Total, true
		}
	}
	return syncError(errs)
}

// syncJob is one script call of a sync, and the indexes of the pushes it
// carries.
type syncJob struct {
	idx  []int
	call *scriptCall
}

// syncGroups returns the indexes of a sync's keys grouped into its script
// calls: one per hash slot on a cluster, all in one on one Redis, cut into
// calls of at most limit keys.
func (s *Source) syncGroups(keys []string, limit int) [][]int {
	var groups [][]int
	if s.cluster {
		groups = slotGroups(keys)
	} else {
		all := make([]int, len(keys))
		for i := range all {
			all[i] = i
		}
		groups = [][]int{all}
	}
	var out [][]int
	for _, g := range groups {
		for len(g) > 0 {
			n := min(len(g), limit)
			out = append(out, g[:n:n])
			g = g[n:]
		}
	}
	return out
}

// runSync runs a sync's calls, at most maxSyncCalls at once, and returns
// each one's error.
func (s *Source) runSync(ctx context.Context, jobs []syncJob) []error {
	errs := make([]error, len(jobs))
	if len(jobs) == 1 {
		_, errs[0] = s.run(ctx, jobs[0].call, nil)
		return errs
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxSyncCalls)
	for i := range jobs {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			_, errs[i] = s.run(ctx, jobs[i].call, nil)
		})
	}
	wg.Wait()
	return errs
}

// syncError is the error of a sync whose calls failed with errs (nil for
// each one applied): nil when none failed; wrapping ErrNotApplied when
// none was applied and each failure certainly changed nothing; otherwise
// an error that says some calls may have taken effect.
func syncError(errs []error) error {
	var failed []error
	applied, unknown := false, false
	for _, err := range errs {
		if err == nil {
			applied = true
			continue
		}
		failed = append(failed, err)
		unknown = unknown || !errors.Is(err, once.ErrNotApplied)
	}
	switch {
	case len(failed) == 0:
		return nil
	case !applied && !unknown:
		return errors.Join(failed...) // each wraps ErrNotApplied
	}
	return fmt.Errorf("redis source: sync: %d of %d calls failed, and the others may have added their hits: %v",
		len(failed), len(errs), errors.Join(failed...))
}

// checkPush refuses a push the script cannot add exactly: a period out of
// range, a Start that is not a window's start (a multiple of Period),
// hits below 0 or above window.MaxProduct, or an empty key in format v2.
func (s *Source) checkPush(p *syncpush.Window) error {
	if err := s.checkKey(p.Key); err != nil {
		return err
	}
	if err := checkPeriod(p.Key, p.Period); err != nil {
		return err
	}
	if p.Start%p.Period != 0 || p.Hits < 0 || p.PrevHits < 0 || p.Hits > window.MaxProduct || p.PrevHits > window.MaxProduct {
		return fmt.Errorf("%w: %q: sync of window start %d, period %d ms, hits %d and %d",
			ErrInvalidOp, p.Key, p.Start, p.Period, p.Hits, p.PrevHits)
	}
	// The script holds the window's index and start in doubles.
	if idx := p.Start / p.Period; idx > window.MaxProduct || idx < -window.MaxProduct ||
		p.Start > window.MaxProduct || p.Start < -window.MaxProduct {
		return fmt.Errorf("%w: %q: window start %d out of range", ErrInvalidOp, p.Key, p.Start)
	}
	return nil
}
