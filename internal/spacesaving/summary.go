package spacesaving

import (
	"cmp"
	"slices"
)

// Summary is what a sketch, or a merge of sketches, says of its stream:
// counters sorted by Count, most first (ties by ID), the Floor an item
// not listed may have reached, and the stream's Total.
type Summary struct {
	Counters []Counter `json:"counters"`
	Floor    uint64    `json:"floor"`
	Total    uint64    `json:"total"`
}

func (s *Summary) sort() {
	slices.SortFunc(s.Counters, func(a, b Counter) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// Merge combines the summaries of disjoint parts of one stream (the time
// buckets of a window, the processes of a fleet), in which one item may
// appear in several. An item's Count is the sum over the parts of its
// Count where it is listed and of the part's Floor where it is not;
// Error likewise. So Count never under-counts and Count − Error never
// over-counts, whatever the parts.
//
// When every part is a sketch of k counters (or a Merge of such), any set
// of at most k items has merged Counts adding up to no more than Total:
// in a part, the items of the set it does not list are matched by as many
// listed items outside the set, each counted at least Floor. Hence, for
// k > 100, an item with at least 1% of Total is among the 100 highest
// Counts: otherwise those 100 and it, 101 items of at least Total/100
// each, would add up to more than Total.
func Merge(parts ...Summary) Summary {
	switch len(parts) {
	case 0:
		return Summary{}
	case 1:
		out := parts[0]
		out.Counters = slices.Clone(out.Counters)
		return out
	}
	var out Summary
	seen := make(map[string]int)
	for _, p := range parts {
		out.Total += p.Total
		out.Floor += p.Floor
		for _, c := range p.Counters {
			if _, ok := seen[c.ID]; !ok {
				seen[c.ID] = len(out.Counters)
				out.Counters = append(out.Counters, Counter{ID: c.ID})
			}
		}
	}
	listed := make([]bool, len(out.Counters))
	for _, p := range parts {
		clear(listed)
		for _, c := range p.Counters {
			i := seen[c.ID]
			if listed[i] {
				continue // a part lists an item once; a bad part is not trusted twice
			}
			listed[i] = true
			out.Counters[i].Count += c.Count
			out.Counters[i].Error += c.Error
		}
		if p.Floor == 0 {
			continue
		}
		for i := range out.Counters {
			if !listed[i] {
				out.Counters[i].Count += p.Floor
				out.Counters[i].Error += p.Floor
			}
		}
	}
	out.sort()
	return out
}

// Concat combines summaries of streams that share no item (the shards of
// a sketch split by a hash of the item): counters side by side, and as
// Floor the largest, since an item not listed belongs to one of them.
func Concat(parts ...Summary) Summary {
	var out Summary
	n := 0
	for _, p := range parts {
		n += len(p.Counters)
	}
	out.Counters = make([]Counter, 0, n)
	for _, p := range parts {
		out.Counters = append(out.Counters, p.Counters...)
		out.Floor = max(out.Floor, p.Floor)
		out.Total += p.Total
	}
	out.sort()
	return out
}

// Top keeps the n highest counters. An item dropped may have reached the
// highest dropped Count, so the Floor rises to it: the summary stays an
// upper bound for every item.
func (s Summary) Top(n int) Summary {
	if n < 0 || len(s.Counters) <= n {
		return s
	}
	s.Floor = max(s.Floor, s.Counters[n].Count)
	s.Counters = s.Counters[:n:n]
	return s
}
