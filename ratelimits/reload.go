package ratelimits

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// ErrAlgorithmChanged is wrapped by CheckReload's error: a new
// configuration would count a name's buckets with another algorithm than
// the one in use.
var ErrAlgorithmChanged = errors.New("a limit's algorithm cannot change on reload")

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

// Error says which name changes, what changes and what to do instead.
func (c *AlgorithmChange) Error() string {
	return c.NewLimit + ": " + c.Reason()
}

// Reason is Error without the name in front, for messages that give the
// name apart.
func (c *AlgorithmChange) Reason() string {
	renamed := ""
	if c.OldLimit != c.NewLimit {
		renamed = fmt.Sprintf(" (named %s in the running configuration)", c.OldLimit)
	}
	return fmt.Sprintf("the algorithm of enum %d%s cannot change from %s to %s on a reload: the buckets stored under that enum hold %s state, which must never be read as %s state; to count with %s, declare a new name with a new enum instead (its buckets start empty), and keep this name %s or remove it",
		c.Name, renamed, c.Old, c.New, c.Old, c.New, c.New, c.Old)
}

// Unwrap returns ErrAlgorithmChanged.
func (c *AlgorithmChange) Unwrap() error { return ErrAlgorithmChanged }

// AlgorithmChanges lists, by enum, the names that count with one algorithm
// in old and another in new. Only names that have limits (a default or an
// override) in both are compared: a name without any stores nothing while
// it is in use.
func AlgorithmChanges(old, new *Config) []AlgorithmChange {
	if old == nil || new == nil {
		return nil
	}
	var changes []AlgorithmChange
	for _, name := range slices.Sorted(maps.Keys(new.limits)) {
		o, n := old.limits[name], new.limits[name]
		if !o.set || !n.set || o.algorithm == n.algorithm {
			continue
		}
		changes = append(changes, AlgorithmChange{
			Name:     name,
			OldLimit: old.limitName(name),
			NewLimit: new.limitName(name),
			Old:      o.algorithm,
			New:      n.algorithm,
		})
	}
	return changes
}

// CheckReload refuses to replace old with new when new changes the
// algorithm of a name that keeps its enum: the state stored under the
// name's bucket keys was written by the old algorithm (a GCRA TAT, or a
// window's counts), and reading it as another's would decide on nonsense.
// A limit that must count another way gets a new name, with a new enum, so
// that its buckets start empty. The error joins one *AlgorithmChange per
// such name, each wrapping ErrAlgorithmChanged; nil means new may be used.
func CheckReload(old, new *Config) error {
	changes := AlgorithmChanges(old, new)
	errs := make([]error, len(changes))
	for i := range changes {
		errs[i] = &changes[i]
	}
	return errors.Join(errs...)
}

// limitName returns the spelling of name in c, or its number when c does
// not know it.
func (c *Config) limitName(name Name) string {
	if i, ok := slices.BinarySearchFunc(c.names, name, func(n NameInfo, t Name) int { return cmp.Compare(n.Name, t) }); ok {
		return c.names[i].Limit
	}
	return fmt.Sprintf("enum %d", name)
}
