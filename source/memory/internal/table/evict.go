package table

// forgetExpired looks at the next two positions of a sweep that goes round
// the table and drops the expired entries there. Called on every insert
// into the shard, it visits every position once per half as many inserts
// as the table has positions, so a table holds few expired entries without
// a background sweeper; the capacity bound holds regardless.
func (t *Table[V]) forgetExpired(now int64) {
	for range 2 {
		if t.sweep >= len(t.table) {
			t.sweep = 0
			if len(t.table) == 0 {
				return
			}
		}
		if sl := &t.table[t.sweep]; sl.meta != 0 && sl.exp <= now {
			// The entry shifted into this position by the removal is
			// looked at by a later sweep.
			t.removeAt(t.sweep)
		}
		t.sweep++
	}
}

// evictSample is how many entries of a table eviction compares. The more
// it compares, the closer its choice comes to the entry with the least
// state in the whole table; eight find one in the least-filled eighth
// about two times in three (1 - (7/8)^8), at a cost that stays within a
// few adjacent cache lines.
const evictSample = 8

// candidate returns the entry of t that eviction should take: it looks at
// the entries in the slots from the hand on until it has seen evictSample
// of them, and returns the first expired one among them (expired), whose
// loss no answer can tell, or else the one with the earliest expiry, with
// that expiry. A pinned entry is passed over; only when the sample holds
// nothing else is the earliest pinned one returned (isPinned), so that the
// bound holds even when a batch has more keys in the shard than its
// capacity. t must hold an entry.
//
// Where it looks matters to the table as much as what it chooses. The
// sampled slots are adjacent, so memory serves them in a few lines, but
// the hand then moves on by stride, not past them: a full table evicts
// one entry per insert, and evicting slot after slot would empty one
// stretch of the table while new entries land all over it, packing the
// rest into long probe runs. And the sample starts at the first entry
// the hand reaches, not wherever the hand stands: that would favour the
// entries just after empty slots, emptying the sparse parts of the table
// while inserts go to the ends of its long runs
// (TestChurnKeepsProbesShort). From an entry, each entry is in the sample
// of as many starts as any other. Among equal expiries the one holding
// fewer hits is chosen (window counters of one limit written in the same
// window expire together, whatever they counted), and among those the
// first, which is the entry the hand reached.
func (t *Table[V]) candidate(now int64) (i int, exp int64, isPinned, expired bool) {
	n := len(t.table)
	if t.hand >= n {
		t.hand = 0
	}
	for t.table[t.hand].meta == 0 {
		t.hand = t.step(t.hand)
	}
	i = t.hand
	t.hand = t.step(t.hand)
	best, fallback := None, None
	var bestExp, fallbackExp int64
	for seen, k := 0, 0; seen < evictSample && k < n; k++ {
		sl := &t.table[i]
		switch {
		case sl.meta == 0:
		case sl.meta&pinned != 0:
			// Never expired: get removes an expired entry before it is
			// pinned, and a write of an expired one removes it.
			if fallback == None || sl.exp < fallbackExp {
				fallback, fallbackExp = i, sl.exp
			}
		case sl.exp <= now:
			return i, sl.exp, false, true
		default:
			if best == None || sl.exp < bestExp || (sl.exp == bestExp && sl.val.hits() < t.table[best].val.hits()) {
				best, bestExp = i, sl.exp
			}
			seen++
		}
		if i++; i == n {
			i = 0
		}
	}
	if best == None {
		return fallback, fallbackExp, true, false
	}
	return best, bestExp, false, false
}

// step is the position after i in the order the eviction hand goes round
// the table.
func (t *Table[V]) step(i int) int {
	if i += t.stride; i >= len(t.table) {
		i -= len(t.table)
	}
	return i
}

// strideFor returns a step near 0.618 of n that shares no factor with n, so
// that stepping by it from any position visits all n positions before it
// comes back.
func strideFor(n int) int {
	if n <= 2 {
		return 1
	}
	stride := n * 618 / 1000
	for gcd(stride, n) != 1 {
		stride++
	}
	return stride
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
