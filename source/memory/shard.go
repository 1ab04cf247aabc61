package memory

import (
	"sync"

	"github.com/limiter-dev/limiter/source/memory/internal/table"
)

// shard is one lock's worth of GCRA buckets and window counters.
type shard struct {
	mu      sync.Mutex
	entries table.Store
	// The fields take 232 bytes; the padding fills four cache lines, so
	// that two cores working on neighbouring shards never write to the
	// same line. TestShardIsCacheLinePadded keeps it so.
	_ [24]byte
}
