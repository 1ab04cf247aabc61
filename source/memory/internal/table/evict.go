package table

// forgetFull looks at the next two positions of a sweep that goes round the
// table and drops the full buckets there. Called on every insert, it
// visits every position once per half as many inserts as the table has
// positions, so a table holds few full buckets without a background
// sweeper; the capacity bound holds regardless.
func (t *Table) forgetFull(now int64) {
	for range 2 {
		if t.sweep >= len(t.table) {
			t.sweep = 0
			if len(t.table) == 0 {
				return
			}
		}
		if sl := &t.table[t.sweep]; sl.meta != 0 && sl.tat <= now {
			// The bucket shifted into this position by the removal is
			// looked at by a later sweep.
			t.removeAt(t.sweep)
		}
		t.sweep++
	}
}

// evictSample is how many buckets eviction compares. The more it
// compares, the closer its choice comes to the bucket with the least state
// in the whole table; eight find one in the least-filled eighth about two
// times in three (1 - (7/8)^8), at a cost that stays within a few adjacent
// cache lines.
const evictSample = 8

// evict frees room in a table that holds capacity buckets, and reports
// whether the bucket it removed was not full. It looks at the buckets in
// the slots from the hand on until it has seen evictSample of them, and
// removes the first full one among them, whose loss no answer can tell,
// or else the one closest to full: the earliest TAT, the least time to
// refill, so the least an evicted subscriber gains. To push out a
// subscriber who spent a whole burst, new buckets must thus each hold more
// than that subscriber does; a flood of cheap spends on fresh ids evicts
// its own buckets.
//
// Recency plays no part. For subscribers of one limit the earliest TAT is
// the bucket spent on longest ago (it has refilled most), which is what
// least-recently-used eviction would choose; across limits, least state
// lost is the better measure, and a read need not write to its slot.
//
// A pinned bucket is passed over, unless every bucket of the table is
// pinned (a batch with more keys in the shard than its capacity): the
// bound holds even then.
//
// Where it looks matters to the table as much as what it chooses. The
// sampled slots are adjacent, so memory serves them in a few lines, but
// the hand then moves on by stride, not past them: a full table evicts
// one bucket per insert, and evicting slot after slot would empty one
// stretch of the table while new buckets land all over it, packing the
// rest into long probe runs. And the sample starts at the first bucket
// the hand reaches, not wherever the hand stands: that would favour the
// buckets just after empty slots, emptying the sparse parts of the table
// while inserts go to the ends of its long runs
// (TestChurnKeepsProbesShort). From a bucket, each bucket is in the sample
// of as many starts as any other. Among equal TATs the first is chosen,
// which is the bucket the hand reached.
func (t *Table) evict(now int64) (notFull bool) {
	n := len(t.table)
	if t.hand >= n {
		t.hand = 0
	}
	for t.table[t.hand].meta == 0 {
		t.hand = t.step(t.hand)
	}
	i := t.hand
	t.hand = t.step(t.hand)
	best, fallback := None, None
	var bestTAT, fallbackTAT int64
	for seen, k := 0, 0; seen < evictSample && k < n; k++ {
		sl := &t.table[i]
		switch {
		case sl.meta == 0:
		case sl.meta&pinned != 0:
			// Never full: Get removes a full bucket before it is
			// pinned, and a write of a full bucket removes it.
			if fallback == None || sl.tat < fallbackTAT {
				fallback, fallbackTAT = i, sl.tat
			}
		case sl.tat <= now:
			t.removeAt(i)
			t.evicted++
			return false
		default:
			if best == None || sl.tat < bestTAT {
				best, bestTAT = i, sl.tat
			}
			seen++
		}
		if i++; i == n {
			i = 0
		}
	}
	if best == None {
		best = fallback
	}
	t.removeAt(best)
	t.evicted++
	t.evictedNotFull++
	return true
}

// step is the position after i in the order the eviction hand goes round
// the table.
func (t *Table) step(i int) int {
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
