package configfile

import (
	"gopkg.in/yaml.v3"

	"github.com/limiter-dev/limiter/ratelimits"
)

// The fields of a limit in the defaults file. enum and id declare a name
// that is not built in.
var defaultFields = []string{"burst", "count", "period", "window", "rate", "penalty", "enum", "id", "algorithm", "sync_rate", "capacity", "shadow", "timezone"}

// loadDefaults parses the defaults file: a mapping from limit name to limit.
func (l *loader) loadDefaults(file string, data []byte) {
	root, ok := l.parseDocument(file, data)
	switch {
	case !ok:
		l.declarationsUnknown = true
		return
	case root == nil || isNull(root):
		l.add(file, 0, "", "the defaults file is empty: it must define at least one limit")
		return
	case root.Kind != yaml.MappingNode:
		l.add(file, root.Line, "", "the defaults file must be a mapping from limit name to limit, got %s", describe(root))
		l.declarationsUnknown = true
		return
	case len(root.Content) == 0:
		l.add(file, root.Line, "", "the defaults file defines no limits")
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		l.loadDefault(file, root.Content[i], root.Content[i+1], seen)
	}
}

// loadDefault parses one limit of the defaults file. seen maps the names
// already met to their line.
func (l *loader) loadDefault(file string, key, val *yaml.Node, seen map[string]int) {
	name, ok := l.nameKey(file, key)
	if !ok {
		return
	}
	s := scope{l: l, file: file, limit: name}
	if first, dup := seen[name]; dup {
		s.add(key.Line, "duplicate limit name (first defined at line %d)", first)
		return
	}
	seen[name] = key.Line
	if val.Kind != yaml.MappingNode {
		s.add(val.Line, "a limit must be a mapping with burst, count and period (or algorithm, count and period for a window; algorithm, window, rate and penalty for a rate counter; algorithm, count, period and timezone for a calendar limit), got %s", describe(val))
		l.markBroken(name)
		l.unknownAlg[name] = true
		return
	}
	fs := s.fields(val, nil, defaultFields...)
	info, okName := l.defaultName(s, key, fs)
	alg, algLine, okAlg := s.algorithm(key, fs)
	if !okAlg {
		// Which fields the limit must have depends on its algorithm.
		l.unknownAlg[name] = true
		s.checkFields(fs)
		if f, has := fs["capacity"]; has {
			s.capacityValue(f.val)
		}
		return
	}
	l.algs[name] = origin{alg: alg, file: file, line: algLine}
	lim, okLimit := s.readLimit(key, fs, alg)
	syncRate, okSync := s.syncRate(fs, alg)
	capacity, okCapacity := s.capacity(fs, alg)
	shadow, okShadow := s.shadow(fs)
	if okName && okLimit && okSync && okCapacity && okShadow {
		lim.SyncRate, lim.Capacity, lim.Shadow = syncRate, capacity, shadow
		l.defaults[info.Limit] = lim
	}
}

// nameAlgorithm returns the algorithm of a name for its overrides: its
// defaults entry's, GCRA for a built-in name without one, and not ok when
// the defaults entry's algorithm is broken or the name is unknown.
func (l *loader) nameAlgorithm(name string) (ratelimits.Algorithm, bool) {
	if o, ok := l.algs[name]; ok {
		return o.alg, true
	}
	if _, builtin := l.builtin(name); builtin && !l.unknownAlg[name] {
		return ratelimits.GCRA, true
	}
	return 0, false
}

// builtin finds a built-in name by its exact spelling.
func (l *loader) builtin(name string) (ratelimits.NameInfo, bool) {
	b, ok := l.builtins[name]
	return b, ok
}

// markBroken records that a name not built in failed to declare, so that its
// overrides are not reported as overrides of an unknown name.
func (l *loader) markBroken(name string) {
	if _, builtin := l.builtin(name); !builtin {
		l.broken[name] = true
	}
}

// defaultName resolves the name of a defaults entry: a built-in one, whose
// enum and id kind cannot change, or one the entry declares.
func (l *loader) defaultName(s scope, key *yaml.Node, fs map[string]field) (ratelimits.NameInfo, bool) {
	if b, ok := l.builtin(s.limit); ok {
		return b, s.builtinUnchanged(b, fs)
	}
	info, ok := l.declare(s, key, fs)
	if !ok {
		l.broken[s.limit] = true
	}
	return info, ok
}

