package boundedtable

// Recency is a table of entries, each a key and a value V, in the order
// they were last touched: Add makes an entry the newest, Touch makes it
// the newest again, and Oldest is the one a full table evicts. Its zero
// value holds nothing.
type Recency[V any] struct {
	keys Keys
	ents []recent[V]
	// head is the newest entry, tail the oldest (0 when the table is
	// empty; see link).
	head, tail link
}

// recent is one entry, beside its key at the same position of the Keys.
// Its links share its memory, so that touching an entry reads nothing
// else. prev is toward head.
type recent[V any] struct {
	val        V
	prev, next link
}

// The list links entries by link: 1 + an entry's position, 0 for none, so
// that the zero Recency and a zero entry are an empty list and an entry
// out of it.
type link int32

func linkTo(p int) link { return link(p + 1) }

func (l link) pos() int { return int(l) - 1 }

// Len returns how many entries r holds.
func (r *Recency[V]) Len() int { return r.keys.Len() }

// Find returns the position of key, whose hash is h, or None.
func (r *Recency[V]) Find(key string, h uint64) int { return r.keys.Find(key, h) }

// At returns the value of the entry at position p, to read or change in
// place (until the next Add or Remove).
func (r *Recency[V]) At(p int) *V { return &r.ents[p].val }

// Add holds key, whose hash is h and which r does not hold, with value v,
// as the newest entry, and returns its position.
func (r *Recency[V]) Add(key string, h uint64, v V) int {
	p := r.keys.Add(key, h)
	r.ents = append(r.ents, recent[V]{val: v})
	r.pushFront(p)
	return p
}

// Touch makes the entry at position p the newest.
func (r *Recency[V]) Touch(p int) {
	if r.head != linkTo(p) {
		r.unlink(p)
		r.pushFront(p)
	}
}

// Oldest returns the position of the least recently touched entry, or
// None when r is empty.
func (r *Recency[V]) Oldest() int { return r.tail.pos() }

// Newest returns the position of the most recently touched entry, or
// None when r is empty.
func (r *Recency[V]) Newest() int { return r.head.pos() }

// Newer returns the position of the entry touched next after the one at
// p, or None when p is the newest.
func (r *Recency[V]) Newer(p int) int { return r.ents[p].prev.pos() }

// Older returns the position of the entry touched last before the one at
// p, or None when p is the oldest.
func (r *Recency[V]) Older(p int) int { return r.ents[p].next.pos() }

// Remove drops the entry at position p, moving the last entry into it.
func (r *Recency[V]) Remove(p int) {
	r.unlink(p)
	last := r.keys.RemoveAt(p)
	if last != p {
		r.ents[p] = r.ents[last]
		r.relink(last, p)
	}
	r.ents[last] = recent[V]{}
	r.ents = shrink(r.ents[:last])
}

// Footprint returns how many entries r's slices and index have room for:
// what its memory is sized by.
func (r *Recency[V]) Footprint() (entries, index int) {
	return cap(r.ents), len(r.keys.index)
}

// relink points the neighbours of the entry moved from position from to
// position to.
func (r *Recency[V]) relink(from, to int) {
	e := &r.ents[to]
	if e.prev != 0 {
		r.ents[e.prev.pos()].next = linkTo(to)
	} else if r.head == linkTo(from) {
		r.head = linkTo(to)
	}
	if e.next != 0 {
		r.ents[e.next.pos()].prev = linkTo(to)
	} else if r.tail == linkTo(from) {
		r.tail = linkTo(to)
	}
}

// unlink takes entry p out of the list.
func (r *Recency[V]) unlink(p int) {
	e := &r.ents[p]
	if e.prev != 0 {
		r.ents[e.prev.pos()].next = e.next
	} else {
		r.head = e.next
	}
	if e.next != 0 {
		r.ents[e.next.pos()].prev = e.prev
	} else {
		r.tail = e.prev
	}
	e.prev, e.next = 0, 0
}

// pushFront makes entry p, out of the list, its head.
func (r *Recency[V]) pushFront(p int) {
	e := &r.ents[p]
	e.prev, e.next = 0, r.head
	if r.head != 0 {
		r.ents[r.head.pos()].prev = linkTo(p)
	} else {
		r.tail = linkTo(p)
	}
	r.head = linkTo(p)
}
