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

// However large the bound, shards hold at most maxPerShard buckets each
// (so a table never grows past a size rebuilt in well under a millisecond),
// their number is a power of two, and their capacities add up to the bound
// exactly.
func TestShardsStaySmall(t *testing.T) {
	for _, bound := range []int{1, 63, 64, 1000, 16_384, 1_000_000, 1_048_577, 10_000_000, 100_000_000} {
		s := New(bound)
		n := len(s.shards)
		if n&(n-1) != 0 || uint64(n-1) != s.mask {
			t.Errorf("bound %d: %d shards, mask %#x", bound, n, s.mask)
		}
		total := 0
		for i := range s.shards {
			c := s.shards[i].entries.Capacity()
			if c > maxPerShard+1 {
				t.Errorf("bound %d: a shard of capacity %d", bound, c)
				break
			}
			total += c
		}
		if total != bound {
			t.Errorf("bound %d: capacities add up to %d", bound, total)
		}
	}
}
