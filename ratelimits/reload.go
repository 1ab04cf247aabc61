package ratelimits

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// AlgorithmChange is a name (an enum: what bucket keys are made of) whose
// algorithm a new configuration changes. OldLimit and NewLimit are its
// spellings in the two configurations, which differ when it was renamed.
type AlgorithmChange struct {
	Name     Name
	OldLimit string
	NewLimit string
	Old      Algorithm
	New      Algorithm
}

// Reason says what changes and what to do instead, without the name,
// which a configuration problem gives apart, at the line that changes it.
func (c *AlgorithmChange) Reason() string {
	renamed := ""
	if c.OldLimit != c.NewLimit {
		renamed = fmt.Sprintf(" (named %s in the running configuration)", c.OldLimit)
	}
	return fmt.Sprintf("the algorithm of enum %d%s cannot change from %s to %s on a reload: the buckets stored under that enum hold %s state, which must never be read as %s state; to count with %s, declare a new name with a new enum instead (its buckets start empty), and keep this name %s or remove it",
		c.Name, renamed, c.Old, c.New, c.Old, c.New, c.New, c.Old)
}

// AlgorithmChanges lists, by enum, the names that count with one algorithm
// in new and another in old, or in any configuration old succeeded
// (Succeed): a name whose limits a reload removed keeps its buckets, so
// bringing it back with another algorithm is a change too. A name without
// limits in new stores nothing and is not compared.
//
// A reload must refuse new unless the list is empty: the state under a
// name's bucket keys was written by the old algorithm (a GCRA TAT, or a
// window's counts), and reading it as another's would decide on nonsense.
// A limit that must count another way gets a new name, with a new enum,
// so that its buckets start empty.
func AlgorithmChanges(old, new *Config) []AlgorithmChange {
	if old == nil || new == nil {
		return nil
	}
	var changes []AlgorithmChange
	for _, name := range slices.Sorted(maps.Keys(new.limits)) {
		n := new.limits[name]
		was, ok := old.countedWith(name)
		if !n.set || !ok || was == n.algorithm {
			continue
		}
		changes = append(changes, AlgorithmChange{
			Name:     name,
			OldLimit: old.limitName(name),
			NewLimit: new.limitName(name),
			Old:      was,
			New:      n.algorithm,
		})
	}
	return changes
}

// countedWith returns the algorithm name's buckets were last counted with
// under c: its limits' in c, else the one recorded from a configuration c
// succeeded.
func (c *Config) countedWith(name Name) (Algorithm, bool) {
	if nl := c.limits[name]; nl.set {
		return nl.algorithm, true
	}
	a, ok := c.counted[name]
	return a, ok
}

// Succeed returns new as the successor of old, for a reload whose
// AlgorithmChanges were none: a copy of new that also remembers the algorithm of every enum
// old counted with (or any configuration before it), so that removing a
// name's limits in one reload and bringing them back with another
// algorithm in the next is refused like a change in one step. Neither
// argument is modified.
func Succeed(old, new *Config) *Config {
	if old == nil || new == nil {
		return new
	}
	next := *new
	next.counted = maps.Clone(old.counted)
	if next.counted == nil {
		next.counted = make(map[Name]Algorithm, len(old.limits))
	}
	for name, nl := range old.limits {
		if nl.set {
			next.counted[name] = nl.algorithm
		}
	}
	return &next
}

// limitName returns the spelling of name in c, or its number when c does
// not know it.
func (c *Config) limitName(name Name) string {
	if i, ok := slices.BinarySearchFunc(c.names, name, func(n NameInfo, t Name) int { return cmp.Compare(n.Name, t) }); ok {
		return c.names[i].Limit
	}
	return fmt.Sprintf("enum %d", name)
}