// builtinUnchanged accepts enum and id on a built-in name only when they
// restate its built-in values: changing them would orphan or corrupt its
// buckets.
func (s scope) builtinUnchanged(b ratelimits.NameInfo, fs map[string]field) bool {
	ok := true
	if f, has := fs["enum"]; has {
		if v, isInt := s.int64Value(f.val, "enum"); !isInt {
			ok = false
		} else if v != int64(b.Name) {
			s.add(f.val.Line, "a built-in limit's enum cannot be changed: it is %d, got %d", b.Name, v)
			ok = false
		}
	}
	if f, has := fs["id"]; has {
		if k, known := ratelimits.ParseIDKind(f.val.Value); !isString(f.val) || !known || k != b.Kind {
			s.add(f.val.Line, "a built-in limit's id kind cannot be changed: it is %s, got %s", b.Kind, describe(f.val))
			ok = false
		}
	}
	return ok
}

// declare registers a name that is not built in, from its enum and id.
func (l *loader) declare(s scope, key *yaml.Node, fs map[string]field) (ratelimits.NameInfo, bool) {
	enumField, hasEnum := fs["enum"]
	if !hasEnum {
		s.add(key.Line, "%s", l.unknownName(s.limit))
		return ratelimits.NameInfo{}, false
	}
	enum, okEnum := s.enum(enumField.val)
	kind, okKind := s.declaredKind(key, fs)
	// An enum given twice is a problem of its own, whatever else is wrong
	// with the entry.
	if prev, used := l.enums[enum]; okEnum && used {
		s.add(enumField.val.Line, "enum %d is already used by %s (line %d)", enum, prev.name, prev.line)
		return ratelimits.NameInfo{}, false
	}
	if !okEnum || !okKind {
		if okEnum {
			// Taken, so that a third entry with the same enum is told.
			l.enums[enum] = declaration{name: s.limit, line: enumField.val.Line}
		}
		return ratelimits.NameInfo{}, false
	}
	info := ratelimits.NameInfo{Name: enum, Limit: s.limit, Kind: kind, Declared: true}
	l.declared = append(l.declared, info)
	l.enums[enum] = declaration{name: s.limit, line: enumField.val.Line}
	l.names[s.limit] = info
	return info, true
}

// enum reads a declared name's enum: 100 or more (below is reserved for
// built-ins), and within 32 bits.
func (s scope) enum(n *yaml.Node) (ratelimits.Name, bool) {
	v, ok := s.int64Value(n, "enum")
	switch {
	case !ok:
		return ratelimits.Unknown, false
	case v < int64(ratelimits.MinDeclaredEnum):
		s.add(n.Line, "enum must be %d or more (1 to %d are reserved for built-in limits), got %d", ratelimits.MinDeclaredEnum, ratelimits.MinDeclaredEnum-1, v)
		return ratelimits.Unknown, false
	case v > int64(ratelimits.MaxDeclaredEnum):
		s.add(n.Line, "enum must be at most %d, got %d", ratelimits.MaxDeclaredEnum, v)
		return ratelimits.Unknown, false
	}
	return ratelimits.Name(v), true
}

// declaredKind reads a declared name's id kind, which must be one of the
// kinds open to declared names.
func (s scope) declaredKind(key *yaml.Node, fs map[string]field) (ratelimits.IDKind, bool) {
	f, ok := fs["id"]
	if !ok {
		s.add(key.Line, "missing id: a declared limit needs an id kind (%s)", declarableKinds)
		return 0, false
	}
	if !isString(f.val) {
		s.add(f.val.Line, "id must be an id kind (%s), got %s", declarableKinds, describe(f.val))
		return 0, false
	}
	k, known := ratelimits.ParseIDKind(f.val.Value)
	switch {
	case !known:
		s.add(f.val.Line, "unknown id kind %s: want %s", quoteShort(f.val.Value), declarableKinds)
		return 0, false
	case !k.Declarable():
		s.add(f.val.Line, "id kind %s is reserved for built-in limits: want %s", f.val.Value, declarableKinds)
		return 0, false
	}
	return k, true
}

// shadow reads a limit's shadow field: true makes it a shadow limit,
// decided and counted but never denying (ratelimits.Limit.Shadow).
func (s scope) shadow(fs map[string]field) (bool, bool) {
	f, has := fs["shadow"]
	if !has {
		return false, true
	}
	var v bool
	if f.val.Kind != yaml.ScalarNode || f.val.ShortTag() != "!!bool" || f.val.Decode(&v) != nil {
		s.add(f.val.Line, "shadow must be true or false, got %s", describe(f.val))
		return false, false
	}
	return v, true
}
