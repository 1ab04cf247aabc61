package ratelimits

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"
)

// Config is an immutable snapshot of the limits: the known names, each
// name's default limit and its per-id overrides.
//
// Nothing mutates a Config after NewConfig returns it, so it is safe for
// concurrent use without locks; a reload builds a new Config and swaps a
// pointer (Limiter.SetConfig). The configfile package builds one from the
// defaults and overrides files.
type Config struct {
	byLimit map[string]NameInfo // every known name, built-in or declared
	names   []NameInfo          // the same, sorted by enum
	limits  map[Name]nameLimits // names with a default, overrides, or both
	// counted is the algorithm of every enum that had limits in a Config
	// this one succeeded (Succeed), also those without limits here: their
	// buckets may still hold that algorithm's state.
	counted map[Name]Algorithm
}

// nameLimits holds one name's limits. overrides is keyed by canonical
// override id, and its Limits have Override set.
type nameLimits struct {
	def        Limit
	hasDefault bool
	overrides  map[string]Limit
	// algorithm and syncRate belong to the name: the default's, or the
	// first override's when there is no default.
	algorithm Algorithm
	syncRate  time.Duration
	set       bool // algorithm and syncRate are set
	// box says the name has a penalty box: it counts rates, or one of its
	// limits has a penalty. capacity bounds its counters and box in
	// process memory (0: DefaultCapacity).
	box      bool
	capacity int
	// shadow says the name's limits never deny (Limit.Shadow).
	shadow bool
}

// Override is the limit of one subscriber of a name, instead of the
// name's default.
type Override struct {
	// Limit is the limit name, built in or declared.
	Limit string
	// ID is the subscriber, in any spelling the name's id kind accepts for
	// overrides (see IDKind.CanonicalOverrideID).
	ID string
	// Effective is the limit for that subscriber, made with NewLimit or
	// NewWindowLimit, with the algorithm of the name's default. Its
	// SyncRate, Capacity and Shadow are ignored: the name's (the
	// default's) apply.
	Effective Limit
}

