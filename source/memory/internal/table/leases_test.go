package table

import (
	"testing"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/concurrency"
)

// Lease buckets count against the store's capacity with the other kinds,
// are forgotten once their last lease ends, and are evicted like them:
// the one with the least time left goes first.
func TestLeasesShareTheCapacity(t *testing.T) {
	const nowNs = int64(1_000_000) * nsPerMs
	nowMs := bucket.Millis(nowNs)
	var s Store
	s.Init(2)
	lease := func(id string, exp int64) []concurrency.Lease {
		return []concurrency.Lease{{ID: id, Cost: 1, Exp: exp}}
	}
	s.PutLeases("a", lease("1", nowMs+100), nowNs, false)
	s.PutLeases("b", lease("2", nowMs+50), nowNs, false)
	if s.Len() != 2 {
		t.Fatalf("Len = %d, want 2", s.Len())
	}
	if lost := s.PutLeases("c", lease("3", nowMs+200), nowNs, false); !lost {
		t.Error("a third bucket in a store of 2 evicted nothing live")
	}
	if got := s.GetLeases("b", nowNs); got != nil {
		t.Errorf("b, closest to expiring, is still there: %+v", got)
	}
	if got := s.GetLeases("a", nowNs); len(got) != 1 {
		t.Errorf("a = %+v, want its lease", got)
	}
	// Once its lease ends, a reads as empty and is forgotten.
	if got := s.GetLeases("a", nowNs+100*nsPerMs); got != nil || s.Len() != 1 {
		t.Errorf("a after its lease ended = %+v, Len %d; want nothing, 1", got, s.Len())
	}
	// A pinned bucket is kept while an unpinned one can go.
	s.PutLeases("d", lease("4", nowMs+10), nowNs, true)
	s.PutLeases("e", lease("5", nowMs+300), nowNs, false)
	if s.GetLeases("d", nowNs) == nil {
		t.Error("the pinned bucket d was evicted")
	}
	if got := s.TakeLeases("d", nowNs); len(got) != 1 || s.GetLeases("d", nowNs) != nil {
		t.Errorf("TakeLeases(d) = %+v, and d is still there", got)
	}
}

// An empty lease set is never stored, and removes a stored one, whatever
// the clock, also before 1970, where the expiry of no lease (0) is after
// now.
func TestEmptyLeasesAreNotStored(t *testing.T) {
	for _, nowNs := range []int64{-3600 * 1000 * nsPerMs, 1_000_000 * nsPerMs} {
		var s Store
		s.Init(4)
		s.PutLeases("empty", nil, nowNs, false)
		if s.Len() != 0 {
			t.Errorf("now %d: an empty lease set was stored (Len %d)", nowNs, s.Len())
		}
		s.PutLeases("a", []concurrency.Lease{{ID: "1", Cost: 1, Exp: bucket.Millis(nowNs) + 100}}, nowNs, false)
		s.PutLeases("a", nil, nowNs, false)
		if s.Len() != 0 {
			t.Errorf("now %d: emptying a bucket kept it (Len %d)", nowNs, s.Len())
		}
	}
}
