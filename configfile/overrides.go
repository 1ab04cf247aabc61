package configfile

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/limiter-dev/limiter/ratelimits"
)

// The fields of an override, and of one of its ids.
var (
	overrideFields = []string{"burst", "count", "period", "window", "rate", "penalty", "ids"}
	idFields       = []string{"id", "comment"}
	// nameFields are the fields of a limit name that an override, which
	// gives one subscriber other numbers, cannot change.
	nameFields = map[string]string{
		"algorithm": "an override cannot set algorithm: it belongs to the limit name, so it is set in the defaults file",
		"sync_rate": "an override cannot set sync_rate: it belongs to the limit name, so it is set in the defaults file",
		"capacity":  "an override cannot set capacity: it belongs to the limit name (its counters and box are shared by all its ids), so it is set in the defaults file",
		"shadow":    "an override cannot set shadow: it belongs to the limit name, so it is set in the defaults file",
		"timezone":  "an override cannot set timezone: it belongs to the limit name, so it is set in the defaults file",
		"enum":      "an override cannot set enum: it belongs to the limit name, so it is set in the defaults file",
		"id":        "an override cannot set the id kind: it belongs to the limit name, so it is set in the defaults file; the subscribers go in ids",
	}
)

// overrideShape reminds the operator of the overrides file's format.
const overrideShape = `"- LimitName: {burst, count, period, ids: [{id, comment}]}" (no burst for a window limit; window, rate and penalty instead for a rate counter; count alone for a calendar limit)`

// loadOverrides parses the overrides file: a list of single-key maps, each
// from a limit name to an override. Nothing at all, null or [] means no
// overrides.
func (l *loader) loadOverrides(file string, data []byte) {
	root, ok := l.parseDocument(file, data)
	if !ok || root == nil || isNull(root) {
		return
	}
	if root.Kind != yaml.SequenceNode {
		l.add(file, root.Line, "", "the overrides file must be a list of single-key maps %s, got %s", overrideShape, describe(root))
		return
	}
	for _, entry := range root.Content {
		l.overrideEntry(file, entry)
	}
}

// overrideEntry parses one list entry. An entry with several names is a
// problem (usually a missing "- "), but each name is still checked.
func (l *loader) overrideEntry(file string, entry *yaml.Node) {
	if entry.Kind != yaml.MappingNode || len(entry.Content) == 0 {
		l.add(file, entry.Line, "", "each entry must be a map with one limit name %s, got %s", overrideShape, describe(entry))
		return
	}
	if n := len(entry.Content) / 2; n > 1 {
		l.add(file, entry.Line, "", "the entry has %d keys (%s): each entry must have exactly one limit name, so start each with its own \"- \"",
			n, strings.Join(mappingKeys(entry), ", "))
	}
	for i := 0; i+1 < len(entry.Content); i += 2 {
		l.override(file, entry.Content[i], entry.Content[i+1])
	}
}

// mappingKeys lists the keys of a mapping, quoted, for a message.
func mappingKeys(m *yaml.Node) []string {
	var keys []string
	for i := 0; i < len(m.Content); i += 2 {
		keys = append(keys, quoteShort(m.Content[i].Value))
	}
	return keys
}

// override parses one override: its limit, and the ids it applies to.
func (l *loader) override(file string, key, val *yaml.Node) {
	name, ok := l.nameKey(file, key)
	if !ok {
		return
	}
	s := scope{l: l, file: file, limit: name}
	info, known := l.names[name]
	switch {
	case !known && l.declarationsUnknown:
		// The name may be one the unreadable defaults file declares: calling
		// it unknown would add a false problem to the real one. Only what
		// does not depend on the name (its limit's fields) is checked.
	case !known && l.broken[name]:
		s.add(key.Line, "cannot check this override: the limit's declaration in the defaults file has problems")
	case !known:
		s.add(key.Line, "%s", l.unknownName(name))
	}
	if val.Kind != yaml.MappingNode {
		s.add(val.Line, "an override must be a mapping with burst, count, period and ids (window, rate, penalty and ids for a rate counter), got %s", describe(val))
		return
	}
	fs := s.fields(val, nameFields, overrideFields...)
	var lim ratelimits.Limit
	alg, okAlg := l.nameAlgorithm(name)
	okLimit := okAlg
	switch {
	case okAlg && alg == ratelimits.Calendar:
		lim, okLimit = s.readCalendarOverride(key, fs)
	case okAlg:
		lim, okLimit = s.readLimit(key, fs, alg)
	default:
		// The name's defaults entry is unknown or broken: only what every
		// algorithm requires of the fields is checked.
		s.checkFields(fs)
	}
	if !known {
		return
	}
	ids, okIDs := l.overrideIDs(s, info, key, fs)
	if f, has := fs["penalty"]; has && okLimit && alg != ratelimits.RateCounter {
		if def, ok := l.defaults[info.Limit]; ok && def.Penalty == 0 {
			s.add(f.val.Line, "penalty on an override of a limit whose default has none: a penalty box belongs to the name, so set penalty on the default (an override may change its length)")
			okLimit = false
		}
	}
	if okLimit && okIDs {
		if _, set := l.algs[info.Limit]; !set {
			l.algs[info.Limit] = origin{alg: alg, file: file, line: key.Line}
		}
		l.storeOverrides(info.Limit, lim, ids)
	}
}

