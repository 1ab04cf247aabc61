package memory

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/limiter-dev/limiter/source/memory/internal/table"
)

// DefaultCapacity is how many entries each rate counter and each penalty
// box holds when an op or a call gives no capacity: the default of a
// limit's capacity in the service's configuration.
const DefaultCapacity = 200_000

// group is one limit name's rate counter and penalty box (the enum part of
// their keys, "<enum>:<id>"), under one lock. Bounding each per name, as
// the capacity of a limit asks, needs every entry of the name in one
// place: shares per shard would make the bound approximate and evict
// entries that the name's bound keeps.
type group struct {
	mu    sync.Mutex
	rates table.Rates
	boxes table.Boxes
	// order is the group's place in the lock order: groups are locked in
	// ascending order, after every shard a call locks.
	order uint32
}

// groups finds the group of a key. The map is replaced, never changed,
// when a name first appears (names are few: one per limit of the
// configuration), so that finding a group takes no lock and allocates
// nothing.
type groups struct {
	byName atomic.Pointer[map[string]*group]
	mu     sync.Mutex // serialises the additions of names
}

// nameOf returns the enum part of a key "<enum>:<id>" (the whole key when
// it has no colon).
func nameOf(key string) string {
	if i := strings.IndexByte(key, ':'); i >= 0 {
		return key[:i]
	}
	return key
}

// of returns the group of key, making it on the first use of its name.
func (g *groups) of(key string) *group {
	name := nameOf(key)
	if m := g.byName.Load(); m != nil {
		if gr, ok := (*m)[name]; ok {
			return gr
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.byName.Load()
	if old != nil {
		if gr, ok := (*old)[name]; ok {
			return gr
		}
	}
	m := make(map[string]*group, 1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	gr := &group{order: uint32(len(m))}
	m[strings.Clone(name)] = gr
	g.byName.Store(&m)
	return gr
}

// find returns the group of the name (a key's enum part), or nil when
// no key of it was ever used; unlike of, it never makes one.
func (g *groups) find(name string) *group {
	if m := g.byName.Load(); m != nil {
		return (*m)[name]
	}
	return nil
}

// all returns every group, in lock order.
func (g *groups) all() []*group {
	m := g.byName.Load()
	if m == nil {
		return nil
	}
	out := make([]*group, 0, len(*m))
	for _, gr := range *m {
		out = append(out, gr)
	}
	slices.SortFunc(out, compareGroups)
	return out
}

func compareGroups(a, b *group) int { return int(a.order) - int(b.order) }

// lockGroups sorts gs into lock order, drops nils and repeats, locks them,
// and returns them for unlockGroups.
func lockGroups(gs []*group) []*group {
	gs = slices.DeleteFunc(gs, func(g *group) bool { return g == nil })
	slices.SortFunc(gs, compareGroups)
	gs = slices.Compact(gs)
	for _, g := range gs {
		g.mu.Lock()
	}
	return gs
}

func unlockGroups(gs []*group) {
	for j := len(gs) - 1; j >= 0; j-- {
		gs[j].mu.Unlock()
	}
}

// capacityOr returns c, or DefaultCapacity when c is not above 0.
func capacityOr(c int) int {
	if c > 0 {
		return c
	}
	return DefaultCapacity
}
