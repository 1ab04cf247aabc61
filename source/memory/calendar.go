package memory

import (
	"slices"
	"strconv"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// periodKeys returns ops with each calendar op's key naming the period it
// counts in at now: the bucket key, then its calendar's tag and the
// period's start (unix ms). A counter is identified by its period word,
// zone and start, so a counter of another period, or of a word or zone a
// reload has since changed, is another entry: never read, and found again
// where a reload goes back to it within its period, as on Redis. Each
// entry expires with its period. ops itself is returned, unchanged, when
// it has no calendar op; otherwise a copy, since ops is the caller's.
func periodKeys(now int64, ops []bucket.Op) []bucket.Op {
	var out []bucket.Op
	for i := range ops {
		op := &ops[i]
		if op.Algorithm != bucket.Calendar {
			continue
		}
		if out == nil {
			out = slices.Clone(ops)
		}
		p := op.Periods.At(msFloor(now))
		key := make([]byte, 0, len(op.Key)+42)
		key = append(key, op.Key...)
		key = append(strconv.AppendInt(append(key, '@'), op.Calendar.Tag, 10), '@')
		out[i].Key = string(strconv.AppendInt(key, p.Start, 10))
	}
	if out == nil {
		return ops
	}
	return out
}

// msFloor is unix ns in whole milliseconds, rounded down, as the calendar
// arithmetic reads now.
func msFloor(ns int64) int64 {
	ms := ns / 1e6
	if ns%1e6 < 0 {
		ms--
	}
	return ms
}