// storeOverrides records lim as the override of name for each canonical id.
func (l *loader) storeOverrides(name string, lim ratelimits.Limit, ids []string) {
	for _, id := range ids {
		l.overrides = append(l.overrides, ratelimits.Override{Limit: name, ID: id, Effective: lim})
	}
}

// overrideIDs reads the ids of an override and returns them canonical. Every
// id is checked, also after a bad one.
func (l *loader) overrideIDs(s scope, info ratelimits.NameInfo, key *yaml.Node, fs map[string]field) ([]string, bool) {
	items, ok := s.list(fs, "ids", key.Line, "missing ids: an override must list at least one id",
		"a list of {id, comment}", "an override must list at least one id")
	if !ok {
		return nil, false
	}
	ids := make([]string, 0, len(items))
	for _, item := range items {
		if id, good := l.overrideID(s, info, item); good {
			ids = append(ids, id)
		} else {
			ok = false
		}
	}
	return ids, ok
}

// overrideID reads one {id, comment} entry, validates the id as an override
// id of the name's kind, and refuses an id (canonical) already listed for the
// name, in this entry or another.
func (l *loader) overrideID(s scope, info ratelimits.NameInfo, item *yaml.Node) (string, bool) {
	if item.Kind != yaml.MappingNode {
		s.add(item.Line, "each id must be a mapping {id: ..., comment: ...}, got %s", describe(item))
		return "", false
	}
	fs := s.fields(item, nil, idFields...)
	if c, has := fs["comment"]; has && c.val.Kind != yaml.ScalarNode {
		s.add(c.val.Line, "comment must be text, got %s", describe(c.val))
	}
	f, has := fs["id"]
	if !has {
		s.add(item.Line, "missing id")
		return "", false
	}
	raw, ok := idText(f.val)
	if !ok {
		s.add(f.val.Line, "id must be a string, got %s (quote it)", describe(f.val))
		return "", false
	}
	id, err := info.Kind.CanonicalOverrideID(raw)
	if err != nil {
		s.add(f.val.Line, "id %s: %v", quoteShort(raw), err)
		return "", false
	}
	return id, l.uniqueID(s, info.Name, id, idUse{raw: raw, line: f.val.Line})
}

// idText returns the text of an id as written. Strings and integers are
// accepted (account numbers are naturally written unquoted); other scalars,
// such as 1.5, true or a date, must be quoted to be taken literally.
func idText(n *yaml.Node) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		return "", false
	}
	switch n.ShortTag() {
	case "!!str", "!!int":
		return n.Value, true
	}
	return "", false
}

// uniqueID records a canonical override id of name, refusing one already
// listed: two spellings of one subscriber would make the effective limit
// depend on file order.
func (l *loader) uniqueID(s scope, name ratelimits.Name, id string, use idUse) bool {
	seen := l.ids[name]
	if seen == nil {
		seen = map[string]idUse{}
		l.ids[name] = seen
	}
	first, dup := seen[id]
	if !dup {
		seen[id] = use
		return true
	}
	same := ""
	if first.raw != use.raw {
		same = fmt.Sprintf(", the same id as %s", quoteShort(first.raw))
	}
	s.add(use.line, "duplicate id %s (line %d): already listed at line %d%s", quoteShort(use.raw), use.line, first.line, same)
	return false
}
