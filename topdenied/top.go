package topdenied

import (
	"cmp"
	"context"
	"slices"

	"github.com/limiter-dev/limiter/internal/spacesaving"
)

// Entry is one id of a top list.
type Entry struct {
	Limit string
	ID    string
	// Denied is never under the id's denials in the window, and Denied −
	// Error never over them.
	Denied uint64
	Error  uint64
}

// Top lists the ids denied most over the views (one per process), most
// first, at most n: those of limit, or with limit "" those of every limit.
// The views count disjoint streams; an id is summed over them
// (spacesaving.Merge).
func Top(views []View, limit string, n int) []Entry {
	limits := map[string]struct{}{}
	for _, v := range views {
		for l := range v {
			if limit == "" || l == limit {
				limits[l] = struct{}{}
			}
		}
	}
	var out []Entry
	for l := range limits {
		parts := make([]spacesaving.Summary, 0, len(views))
		for _, v := range views {
			if s, ok := v[l]; ok {
				parts = append(parts, s)
			}
		}
		for _, c := range spacesaving.Merge(parts...).Top(n).Counters {
			out = append(out, Entry{Limit: l, ID: c.ID, Denied: c.Count, Error: c.Error})
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := cmp.Compare(b.Denied, a.Denied); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Limit, b.Limit); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// Lister answers the top list of a window: this process's (a Recorder) or
// the fleet's (a Fleet).
type Lister interface {
	Top(ctx context.Context, limit string, w Window) ([]Entry, error)
}

// Top lists this process's ids denied most in w, at most MaxList.
func (r *Recorder) Top(_ context.Context, limit string, w Window) ([]Entry, error) {
	return Top([]View{r.View(w)}, limit, MaxList), nil
}
