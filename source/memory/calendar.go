package memory

import (
	"strconv"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// periodKey is where a calendar op's counter is stored at now: its
// bucket key, then its calendar's tag and the start (unix ms) of the
// period now is in. A counter is identified by its period word, zone and
// start, so a counter of another period, or of a word or zone a reload
// has since changed, is another entry: never read, and found again where
// a reload goes back to it within its period, as on Redis. Each entry
// expires with its period. The entry is found under the hash of the
// bucket key, so that an op's shard is its key's whatever its algorithm.
func periodKey(now int64, op *bucket.Op) string {
	var buf [128]byte
	key := append(buf[:0], op.Key...)
	key = strconv.AppendInt(append(key, '@'), op.Calendar.Tag, 10)
	key = strconv.AppendInt(append(key, '@'), op.Periods.At(bucket.Millis(now)).Start, 10)
	return string(key)
}
