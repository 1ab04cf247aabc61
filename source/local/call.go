package local

import (
	"context"
	"errors"
	"fmt"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// ErrNoBoxCall is the error of a box removal, or of an add that shortens
// an entry, on a limit above 0 when the source syncs rate counters and
// boxes but offers no ERL call to apply it with.
var ErrNoBoxCall = errors.New("local: the source cannot remove or shorten box entries")

// caller is the shared source's ERL call (ratelimits.Source.Call).
type caller interface {
	Call(ctx context.Context, now int64, call *bucket.Call, res *bucket.CallResult) error
}

// call applies an ERL call whose counters and box are all counted here:
// they are read and changed in one locked step (bucket.ApplyCall), and
// pushed at the next sync.
//
// A sync only ever lengthens a stored box entry, so a removal, and an add
// that shortens the entry, of a limit above 0 are applied on the source at
// once (its Call), with the group's cycle held so that no push in flight
// lands after them, and then here. Only those can fail, and then nothing
// changed here.
// A removal reports Removed when the entry was in the box here or on the
// source. A box entry set in another process and not pushed yet is not
// removed: it is a boxing that the removal did not see.
func (l *Layer) call(ctx context.Context, now int64, call *bucket.Call, res *bucket.CallResult) error {
	if call.BoxSyncRate <= 0 || l.rates == nil || (call.Action != bucket.BoxRemove && call.Action != bucket.BoxReplace) {
		l.apply(now, call, res, false)
		return nil
	}
	g := l.groupOf(call.BoxSyncRate)
	ctx, cancel := l.bounded(ctx)
	defer cancel()
	if err := g.lock(ctx); err != nil {
		return err
	}
	defer g.unlock()
	if call.Action == bucket.BoxReplace && call.Until >= l.boxExpires(g, call.Box) {
		l.apply(now, call, res, false) // a later expiry: pushed at the next sync
		return nil
	}
	if l.caller == nil {
		return ErrNoBoxCall
	}
	ctx, stop := context.WithTimeout(ctx, l.syncTimeout(g))
	defer stop()
	var src bucket.CallResult
	boxOnly := bucket.Call{Box: call.Box, Action: call.Action, Until: call.Until, BoxCapacity: call.BoxCapacity, BoxSyncRate: call.BoxSyncRate}
	if err := l.caller.Call(ctx, now, &boxOnly, &src); err != nil {
		action := "replacement"
		if call.Action == bucket.BoxRemove {
			action = "removal"
		}
		return fmt.Errorf("local: applying a box %s on the source: %w", action, err)
	}
	l.apply(now, call, res, true)
	res.Removed = res.Removed || src.Removed
	return nil
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

// apply applies call here, under the locks of its tables. atSource says the
// box change is already on the source: the entry then holds it as read
// from there, with nothing left to push. As in a batch, a counter or box
// entry above 0 is made by its first read; below 0, only by a write.
func (l *Layer) apply(now int64, call *bucket.Call, res *bucket.CallResult, atSource bool) {
	var orderBuf [bucket.MaxCallCounters + 1]lockRef
	var tables [bucket.MaxCallCounters]*table
	order := orderBuf[:0]
	for i := range call.Counters {
		g := l.groupOf(call.Counters[i].SyncRate)
		tables[i] = g.tableOf(call.Counters[i].Key)
		order = append(order, tableLock(g, tables[i]))
	}
	var bt *table
	if call.Action != bucket.BoxNone {
		g := l.groupOf(call.BoxSyncRate)
		bt = g.tableOf(call.Box)
		order = append(order, tableLock(g, bt))
	}
	order = lockAll(order)
	defer unlock(order)

	var counters [bucket.MaxCallCounters]ratecounter.Counter
	var rates [bucket.MaxCallCounters]*rate
	var b *box
	defer func() {
		for _, r := range rates {
			if r != nil {
				r.pinned = false
			}
		}
		if b != nil {
			b.pinned = false
		}
	}()
	for i := range call.Counters {
		cc := &call.Counters[i]
		rates[i] = l.rateOf(tables[i], cc.Key, now, cc.Capacity, cc.SyncRate, cc.SyncRate > 0 || cc.Delta > 0)
		if v := rates[i].view(); v != nil {
			counters[i] = *v
		}
	}
	var old int64
	boxSynced := call.BoxSyncRate > 0
	if bt != nil {
		if b = l.boxOf(bt, call.Box, now, call.BoxCapacity, call.BoxSyncRate, boxSynced); b != nil {
			old = b.expires()
		}
	}
	newBox, writeBox := bucket.ApplyCall(now, call, counters[:len(call.Counters)], old, res)
	s := ratecounter.Second(now)
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
		b = l.boxOf(bt, call.Box, now, call.BoxCapacity, call.BoxSyncRate, true)
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
