package memory

import (
	"sync"

	"github.com/limiter-dev/limiter/source/memory/internal/table"
)

// shard is one lock's worth of buckets.
type shard struct {
	mu      sync.Mutex
	buckets table.Table
	// The fields fill 128 bytes, two cache lines, so that two cores
	// working on neighbouring shards never write to the same line; a field
	// more needs padding to 192. TestShardIsCacheLinePadded keeps it so.
}
