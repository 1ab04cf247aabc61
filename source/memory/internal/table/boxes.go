package table

import "github.com/limiter-dev/limiter/internal/boundedtable"

// Boxes is one penalty box of the memory source: its entries, each an
// expiry (unix ns), bounded in number. It does no locking; its owner holds
// the lock that guards it.
//
// A min-heap of the entries by expiry gives the entry with the least time
// left, which is the first to expire: every insert first removes the
// entries that have expired (all at the top of the heap), and at its
// capacity evicts the top, the one with the smallest remaining time (of
// several with the same expiry, any one). An entry read after its expiry
// is forgotten on the spot. An entry, its key and its place in the heap
// take 40 bytes in dense slices (boundedtable.Expiry), plus its word in
// the key index.
type Boxes struct {
	// ents are the entries by expiry; they hold nothing else.
	ents    boundedtable.Expiry[struct{}]
	evicted uint64
}

// Len returns how many entries b holds, some of which may have expired
// since they were last touched.
func (b *Boxes) Len() int { return b.ents.Len() }

// Evicted returns how many entries were removed to stay within capacity.
func (b *Boxes) Evicted() uint64 { return b.evicted }

// Get returns the expiry of key's entry, whose hash is h, or 0 when b
// holds none that is in the box at now. An expired entry is forgotten on
// the spot.
func (b *Boxes) Get(key string, h uint64, now int64) int64 {
	p := b.ents.Find(key, h)
	if p == None {
		return 0
	}
	if exp := b.ents.Expires(p); exp > now {
		return exp
	}
	b.ents.Remove(p)
	return 0
}

// Put stores exp as key's expiry. An expiry not after now removes the
// entry instead. A new entry is inserted within capacity (at least 1): see
// Boxes. Put reports whether it evicted an entry that had not expired.
func (b *Boxes) Put(key string, h uint64, exp, now int64, capacity int) (evicted bool) {
	p := b.ents.Find(key, h)
	switch {
	case exp <= now:
		if p != None {
			b.ents.Remove(p)
		}
		return false
	case p != None:
		b.ents.SetExpiry(p, exp)
		return false
	}
	evicted = b.makeRoom(now, max(capacity, 1))
	b.ents.Add(key, h, exp, struct{}{})
	return evicted
}

// Delete removes key's entry, if b holds one.
func (b *Boxes) Delete(key string, h uint64) {
	if p := b.ents.Find(key, h); p != None {
		b.ents.Remove(p)
	}
}

// makeRoom removes the expired entries, then evicts the entry with the
// least time left while b holds capacity entries or more.
func (b *Boxes) makeRoom(now int64, capacity int) (evicted bool) {
	for p := b.ents.Min(); p != None && b.ents.Expires(p) <= now; p = b.ents.Min() {
		b.ents.Remove(p)
	}
	for b.ents.Len() >= capacity {
		b.ents.Remove(b.ents.Min())
		b.evicted++
		evicted = true
	}
	return evicted
}

// BoxEntry is an entry of a box as Page copies it out.
type BoxEntry struct {
	Key     string
	Expires int64
}

// Page copies out up to max entries in the box at now, from position
// before−1 down (boundedtable.Expiry.Page says why down, and what a
// listing by pages then promises), looking at no more than scan positions
// so that the lock its owner holds is held briefly. It returns the
// position the next page starts before, 0 when the listing is complete.
func (b *Boxes) Page(before int, now int64, max, scan int, out []BoxEntry) ([]BoxEntry, int) {
	next := b.ents.Page(before, now, max, scan, func(p int) {
		out = append(out, BoxEntry{Key: b.ents.KeyAt(p), Expires: b.ents.Expires(p)})
	})
	return out, next
}
