package table

import (
	"slices"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/concurrency"
)

// Leases are one shard's concurrency buckets: per key, its live leases and
// the latest of their expiries (ms), from which the bucket counts
// nothing. Unlike the other kinds a bucket holds a variable number of
// leases (at most its limit's count, 10,000), so the buckets live in a Go
// map rather than in a Table of fixed-size slots; they count against the
// Store's capacity with the other kinds, are forgotten once expired (when
// read, when written expired, and by a sweep each insert moves on), and
// are evicted as the other kinds are (see Store.evict).
type Leases struct {
	byKey map[string]*leaseBucket
}

// leaseBucket is one key's leases, all live when last touched, and the
// latest expiry among them (ms).
type leaseBucket struct {
	leases []concurrency.Lease
	exp    int64
	pinned bool
}

// leaseSweep is how many buckets each insert looks at for expired ones.
const leaseSweep = 2

func (t *Leases) len() int { return len(t.byKey) }

// GetLeases returns key's live leases at now (unix ns), expired ones
// dropped from the stored bucket on the way, and nil when it holds none.
// The slice is the stored one: a caller that changes it stores it back.
func (s *Store) GetLeases(key string, now int64) []concurrency.Lease {
	b, ok := s.leases.byKey[key]
	if !ok {
		return nil
	}
	nowMs := bucket.Millis(now)
	if b.exp <= nowMs {
		delete(s.leases.byKey, key)
		return nil
	}
	b.leases = concurrency.Live(nowMs, b.leases)
	return b.leases
}

// PutLeases stores leases as key's bucket at now, pinned (see Pin) when
// pin is set; a bucket with no live lease is removed instead. It reports
// whether making room evicted an entry that had not expired.
func (s *Store) PutLeases(key string, leases []concurrency.Lease, now int64, pin bool) (evictedNotFull bool) {
	nowMs := bucket.Millis(now)
	exp := concurrency.Expires(leases)
	if len(leases) == 0 {
		// No lease: nothing to keep, whatever the clock (Expires says 0,
		// which is after a time before 1970).
		exp = nowMs
	}
	if b, ok := s.leases.byKey[key]; ok {
		if exp <= nowMs {
			delete(s.leases.byKey, key)
			return false
		}
		b.leases, b.exp = leases, exp
		return false
	}
	if exp <= nowMs {
		return false
	}
	s.forgetExpired(now)
	if s.Len() >= s.capacity {
		evictedNotFull = s.evict(now)
	}
	if s.leases.byKey == nil {
		s.leases.byKey = make(map[string]*leaseBucket)
	}
	s.leases.byKey[key] = &leaseBucket{leases: slices.Clip(leases), exp: exp, pinned: pin}
	return evictedNotFull
}

// PinLeases sets whether key's bucket, if any, may be evicted: a batch
// pins its buckets until it has written them all.
func (s *Store) PinLeases(key string, pin bool) {
	if b, ok := s.leases.byKey[key]; ok {
		b.pinned = pin
	}
}

// TakeLeases removes key's bucket and returns its live leases at now.
func (s *Store) TakeLeases(key string, now int64) []concurrency.Lease {
	leases := s.GetLeases(key, now)
	delete(s.leases.byKey, key)
	return leases
}

// forgetExpired drops the expired buckets among the few that map
// iteration, which starts at a random place, meets first.
func (t *Leases) forgetExpired(nowMs int64) {
	n := 0
	for k, b := range t.byKey {
		if b.exp <= nowMs {
			delete(t.byKey, k)
		}
		if n++; n == leaseSweep {
			return
		}
	}
}

// candidate returns the bucket eviction should take among a sample of
// evictSample buckets (map iteration starts at a random place): the first
// expired one (expired), or the one with the earliest expiry, a pinned
// one only when the sample holds nothing else (isPinned).
func (t *Leases) candidate(nowMs int64) (key string, exp int64, isPinned, expired bool) {
	var fallback string
	var fallbackExp int64
	found, foundFallback, seen := false, false, 0
	for k, b := range t.byKey {
		switch {
		case b.pinned:
			if !foundFallback || b.exp < fallbackExp {
				fallback, fallbackExp, foundFallback = k, b.exp, true
			}
		case b.exp <= nowMs:
			return k, b.exp, false, true
		default:
			if !found || b.exp < exp {
				key, exp, found = k, b.exp, true
			}
			seen++
		}
		if seen == evictSample {
			break
		}
	}
	if !found {
		return fallback, fallbackExp, true, false
	}
	return key, exp, false, false
}

// evictLeases is Store.evict's part for concurrency buckets, once neither
// other kind offered an expired entry: it takes an expired bucket if its
// sample has one (reporting true, and nothing lost), or the sampled
// bucket with the least time left when that is less than the other
// kinds' candidates' (gOK, wOK: each kind has an unpinned candidate with
// that much left, in ns), or when they have none but pinned ones. It
// reports whether it evicted, and whether what it evicted had not
// expired; evict falls back to the other kinds when it did not. A bucket's time left bounds what its holders gain, as for the
// other kinds: its slots free when its last lease would have ended.
func (s *Store) evictLeases(now int64, gOK bool, gLeft int64, wOK bool, wLeft int64) (evicted, notFull bool) {
	nowMs := bucket.Millis(now)
	key, exp, pinned, expired := s.leases.candidate(nowMs)
	if expired {
		delete(s.leases.byKey, key)
		s.evicted++
		return true, false
	}
	others := s.gcra.count+s.windows.count > 0
	left := msLeft(exp, now, nowMs)
	take := !others ||
		(!pinned && !gOK && !wOK) ||
		(!pinned && (!gOK || left < gLeft) && (!wOK || left < wLeft))
	if !take {
		return false, false
	}
	delete(s.leases.byKey, key)
	s.evicted++
	s.evictedNotFull++
	return true, true
}
