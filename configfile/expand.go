package configfile

import "gopkg.in/yaml.v3"

// maxExpanded bounds how many values a file may hold once its aliases are
// expanded: a few aliases of aliases can name billions of them (the
// "billion laughs"), and every walk of the tree would visit each.
const maxExpanded = 1 << 20

// expand replaces every alias under root by the node its anchor names,
// and merges into each mapping the mappings its merge key ("<<") names,
// as yaml.v3 does when it decodes into Go values (Boulder's loader reads
// its files so): a key written in the mapping wins over a merged one, and
// an earlier mapping of a merged list over a later one. A value that came
// through an alias is at the alias's line; what it holds keeps the lines
// of its anchor's text, where a problem in it is to be mended. A merge key whose value is not a mapping or a list
// of mappings, and a file too large once expanded, are problems; ok is
// false after one.
func (l *loader) expand(file string, root *yaml.Node) (*yaml.Node, bool) {
	e := expansion{l: l, file: file, done: map[*yaml.Node]bool{}, cut: map[*yaml.Node]bool{}, ok: true}
	root = e.resolve(root)
	if e.ok && e.size(root, map[*yaml.Node]int{}) > maxExpanded {
		l.add(file, root.Line, "", "the file's aliases expand it to more than %d values", maxExpanded)
		return nil, false
	}
	return root, e.ok
}

type expansion struct {
	l    *loader
	file string
	// done maps each node resolve has reached to whether its content is
	// resolved: false while it is being resolved, when an alias of it
	// would make a value that holds itself.
	done map[*yaml.Node]bool
	// cut are the nulls put in the place of such aliases, already
	// reported.
	cut map[*yaml.Node]bool
	ok  bool
}

// resolve returns the node n names, with its content resolved and, for a
// mapping, its merge keys merged: n itself, or for an alias a copy of its
// anchor's node at the alias's line (its content is the anchor's).
func (e *expansion) resolve(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		if resolved, seen := e.done[n.Alias]; seen && !resolved {
			// yaml.v3 takes an alias inside its own anchor's value: that
			// value would hold itself, without end.
			e.problem(n.Line, "the alias *%s is inside the value of its own anchor &%s", n.Value, n.Value)
			cut := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line, Column: n.Column}
			e.cut[cut] = true
			return cut
		}
		use := *e.resolve(n.Alias)
		use.Line, use.Column, use.Anchor = n.Line, n.Column, ""
		return &use
	}
	if _, seen := e.done[n]; seen {
		return n
	}
	e.done[n] = false
	for i, c := range n.Content {
		n.Content[i] = e.resolve(c)
	}
	if n.Kind == yaml.MappingNode {
		e.merge(n)
	}
	e.done[n] = true
	return n
}

// merge replaces m's merge keys by the fields of the mappings they name
// that m does not have.
func (e *expansion) merge(m *yaml.Node) {
	var fields, sources []*yaml.Node
	merges := false
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!merge" {
			fields = append(fields, k, v)
			continue
		}
		merges = true
		switch v.Kind {
		case yaml.MappingNode:
			sources = append(sources, v)
		case yaml.SequenceNode:
			for _, s := range v.Content {
				if e.cut[s] {
					continue
				}
				if s.Kind != yaml.MappingNode {
					e.problem(s.Line, "a merge key (<<) takes a mapping or a list of mappings, got %s", describe(s))
					continue
				}
				sources = append(sources, s)
			}
		default:
			if !e.cut[v] {
				e.problem(v.Line, "a merge key (<<) takes a mapping or a list of mappings, got %s", describe(v))
			}
		}
	}
	if !merges {
		return
	}
	have := map[string]bool{}
	for i := 0; i < len(fields); i += 2 {
		if fields[i].Kind == yaml.ScalarNode {
			have[fields[i].Value] = true
		}
	}
	for _, s := range sources {
		for i := 0; i+1 < len(s.Content); i += 2 {
			k := s.Content[i]
			if k.Kind == yaml.ScalarNode && have[k.Value] {
				continue
			}
			have[k.Value] = true
			fields = append(fields, k, s.Content[i+1])
		}
	}
	m.Content = fields
}

func (e *expansion) problem(line int, format string, args ...any) {
	e.l.add(e.file, line, "", format, args...)
	e.ok = false
}

// size is how many values the tree under n holds, each alias counted as
// what it names: at most the bound and one, so that it stops early.
func (e *expansion) size(n *yaml.Node, memo map[*yaml.Node]int) int {
	if s, ok := memo[n]; ok {
		return s
	}
	s := 1
	for _, c := range n.Content {
		if s += e.size(c, memo); s > maxExpanded {
			break
		}
	}
	memo[n] = s
	return s
}
