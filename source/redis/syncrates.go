package redis

import (
	"context"
	"fmt"

	"github.com/limiter-dev/limiter/source/syncpush"
)

var _ syncpush.RateSyncer = (*Source)(nil)

// maxRateSyncKeys bounds the pushes one rate sync script call carries: a
// counter with hits in each of its 60 seconds takes Redis about 25 µs to
// read, merge and write, so 64 of them keep a call under 2 ms (Redis runs
// nothing else meanwhile).
const maxRateSyncKeys = 64

// SyncRates implements syncpush.RateSyncer for the rate counters and box
// entries of limits whose sync_rate is above 0: per push, in one step
// inside a script run (the bucket script, operation Y), the pushed hits are added
// second by second to the stored counter (ratecounter.Counter.Merge: hits
// of seconds the stored counter no longer keeps are dropped, and a second
// stops at ratecounter.MaxHitsPerSecond), the box entry becomes the later
// of its stored expiry and the pushed one (an expiry not after now is not
// stored), and both are read back into Total and TotalBox as stored after
// that (the zero Counter for none; 0 when the id is not in the box at
// now). Hits pushed by any number of processes add up; a box entry is
// never shortened.
//
// The calls, Applied and the errors are as for SyncWindows: one script
// call on one Redis (per maxRateSyncKeys pushes), one per hash slot on a
// cluster. A push's counter and box entry are named by its id, so they
// share a slot; a push whose two are in different slots (another id) is
// refused on a cluster.
func (s *Source) SyncRates(ctx context.Context, now int64, pushes []syncpush.Rate) error {
	if len(pushes) == 0 {
		return nil
	}
	keys := make([]string, len(pushes))
	boxes := make([]string, len(pushes))
	for i := range pushes {
		pushes[i].Applied = false
	}
	for i := range pushes {
		p := &pushes[i]
		if err := s.checkRatePush(p); err != nil {
			return notApplied(err)
		}
		if p.Box != "" {
			boxes[i] = s.format.boxName(p.Box)
			keys[i] = boxes[i]
		}
		if p.Key != "" {
			keys[i] = s.format.entryName(p.Key)
			if s.cluster && p.Box != "" && Slot(boxes[i]) != Slot(keys[i]) {
				return notApplied(fmt.Errorf("%w: %q: box entry %q is in another hash slot", ErrInvalidOp, p.Key, p.Box))
			}
		}
	}
	jobs := make([]syncJob, 0, 1)
	for _, idx := range s.syncGroups(keys, maxRateSyncKeys) {
		c := &scriptCall{op: opSyncRates, now: now, keys: make([]string, len(idx)), boxes: make([]string, len(idx)),
			extra: &extraArgs{ratePushes: make([]syncpush.Rate, len(idx))}}
		for j, i := range idx {
			c.keys[j], c.boxes[j], c.extra.ratePushes[j] = keys[i], boxes[i], pushes[i]
		}
		jobs = append(jobs, syncJob{idx: idx, call: c})
	}
	errs := s.runSync(ctx, jobs)
	for i, j := range jobs {
		if errs[i] != nil {
			continue
		}
		for k, p := range j.idx {
			got := &j.call.extra.ratePushes[k]
			pushes[p].Total, pushes[p].TotalBox, pushes[p].Applied = got.Total, got.TotalBox, true
		}
	}
	// The box entries of the pushes applied are stored: a failure to log
	// them for the other processes is not the push's, whose outcome stays
	// as it is.
	_ = s.logBoxes(ctx, now, pushes)
	return syncError(errs)
}

// checkRatePush refuses a push with neither a counter nor a box entry, a
// negative box expiry or one without a box entry, or, in format v2, an
// empty key.
func (s *Source) checkRatePush(p *syncpush.Rate) error {
	if (p.Key == "" && p.Box == "") || p.BoxExpires < 0 || (p.Box == "" && p.BoxExpires != 0) {
		return fmt.Errorf("%w: a rate push of counter %q, box %q, box expiry %d", ErrInvalidOp, p.Key, p.Box, p.BoxExpires)
	}
	if p.Key != "" {
		if err := s.checkKey(p.Key); err != nil {
			return err
		}
	}
	return nil
}
