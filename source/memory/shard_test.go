package memory

import (
	"testing"
	"unsafe"
)

// Shards sit side by side in one slice; each must fill whole cache lines
// or two cores locking neighbouring shards slow each other down.
func TestShardIsCacheLinePadded(t *testing.T) {
	if size := unsafe.Sizeof(shard{}); size%64 != 0 {
		t.Fatalf("a shard is %d bytes; pad it to a multiple of 64", size)
	}
}
