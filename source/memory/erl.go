package memory

import (
	"context"
	"fmt"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// Call implements ratelimits.Source: one Edge Rate Limiting call
// (bucket.ApplyCall) as one atomic step, under the locks of the groups of
// its counters and its box entry, taken in the one lock order.
func (s *Source) Call(_ context.Context, now int64, call *bucket.Call, res *bucket.CallResult) error {
	n := len(call.Counters)
	if n > bucket.MaxCallCounters {
		return fmt.Errorf("memory: a call names %d counters, at most %d", n, bucket.MaxCallCounters)
	}
	var hashes [bucket.MaxCallCounters]uint64
	var groupsBuf [bucket.MaxCallCounters + 1]*group
	gs := groupsBuf[:0]
	var counterGroups [bucket.MaxCallCounters]*group
	for i := range call.Counters {
		hashes[i] = s.hash(call.Counters[i].Key)
		counterGroups[i] = s.groups.of(call.Counters[i].Key)
		gs = append(gs, counterGroups[i])
	}
	// A call has a box entry when it acts on one; a Box given with
	// BoxNone is read, as the bucket package's callers may expect.
	hasBox := call.Box != ""
	var boxH uint64
	var boxGroup *group
	if hasBox {
		boxH, boxGroup = s.hash(call.Box), s.groups.of(call.Box)
		gs = append(gs, boxGroup)
	}
	gs = lockGroups(gs)
	defer unlockGroups(gs)

	sec := ratecounter.Second(now)
	var counters [bucket.MaxCallCounters]ratecounter.Counter
	for i := range call.Counters {
		counterGroups[i].rates.Get(call.Counters[i].Key, hashes[i], sec, &counters[i])
	}
	var box int64
	if hasBox {
		box = boxGroup.boxes.Get(call.Box, boxH, now)
	}
	newBox, writeBox := bucket.ApplyCall(now, call, counters[:n], box, res)
	for i := range call.Counters {
		if cc := &call.Counters[i]; cc.Delta > 0 {
			counterGroups[i].rates.Put(cc.Key, hashes[i], &counters[i], sec, capacityOr(cc.Capacity), true)
		}
	}
	if writeBox && hasBox {
		boxGroup.boxes.Put(call.Box, boxH, newBox, now, capacityOr(call.BoxCapacity))
	}
	return nil
}

// ERLStats counts the rate-counter entries and penalty-box entries a
// source holds, over every limit name, and those evicted to stay within
// their limits' capacities. These entries are bounded per name by
// capacity, not by the source's bound on buckets.
type ERLStats struct {
	// Counters and Boxes are the entries held, some of which may have
	// expired since they were last touched and not been forgotten yet.
	Counters, Boxes int
	// CounterEvictions and BoxEvictions count entries removed to make
	// room while they still counted (had a hit in the last minute, or
	// were still in the box).
	CounterEvictions, BoxEvictions uint64
}

// ERLStats returns the source's rate-counter and box entries and their
// evictions, each name read under its lock.
func (s *Source) ERLStats() ERLStats {
	var st ERLStats
	for _, g := range s.groups.all() {
		g.mu.Lock()
		st.Counters += g.rates.Len()
		st.Boxes += g.boxes.Len()
		st.CounterEvictions += g.rates.Evicted()
		st.BoxEvictions += g.boxes.Evicted()
		g.mu.Unlock()
	}
	return st
}