// NewConfig builds a Config from code, without files. declared lists the
// names that are not built in: each needs a valid spelling (ValidLimitName),
// an enum from MinDeclaredEnum to MaxDeclaredEnum that no other name has,
// and a Declarable id kind. defaults maps limit names to their default
// limit; a name without one is unlimited except for its overrides. Every
// Limit must come from NewLimit or NewWindowLimit, and every limit of one
// name must have the same algorithm.
//
// Nothing is half-built: a problem with any argument returns every problem
// found, joined, each wrapping ErrInvalidConfig.
func NewConfig(declared []NameInfo, defaults map[string]Limit, overrides []Override) (*Config, error) {
	c := &Config{
		byLimit: make(map[string]NameInfo, len(builtinNames)+len(declared)),
		limits:  make(map[Name]nameLimits, len(defaults)),
	}
	for _, b := range builtinNames {
		c.byLimit[b.Limit] = b
	}
	var errs []error
	enums := make(map[Name]string, len(declared))
	for _, d := range declared {
		if err := c.declare(d, enums); err != nil {
			errs = append(errs, err)
		}
	}
	for _, limit := range slices.Sorted(maps.Keys(defaults)) {
		if err := c.setDefault(limit, defaults[limit]); err != nil {
			errs = append(errs, err)
		}
	}
	for _, o := range overrides {
		if err := c.addOverride(o); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c.names = slices.SortedFunc(maps.Values(c.byLimit), func(a, b NameInfo) int {
		return cmp.Compare(a.Name, b.Name)
	})
	return c, nil
}

// declare adds a declared name; enums maps the enums declared so far to
// their names.
func (c *Config) declare(d NameInfo, enums map[Name]string) error {
	switch _, known := c.byLimit[d.Limit]; {
	case !ValidLimitName(d.Limit):
		return configError("invalid limit name %q: a name starts with a letter, has only letters, digits and underscores, and is at most %d characters", d.Limit, MaxLimitNameLength)
	case known:
		return configError("%s: the name is already known", d.Limit)
	case d.Name < MinDeclaredEnum || d.Name > MaxDeclaredEnum:
		return configError("%s: enum must be from %d to %d, got %d", d.Limit, MinDeclaredEnum, MaxDeclaredEnum, d.Name)
	case enums[d.Name] != "":
		return configError("%s: enum %d is already used by %s", d.Limit, d.Name, enums[d.Name])
	case !d.Kind.Declarable():
		return configError("%s: id kind %s cannot be declared", d.Limit, d.Kind)
	}
	enums[d.Name] = d.Limit
	c.byLimit[d.Limit] = NameInfo{Name: d.Name, Limit: d.Limit, Kind: d.Kind, Declared: true, prefix: keyPrefix(d.Name)}
	return nil
}

// setDefault sets the default limit of a known name.
func (c *Config) setDefault(limit string, l Limit) error {
	info, ok := c.byLimit[limit]
	switch {
	case !ok:
		return configError("%s: %w", limit, ErrUnknownLimit)
	case !l.valid():
		return configError("%s: the default limit was not made with NewLimit or NewWindowLimit", limit)
	case l.Algorithm == Calendar && l.Calendar == nil:
		return configError("%s: a calendar limit's default needs its calendar (NewCalendarLimit)", limit)
	case l.SyncRate > 0 && l.SyncRate < MinSyncRate:
		return configError("%s: sync_rate %s is between 0 and %s", limit, l.SyncRate, MinSyncRate)
	case !l.Algorithm.Windowed() && l.Algorithm != RateCounter && l.SyncRate != 0:
		return configError("%s: sync_rate applies to window and rate-counter limits only", limit)
	case l.Capacity < 0:
		return configError("%s: capacity %d is negative", limit, l.Capacity)
	case l.Capacity > 0 && !l.HasBox():
		return configError("%s: capacity applies to limits with a penalty box only", limit)
	}
	l.Override = false
	nl := c.limits[info.Name]
	nl.def, nl.hasDefault = l, true
	nl.algorithm, nl.syncRate, nl.set = l.Algorithm, l.SyncRate, true
	nl.box, nl.capacity, nl.shadow = l.HasBox(), l.Capacity, l.Shadow
	c.limits[info.Name] = nl
	return nil
}

// addOverride adds the override of one subscriber, refusing a second one
// for the same subscriber however its id is spelt: which of the two wins
// would depend on their order.
func (c *Config) addOverride(o Override) error {
	info, ok := c.byLimit[o.Limit]
	if !ok {
		return configError("%s: %w", o.Limit, ErrUnknownLimit)
	}
	if !o.Effective.valid() {
		return configError("%s: the override of %q was not made with NewLimit or NewWindowLimit", o.Limit, o.ID)
	}
	id, err := info.Kind.CanonicalOverrideID(o.ID)
	if err != nil {
		return configError("%s: override id %q: %w", o.Limit, o.ID, err)
	}
	nl := c.limits[info.Name]
	if !nl.set {
		nl.algorithm, nl.set = o.Effective.Algorithm, true
	}
	if o.Effective.Algorithm != nl.algorithm {
		return configError("%s: the override of %q is %s, but the name is %s: an override cannot change the algorithm", o.Limit, o.ID, o.Effective.Algorithm, nl.algorithm)
	}
	if _, dup := nl.overrides[id]; dup {
		return configError("%s: more than one override for id %q", o.Limit, id)
	}
	if nl.overrides == nil {
		nl.overrides = map[string]Limit{}
	}
	if o.Effective.Algorithm == Calendar {
		// The unit and zone belong to the name: an override gives a count.
		if nl.hasDefault {
			o.Effective.Calendar = nl.def.Calendar
		}
		if o.Effective.Calendar == nil {
			return configError("%s: the override of %q is a calendar limit, but the name has no default to give it a period and zone", o.Limit, o.ID)
		}
	}
	o.Effective.Override = true
	o.Effective.SyncRate = nl.syncRate
	if nl.hasDefault && nl.def.Penalty == 0 && o.Effective.Penalty > 0 {
		// The box belongs to the name: ids without an override would
		// otherwise be judged without the box that ERL calls can fill.
		return configError("%s: the override of %q has a penalty but the default has none: a penalty box belongs to the name, so set penalty on the default (an override may change its length)", o.Limit, o.ID)
	}
	if o.Effective.Penalty == 0 && nl.hasDefault {
		// A GCRA or window override keeps the name's penalty box.
		o.Effective.Penalty = nl.def.Penalty
	}
	o.Effective.Capacity = nl.capacity
	o.Effective.Shadow = nl.shadow
	nl.box = nl.box || o.Effective.HasBox()
	nl.overrides[id] = o.Effective
	c.limits[info.Name] = nl
	return nil
}

// configError is a problem of NewConfig's arguments.
func configError(format string, args ...any) error {
	return fmt.Errorf("%w: %w", ErrInvalidConfig, fmt.Errorf(format, args...))
}

// Lookup finds a name by its spelling: built-in names are always known,
// declared ones when the Config declares them.
func (c *Config) Lookup(limit string) (NameInfo, bool) {
	info, ok := c.byLimit[limit]
	return info, ok
}

// Names returns every known name sorted by enum. The slice is the caller's.
func (c *Config) Names() []NameInfo {
	return slices.Clone(c.names)
}

// Limit returns the effective limit of name for a canonical override id (the
// overrideID of IDKind.Canonicalize): its override if there is one for that
// id, otherwise the default. It returns false when the name has neither,
// which means the name is not limited for this id.
func (c *Config) Limit(name Name, overrideID string) (Limit, bool) {
	nl, ok := c.limits[name]
	if !ok {
		return Limit{}, false
	}
	if l, ok := nl.overrides[overrideID]; ok {
		return l, true
	}
	return nl.def, nl.hasDefault
}

// Algorithm returns how name counts: its limits' algorithm, GCRA for a
// name without any.
func (c *Config) Algorithm(name Name) Algorithm {
	return c.limits[name].algorithm
}

// SyncRate returns name's sync_rate (0 for a name without limits).
func (c *Config) SyncRate(name Name) time.Duration {
	return c.limits[name].syncRate
}

// HasBox reports whether name has a penalty box: it is a rate counter, or
// one of its limits has a penalty.
func (c *Config) HasBox(name Name) bool {
	return c.limits[name].box
}

// Capacity returns how many entries each counter and box of name holds in
// process memory.
func (c *Config) Capacity(name Name) int {
	if n := c.limits[name].capacity; n > 0 {
		return n
	}
	return DefaultCapacity
}

// Shadow reports whether name's limits are shadow limits (Limit.Shadow):
// decided and counted, never denying.
func (c *Config) Shadow(name Name) bool {
	return c.limits[name].shadow
}

// Default returns the default limit of name, false when it has none.
func (c *Config) Default(name Name) (Limit, bool) {
	nl := c.limits[name]
	return nl.def, nl.hasDefault
}

// OverrideCount returns how many ids have an override for name.
func (c *Config) OverrideCount(name Name) int {
	return len(c.limits[name].overrides)
}

// Overrides yields each override of name, by its canonical id, in no
// particular order.
func (c *Config) Overrides(name Name) iter.Seq2[string, Limit] {
	return maps.All(c.limits[name].overrides)
}
