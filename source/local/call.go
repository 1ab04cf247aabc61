package local

import (
	"context"
	"errors"
	"fmt"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// ErrNoBoxCall is the error of a box removal, or of an add that shortens
// an entry, on a limit above 0 when the source syncs rate counters and
// boxes but offers no ERL call to apply it with.
var ErrNoBoxCall = errors.New("local: the source cannot remove or shorten box entries")

// caller is the shared source's ERL call (ratelimits.Source.Call): what a
// removal, or an add that shortens an entry, of a box above 0 is applied
// with at once, since a sync only ever lengthens a stored entry.
type caller interface {
	Call(ctx context.Context, now int64, call *bucket.Call, res *bucket.CallResult) error
}

// Call implements ratelimits.Local: the call's counters and box entry, all
// kept here, are read and changed in one locked step (bucket.ApplyCall).
//
// Hits added to a counter above 0 are pushed at its next sync, as a
// window's are. A box entry above 0 that the call boxes or extends, or
// that an add sets no earlier than this process sees it, is pushed at the
// next sync too: the source keeps the later of its expiry and the pushed
// one, so pushes from any process add up. Two changes cannot be pushed
// that way: a removal, and an add that shortens the entry. Those are
// applied on the source at once (its Call), with the group's cycle held so
// that no push in flight lands after them, and then here; the other
// processes see them at their next sync, when they read the entry back.
// Only those can fail, with an error wrapping
// ratelimits.ErrSourceUnavailable, and then nothing changed here.
// A removal reports Removed when the entry was in the box here or on the
// source. A box entry set in another process and not pushed yet is not
// removed: it is a boxing that the removal did not see.
func (l *Layer) Call(ctx context.Context, now int64, lc ratelimits.LocalCall, res *bucket.CallResult) error {
	call := lc.Call
	if lc.BoxSyncRate <= 0 || l.rates == nil || (call.Action != bucket.BoxRemove && call.Action != bucket.BoxReplace) {
		l.apply(now, lc, res, false)
		return nil
	}
	g := l.groupOf(lc.BoxSyncRate)
	if err := g.lock(ctx); err != nil {
		return fmt.Errorf("%w: %w", ratelimits.ErrSourceUnavailable, err)
	}
	defer g.unlock()
	if call.Action == bucket.BoxReplace && call.Until >= l.boxExpires(g, call.Box) {
		l.apply(now, lc, res, false) // a later expiry: pushed at the next sync
		return nil
	}
	if l.caller == nil {
		return fmt.Errorf("%w: %w", ratelimits.ErrSourceUnavailable, ErrNoBoxCall)
	}
	ctx, cancel := context.WithTimeout(ctx, l.syncTimeout(g))
	defer cancel()
	var src bucket.CallResult
	boxOnly := bucket.Call{Box: call.Box, Action: call.Action, Until: call.Until, BoxCapacity: call.BoxCapacity}
	if err := l.caller.Call(ctx, now, &boxOnly, &src); err != nil {
		return fmt.Errorf("%w: local: applying a box %s on the source: %w", ratelimits.ErrSourceUnavailable, actionName(call.Action), err)
	}
	l.apply(now, lc, res, true)
	res.Removed = res.Removed || src.Removed
	return nil
}

// actionName names a box action for errors.
func actionName(a bucket.BoxAction) string {
	if a == bucket.BoxRemove {
		return "removal"
	}
	return "replacement"
}

// boxExpires is when key leaves g's box as this process sees it (0 when
// it is not in it).
func (l *Layer) boxExpires(g *group, key string) int64 {
	t := g.tableOf(key)
	t.mu.Lock()
	defer t.mu.Unlock()
	if b := t.box(key); b != nil {
		return b.expires()
	}
	return 0
}

// apply applies lc here, under the locks of its tables. atSource says the
// box change is already on the source: the entry then holds it as read
// from there, with nothing left to push.
//
// A counter or box entry of a limit above 0 is made by its first read, so
// that the next cycle reads its totals; below 0, only by a write.
func (l *Layer) apply(now int64, lc ratelimits.LocalCall, res *bucket.CallResult, atSource bool) {
	call := lc.Call
	var orderBuf [bucket.MaxCallCounters + 1]lockRef
	var tables [bucket.MaxCallCounters]*table
	order := orderBuf[:0]
	for i := range call.Counters {
		g := l.groupOf(lc.SyncRates[i])
		tables[i] = g.tableOf(call.Counters[i].Key)
		order = append(order, tableLock(g, tables[i]))
	}
	var bt *table
	if call.Action != bucket.BoxNone {
		g := l.groupOf(lc.BoxSyncRate)
		bt = g.tableOf(call.Box)
		order = append(order, tableLock(g, bt))
	}
	order = lockAll(order)
	defer unlock(order)

	s := ratecounter.Second(now)
	var counters [bucket.MaxCallCounters]ratecounter.Counter
	var rates [bucket.MaxCallCounters]*rate
	for i := range call.Counters {
		cc := &call.Counters[i]
		synced := lc.SyncRates[i] > 0
		r := tables[i].rateOf(cc.Key, now, cc.Capacity, synced || cc.Delta > 0, synced, l.fetch(synced))
		if r != nil {
			r.pinned = true
			if v := r.view(); v != nil {
				counters[i] = *v
			}
		}
		rates[i] = r
	}
	defer func() {
		for _, r := range rates {
			if r != nil {
				r.pinned = false
			}
		}
	}()
	var b *box
	var old int64
	boxSynced := lc.BoxSyncRate > 0
	if bt != nil {
		if b = bt.boxOf(call.Box, now, call.BoxCapacity, boxSynced, boxSynced, l.fetch(boxSynced)); b != nil {
			old = b.expires()
		}
	}
	newBox, writeBox := bucket.ApplyCall(now, call, counters[:len(call.Counters)], old, res)
	for i := range call.Counters {
		if d := call.Counters[i].Delta; d > 0 {
			rates[i].add(s, d)
			tables[i].touch(rates[i])
		}
	}
	if !writeBox {
		return
	}
	if b == nil {
		if newBox <= now {
			return // nothing to remove
		}
		b = bt.boxOf(call.Box, now, call.BoxCapacity, true, boxSynced, l.fetch(boxSynced))
	}
	switch {
	case atSource:
		b.read, b.pending, b.fetched = newBox, 0, true
		if b.read <= now {
			b.read = 0
		}
	case !boxSynced || call.Action == bucket.BoxRemove || newBox < old:
		// Below 0 this is the only expiry there is; above 0 without a
		// source to sync with, likewise.
		b.read, b.pending = 0, newBox
	default:
		b.pending = max(b.pending, newBox)
	}
	if b.expires() <= now && b.inflight == 0 {
		bt.removeBox(b)
		return
	}
	bt.fix(b)
}
