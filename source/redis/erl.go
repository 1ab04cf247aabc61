package redis

import (
	"context"
	"fmt"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// Call implements ratelimits.Source: an Edge Rate Limiting call is one
// script call (the bucket script, operation E), which reads the call's counters
// and its box entry, adds each counter's hits, checks its limit, applies
// the box action, and writes what changed, as bucket.ApplyCall does. The
// script returns the counters and the box entry as it read them, and the
// box entry as it left it; from what it read, Go computes res with
// bucket.ApplyCall itself, and checks that the box entry it would leave is
// the script's (ErrVerdictMismatch otherwise).
//
// A call's counters and box entry are named by their id (entryName,
// boxName), so those of one entry share a hash slot and a call is one
// script call also on a cluster. Only a call whose limits canonicalise the
// entry differently (an IP counter beside a box of plain strings, say) can
// span slots there: it is then applied in steps (callAcrossSlots).
//
// A call without a box entry (Box "") reads and writes none, whatever its
// Action.
func (s *Source) Call(ctx context.Context, now int64, call *bucket.Call, res *bucket.CallResult) error {
	*res = bucket.CallResult{}
	if call.Box == "" && call.Action != bucket.BoxNone {
		c := *call
		c.Action = bucket.BoxNone
		call = &c
	}
	keys, err := s.callKeys(call)
	if err != nil {
		return notApplied(err)
	}
	if len(keys) == 0 {
		return nil
	}
	if s.cluster && !sameSlot(keys) {
		return s.callAcrossSlots(ctx, now, call, res)
	}
	return s.callOnce(ctx, now, call, keys, res)
}

// callOnce runs call, whose names are keys, as one script call.
func (s *Source) callOnce(ctx context.Context, now int64, call *bucket.Call, keys []string, res *bucket.CallResult) error {
	x := &extraArgs{call: call}
	if _, err := s.run(ctx, &scriptCall{op: opCall, now: now, keys: keys, extra: x}, nil); err != nil {
		return err
	}
	n := len(call.Counters)
	newBox, write := bucket.ApplyCall(now, call, x.counters[:n], x.box, res)
	left := x.box
	if write {
		left = newBox
	}
	if left <= now {
		left = 0
	}
	if left != x.boxAfter {
		return fmt.Errorf("%w: the script left box entry %q expiring at %d, bucket.ApplyCall at %d",
			ErrVerdictMismatch, call.Box, x.boxAfter, left)
	}
	return nil
}

// callKeys checks call and returns the names of its counters and then,
// when it has a box action, of its box entry.
func (s *Source) callKeys(call *bucket.Call) ([]string, error) {
	n := len(call.Counters)
	if n > bucket.MaxCallCounters || call.Action > bucket.BoxExtend {
		return nil, fmt.Errorf("%w: a call of %d counters, box action %d, box %q", ErrInvalidOp, n, call.Action, call.Box)
	}
	keys := make([]string, 0, n+1)
	for i, cc := range call.Counters {
		l := cc.Limit
		if cc.Delta < 0 || cc.Delta > ratecounter.MaxHitsPerSecond || l.Rate < 0 || l.Rate > maxRate ||
			(l.Window != 0 && !ratecounter.ValidWindow(l.Window)) {
			return nil, fmt.Errorf("%w: %q: counter delta %d, window %d s, rate %d", ErrInvalidOp, cc.Key, cc.Delta, l.Window, l.Rate)
		}
		if err := s.checkKey(cc.Key); err != nil {
			return nil, err
		}
		for _, other := range call.Counters[:i] {
			if other.Key == cc.Key {
				return nil, fmt.Errorf("%w: %q: a call names a counter twice", ErrInvalidOp, cc.Key)
			}
		}
		keys = append(keys, s.format.entryName(cc.Key))
	}
	if call.Action != bucket.BoxNone {
		if err := s.checkKey(call.Box); err != nil {
			return nil, err
		}
		keys = append(keys, s.format.boxName(call.Box))
	}
	return keys, nil
}

// callAcrossSlots applies, on a cluster, a call whose counters and box
// entry are not all in one hash slot, as the Limiter applies a call whose
// parts live in different stores: each counter in a script call of its
// own, then the box entry, boxed (bucket.BoxExtend) when a counter went
// above its limit. Each step is atomic; the call as a whole is not: a
// concurrent call may see one counter's hits before the other's, or the
// hits before the box entry.
func (s *Source) callAcrossSlots(ctx context.Context, now int64, call *bucket.Call, res *bucket.CallResult) error {
	applied := false
	above := false
	for i := range call.Counters {
		part := bucket.Call{Counters: call.Counters[i : i+1]}
		var pr bucket.CallResult
		if err := s.callOnce(ctx, now, &part, []string{s.format.entryName(part.Counters[0].Key)}, &pr); err != nil {
			return failedStep(err, applied)
		}
		applied = true
		res.Counters[i], res.Above[i] = pr.Counters[0], pr.Above[0]
		above = above || pr.Above[0]
	}
	if call.Action == bucket.BoxNone {
		return nil
	}
	box := bucket.Call{Box: call.Box, Action: call.Action, Until: call.Until, BoxCapacity: call.BoxCapacity}
	if box.Action == bucket.BoxWhenAbove {
		box.Action = bucket.BoxRead
		if above {
			box.Action = bucket.BoxExtend
		}
	}
	var br bucket.CallResult
	if err := s.callOnce(ctx, now, &box, []string{s.format.boxName(call.Box)}, &br); err != nil {
		return failedStep(err, applied)
	}
	res.Expires, res.Removed = br.Expires, br.Removed
	return nil
}

// failedStep is the error of a call applied in steps whose step failed
// with err: once an earlier step was applied, the call changed something,
// and the error no longer says it did not.
func failedStep(err error, applied bool) error {
	if !applied {
		return err
	}
	return fmt.Errorf("redis source: call across slots: a step failed after earlier steps were applied: %s", err.Error())
}
