package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
)

// ErrRollback means a denied multi-slot batch could not give back the
// tokens its earlier slots had spent: they stay spent and refill as usual.
var ErrRollback = errors.New("redis source: could not give back a denied batch's tokens")

// A Redis script may only touch keys of one hash slot on a cluster, so a
// batch whose keys span slots is applied as one script call per slot, in
// ascending slot order. What this keeps (docs/redis.md says it for users):
//
//   - Each slot's part is atomic, and a batch within one slot is exactly
//     as atomic as on one Redis.
//   - No limit is ever overshot: every token is taken by an atomic check
//     of its own bucket.
//   - A denied batch leaves no trace in GCRA buckets and window counters:
//     once a part is denied, the later parts are decided without writing
//     them, and the tokens the earlier parts took are given back: each TAT
//     moves back by exactly as much as the spend moved it forward, and
//     each window counter loses the hits the spend added to the same
//     window (a refund, never a restore of the old value, so concurrent
//     spenders on those buckets are never harmed). A window
//     counter that another process has meanwhile moved on to the next
//     window (its now already there) has no current window at this now:
//     the give-back finds nothing to take from, and the hits stay counted
//     as the previous window's until that window no longer counts.
//   - What a denied batch writes is written by every part, and never
//     given back: a rate-counter op's hits and a box entry are decided by
//     their op alone, never by the batch's verdict (bucket.SpendBatch), so
//     each part writes exactly those of its ops, denied or not, and the
//     parts after a denied one (opCheck) write them too.
//   - Between a part's spend and its give-back, other requests see those
//     tokens taken and may be denied for it. If this process dies in that
//     window, or Redis fails, the tokens stay spent and refill normally.
//
// Applying parts in one global order means batches over the same buckets
// meet their contention at the same first bucket: a batch that got past it
// is not starved later by batches that have not.

// slotGroups returns the indexes of keys grouped by hash slot, the groups
// in ascending slot order and each group in batch order.
func slotGroups(keys []string) [][]int {
	order := make([]int, len(keys))
	slots := make([]int, len(keys))
	for i, k := range keys {
		order[i], slots[i] = i, Slot(k)
	}
	slices.SortStableFunc(order, func(a, b int) int { return slots[a] - slots[b] })
	var groups [][]int
	for start := 0; start < len(order); {
		end := start + 1
		for end < len(order) && slots[order[end]] == slots[order[start]] {
			end++
		}
		groups = append(groups, order[start:end])
		start = end
	}
	return groups
}

// sameSlot reports whether all keys hash to one slot.
func sameSlot(keys []string) bool {
	if len(keys) < 2 {
		return true
	}
	first := Slot(keys[0])
	for _, k := range keys[1:] {
		if Slot(k) != first {
			return false
		}
	}
	return true
}

// part is a batch's share in one slot, and the states its call read. For
// a part to give back, amounts holds what each of its spends took: how far
// it moved a TAT, or how many hits it added to a window counter.
type part struct {
	ops     []bucket.Op
	keys    []string
	boxes   []string
	states  []bucket.State
	amounts []int64
}

// gather makes the part of the ops at idx; boxes, like a scriptCall's, is
// nil when no op has a box.
func gather(idx []int, ops []bucket.Op, keys, boxes []string) part {
	p := part{ops: make([]bucket.Op, len(idx)), keys: make([]string, len(idx)), states: make([]bucket.State, len(idx))}
	for j, i := range idx {
		p.ops[j], p.keys[j] = ops[i], keys[i]
		if boxes != nil && boxes[i] != "" {
			if p.boxes == nil {
				p.boxes = make([]string, len(idx))
			}
			p.boxes[j] = boxes[i]
		}
	}
	return p
}

// spendSlots applies a batch spanning slots part by part, and gives back
// the parts already spent when a later part is denied.
func (s *Source) spendSlots(ctx context.Context, now int64, ops []bucket.Op, keys, boxes []string, outcomes []bucket.Outcome) error {
	_, err := s.spendSlotsInto(ctx, now, ops, keys, boxes, make([]bucket.State, len(ops)), outcomes)
	return err
}

// spendSlotsInto is spendSlots that fills states with the states read and
// returns the batch's verdict.
func (s *Source) spendSlotsInto(ctx context.Context, now int64, ops []bucket.Op, keys, boxes []string, states []bucket.State, outcomes []bucket.Outcome) (bool, error) {
	var spent []part // what the applied parts wrote, to give back if denied
	denied := false
	for _, idx := range slotGroups(keys) {
		p := gather(idx, ops, keys, boxes)
		c := &scriptCall{op: opSpend, now: now, keys: p.keys, boxes: p.boxes, ops: p.ops}
		if denied {
			// An earlier part was denied: decide, and write only what a
			// denied batch writes (hits, box entries).
			c.op = opCheck
		}
		r, err := s.run(ctx, c, p.states)
		if err == nil {
			err = checkPart(now, p, r.allowed, &spent, denied)
		}
		if err != nil {
			return false, failedPart(err, s.giveBack(ctx, now, spent))
		}
		denied = denied || !r.allowed
		for j, i := range idx {
			states[i] = p.states[j]
		}
	}
	if bucket.SpendBatch(now, ops, states, outcomes) == denied {
		return false, errors.Join(fmt.Errorf("%w: parts say denied=%v", ErrVerdictMismatch, denied), s.giveBack(ctx, now, spent))
	}
	if denied {
		return false, s.giveBack(ctx, now, spent)
	}
	return true, nil
}

