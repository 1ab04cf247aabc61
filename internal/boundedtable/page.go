package boundedtable

// KeyAt returns the key held at position p, rebuilt from its ident: the
// inline words hold a short key's bytes (KeyOf), the arena a long one's.
// It allocates the returned string; tables read keys back only to show
// them (a listing of a box), never on a decision's path.
func (k *Keys) KeyAt(p int) string {
	id := k.ids[p]
	n := InlineLen(id.meta)
	if n < 0 {
		return string(k.arena[id.k0 : id.k0+id.k1])
	}
	var b [MaxInline]byte
	switch {
	case n >= 8:
		putWord(b[n-8:], id.k1) // the last 8 bytes, then the first 8 over them
		putWord(b[:8], id.k0)
	case n >= 4:
		putHalf(b[n-4:], uint32(id.k0>>32))
		putHalf(b[:4], uint32(id.k0))
	case n > 0:
		b[n-1] = byte(id.k0 >> 16)
		b[n/2] = byte(id.k0 >> 8)
		b[0] = byte(id.k0)
	}
	return string(b[:n])
}

func putWord(b []byte, w uint64) {
	_ = b[7]
	for i := range 8 {
		b[i] = byte(w >> (8 * i))
	}
}

func putHalf(b []byte, w uint32) {
	_ = b[3]
	for i := range 4 {
		b[i] = byte(w >> (8 * i))
	}
}

// KeyAt returns the key of the entry at position p.
func (e *Expiry[V]) KeyAt(p int) string { return e.keys.KeyAt(p) }

// Page visits, from position before−1 down to 0, the entries whose
// expiry is after now: visit is called for each, in that order, until it
// was called max times or scan positions were looked at. It returns the
// position a next page starts before (the lowest one looked at), 0 when
// every position was looked at. A before above Len() starts at the end.
//
// Walking down is what lets a listing go on between pages while entries
// come and go, with no more than a position to remember: a removal moves
// the last entry into the freed position, and the last entry is at or
// above next unless every entry is below it, so an entry below next stays
// below next; an entry added goes to the end. So every entry held from a
// listing's first page to its last is visited at least once, as Redis's
// SCAN promises; an entry moved down from the part already listed is
// visited again, and one added meanwhile may or may not be.
func (e *Expiry[V]) Page(before int, now int64, max, scan int, visit func(p int)) (next int) {
	p := min(before, e.Len())
	for n, looked := 0, 0; p > 0 && n < max && looked < scan; looked++ {
		p--
		if e.exp[p] > now {
			visit(p)
			n++
		}
	}
	return p
}