// afterParts is the error of a part that failed with err after n parts
// of its call took effect: past the first, the call changed something
// even when the part did not, so the error no longer says not applied (a
// retry would give back or delete the earlier parts' twice).
func afterParts(n int, err error) error {
	if n == 0 || !errors.Is(err, once.ErrNotApplied) {
		return err
	}
	return fmt.Errorf("redis source: %d parts of the call took effect before one failed: %s", n, err.Error())
}

// failedPart is the error of a batch whose part failed with err after
// giveBack's attempt to return what the earlier parts took. The batch
// changed nothing only if the part did not and every earlier part was
// given back: otherwise err no longer says "not applied".
func failedPart(err, giveBack error) error {
	if giveBack == nil {
		return err
	}
	return fmt.Errorf("%s: %w", err.Error(), giveBack)
}

// checkPart checks a part's verdict against bucket.SpendBatch and, when
// the part was written, records what it spent.
func checkPart(now int64, p part, verdict bool, spent *[]part, readOnly bool) error {
	out := make([]bucket.Outcome, len(p.ops))
	if bucket.SpendBatch(now, p.ops, p.states, out) != verdict {
		return fmt.Errorf("%w: script says allowed=%v", ErrVerdictMismatch, verdict)
	}
	if !verdict || readOnly {
		return nil
	}
	// What a GCRA spend took is how far it moved the TAT (from max(now,
	// TAT), not from a TAT in the past): giving back exactly that restores
	// the bucket as it was. A window
	// spend added its cost to the current window, at the same now as the
	// give-back's. A rate counter's hits are written whatever the batch's
	// fate, so they are not given back; nor is any box entry (the
	// give-back's ops have no box: it neither reads nor writes one). An
	// acquire took a lease, which the give-back releases.
	var w part
	for j, o := range out {
		if !o.Write || p.ops[j].Algorithm == bucket.RateCounter {
			continue
		}
		op := p.ops[j]
		op.Box = ""
		if op.Algorithm == bucket.Concurrency {
			// An acquire took a lease: releasing it gives its slots back.
			op.LeaseAction = bucket.Release
		}
		w.ops = append(w.ops, op)
		w.keys = append(w.keys, p.keys[j])
		if p.ops[j].Algorithm.Counted() || op.Algorithm == bucket.Concurrency {
			w.amounts = append(w.amounts, p.ops[j].Cost)
		} else {
			w.amounts = append(w.amounts, o.New.TAT-max(now, p.states[j].TAT))
		}
	}
	if len(w.keys) > 0 {
		w.states = make([]bucket.State, len(w.keys))
		*spent = append(*spent, w)
	}
	return nil
}

// giveBack refunds what denied parts spent, by cost. It runs to its end
// even when ctx is done (the tokens must come back), bounded by its own
// timeout (finishApart); when ctx ends first, the caller is told
// ErrRollback: the tokens may or may not be back yet.
func (s *Source) giveBack(ctx context.Context, now int64, spent []part) error {
	if len(spent) == 0 {
		return nil
	}
	err := s.finishApart(ctx, func(ctx context.Context) error {
		var errs []error
		for _, p := range spent {
			if _, err := s.run(ctx, &scriptCall{op: opRefund, now: now, keys: p.keys, ops: p.ops, amounts: p.amounts}, p.states); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRollback, err)
	}
	return nil
}

// finishApart runs fn to its end, bounded by the rollback timeout and not
// by ctx: work that must be done once begun (a give-back, an idempotency
// record's write). The caller waits for it only as long as ctx lets it,
// so that its answer still comes within its deadline, and is then told
// ctx's error while fn goes on.
func (s *Source) finishApart(ctx context.Context, fn func(context.Context) error) error {
	s.apartMu.Lock()
	if s.closed {
		s.apartMu.Unlock()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.rollbackTimeout)
		defer cancel()
		return fn(fctx)
	}
	s.apart.Add(1)
	s.apartMu.Unlock()
	done := make(chan error, 1)
	go func() {
		defer s.apart.Done()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.rollbackTimeout)
		defer cancel()
		done <- fn(fctx)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// Work that ended with the deadline still answers for itself.
		select {
		case err := <-done:
			return err
		default:
		}
		return fmt.Errorf("still under way when the call's deadline came: %w", ctx.Err())
	}
}

// refundSlots refunds a batch spanning slots part by part. Each bucket's
// refund is atomic; the batch as a whole is not (nor does a refund need
// to be: it never denies).
func (s *Source) refundSlots(ctx context.Context, now int64, ops []bucket.Op, keys, boxes []string, states []bucket.State) error {
	for n, idx := range slotGroups(keys) {
		p := gather(idx, ops, keys, boxes)
		p.amounts = make([]int64, len(idx))
		for j := range p.ops {
			p.amounts[j] = refundAmount(&p.ops[j])
		}
		if _, err := s.run(ctx, &scriptCall{op: opRefund, now: now, keys: p.keys, boxes: p.boxes, ops: p.ops, amounts: p.amounts}, p.states); err != nil {
			return afterParts(n, err)
		}
		for j, i := range idx {
			states[i] = p.states[j]
		}
	}
	return nil
}

// resetSlots deletes keys spanning slots part by part.
func (s *Source) resetSlots(ctx context.Context, now int64, ops []bucket.Op, keys, boxes []string) (int, error) {
	total := 0
	for n, idx := range slotGroups(keys) {
		p := gather(idx, ops, keys, boxes)
		r, err := s.run(ctx, &scriptCall{op: opReset, now: now, keys: p.keys, boxes: p.boxes, ops: p.ops}, nil)
		if err != nil {
			return total, afterParts(n, err)
		}
		total += r.busy
	}
	return total, nil
}
