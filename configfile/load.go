// Package configfile loads a ratelimits.Config from the two YAML files an
// operator edits: the defaults file (every limit name's default, and the
// names it declares) and the overrides file (limits for single
// subscribers). A file with problems is refused whole, with every problem
// at its FILE:LINE, so that an operator fixes it in one round.
//
// A defaults entry is a GCRA limit (burst, count, period) unless its
// algorithm says sliding-window or fixed-window (count and period) or
// rate-counter (window, rate and penalty); the fields of another algorithm
// are refused. A GCRA or window limit may add a penalty, which gives it a
// penalty box; a window or rate-counter limit may have sync_rate, and a
// limit with a box a capacity. The algorithm, sync_rate and capacity belong
// to the name, so overrides give only the numbers (and a penalty).
// ParseReload also refuses files that would change the algorithm of a name
// in use.
//
// ParseDescriptors and ParseForwardAuth read two more files, as strictly:
// the rules that map the descriptors of Envoy's rate-limit requests, and
// the reverse proxies' forward-auth calls, to the limits of a Config.
// ReadFile reads any of them and says whether it is there at all, which a
// reload needs to judge before parsing.
package configfile

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/limiter-dev/limiter/ratelimits"
)

// Parse parses the contents of the defaults and overrides files; the
// file names are only used in problem messages. It checks everything before
// giving up: the overrides are parsed even when the defaults have problems
// (against the built-in names and the declared names that did parse), and
// the returned *Error lists every problem found. A defaults file that
// cannot be read as limits at all (a YAML syntax error) declares no name
// anyone can know, so overrides of names that are not built in are then not
// reported as unknown.
func Parse(defaultsFile string, defaults []byte, overridesFile string, overrides []byte) (*ratelimits.Config, error) {
	return parse(nil, defaultsFile, defaults, overridesFile, overrides)
}

// ParseReload is Parse for a reload that would replace running: the files
// must also keep the algorithm of every enum that running, or a
// configuration before it, counted with (ratelimits.AlgorithmChanges), or
// the *Error has a problem for each name that changes it, at the line where
// the new algorithm is set. The Config returned remembers those algorithms
// in turn (ratelimits.Succeed). A nil running checks nothing more than
// Parse.
func ParseReload(running *ratelimits.Config, defaultsFile string, defaults []byte, overridesFile string, overrides []byte) (*ratelimits.Config, error) {
	return parse(running, defaultsFile, defaults, overridesFile, overrides)
}

// parse is Parse, and ParseReload when running is not nil.
func parse(running *ratelimits.Config, defaultsFile string, defaults []byte, overridesFile string, overrides []byte) (*ratelimits.Config, error) {
	l := newLoader()
	l.loadDefaults(defaultsFile, defaults)
	l.loadOverrides(overridesFile, overrides)
	if len(l.problems) > 0 {
		return nil, problemsError(defaultsFile, l.problems)
	}
	cfg, err := l.config(defaultsFile)
	if err != nil {
		return nil, err
	}
	if changes := ratelimits.AlgorithmChanges(running, cfg); len(changes) > 0 {
		problems := make([]Problem, len(changes))
		for i, c := range changes {
			// Every name with limits in cfg has its algorithm's origin.
			o := l.algs[c.NewLimit]
			if o.file == "" {
				o.file = defaultsFile
			}
			problems[i] = Problem{File: o.file, Line: o.line, Limit: c.NewLimit, Message: c.Reason()}
		}
		return nil, problemsError(defaultsFile, problems)
	}
	return ratelimits.Succeed(running, cfg), nil
}

// problemsError returns the *Error of problems, sorted as an operator reads
// them: top to bottom, file by file, the defaults file first. Problems are
// found in passes (fields, then names, then duplicates); those of one line
// keep the order they were found in.
func problemsError(defaultsFile string, problems []Problem) *Error {
	slices.SortStableFunc(problems, func(a, b Problem) int {
		if a.File != b.File {
			if a.File == defaultsFile {
				return -1
			}
			if b.File == defaultsFile {
				return 1
			}
			return 0
		}
		return a.Line - b.Line
	})
	return &Error{Problems: problems}
}

// Problem is one thing wrong with a configuration file. Line is 1-based, or
// 0 when the problem concerns the whole file; Limit is the limit name
// concerned, if any.
type Problem struct {
	File    string
	Line    int
	Limit   string
	Message string
}

// String formats the problem as "FILE:LINE: LIMIT: MESSAGE", leaving out
// ":LINE" when Line is 0 and "LIMIT: " when Limit is empty, the usual shape
// for editors and CI logs to link to the line.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(p.Line))
	}
	b.WriteString(": ")
	if p.Limit != "" {
		b.WriteString(p.Limit)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Error is the error of a load that found problems. It lists all of
// them, not only the first, so that an operator fixes a file in one round.
type Error struct {
	Problems []Problem
}

// Error returns every problem, one per line.
func (e *Error) Error() string {
	if len(e.Problems) == 0 {
		return ratelimits.ErrInvalidConfig.Error()
	}
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns ratelimits.ErrInvalidConfig, so errors.Is tells a bad file from an I/O
// error.
func (e *Error) Unwrap() error {
	return ratelimits.ErrInvalidConfig
}

// loader collects what a load has found so far: the names and limits that
// parsed, and every problem.
type loader struct {
	problems []Problem
	names    map[string]ratelimits.NameInfo       // built-ins, then declared names as they parse
	builtins map[string]ratelimits.NameInfo       // the built-in names alone
	broken   map[string]bool                      // names whose declaration had problems
	enums    map[ratelimits.Name]declaration      // declared enums, to refuse duplicates
	ids      map[ratelimits.Name]map[string]idUse // override ids seen, to refuse duplicates
	// algs holds the algorithm of every name whose algorithm is known,
	// and where it was set; unknownAlg the names whose defaults entry
	// has an algorithm (or a shape) too broken to tell.
	algs       map[string]origin
	unknownAlg map[string]bool

	// What parsed without problems, for ratelimits.NewConfig.
	declared  []ratelimits.NameInfo
	defaults  map[string]ratelimits.Limit
	overrides []ratelimits.Override

	// declarationsUnknown is set when the defaults file could not be read
	// as a mapping of limits at all (a YAML syntax error, or another shape):
	// which names it declares is then unknown, so an override of a name
	// that is not built in cannot be told apart from one of a declared name.
	declarationsUnknown bool
}

// declaration is where a declared name took its enum.
type declaration struct {
	name string
	line int
}

// idUse is where an override id was first listed, as written.
type idUse struct {
	raw  string
	line int
}

func newLoader() *loader {
	builtins := ratelimits.BuiltinNames()
	l := &loader{
		names:      make(map[string]ratelimits.NameInfo, len(builtins)),
		builtins:   make(map[string]ratelimits.NameInfo, len(builtins)),
		broken:     map[string]bool{},
		enums:      map[ratelimits.Name]declaration{},
		ids:        map[ratelimits.Name]map[string]idUse{},
		algs:       map[string]origin{},
		unknownAlg: map[string]bool{},
		defaults:   map[string]ratelimits.Limit{},
	}
	for _, b := range builtins {
		l.names[b.Limit] = b
		l.builtins[b.Limit] = b
	}
	return l
}

// config builds the Config of what the loader found. The loader has
// already refused everything NewConfig would, each problem at its line, so
// an error here is a mistake of the loader's: it is reported against the
// defaults file as a whole rather than lost.
func (l *loader) config(defaultsFile string) (*ratelimits.Config, error) {
	cfg, err := ratelimits.NewConfig(l.declared, l.defaults, l.overrides)
	if err != nil {
		return nil, &Error{Problems: []Problem{{File: defaultsFile, Message: err.Error()}}}
	}
	return cfg, nil
}

func (l *loader) add(file string, line int, limit, format string, args ...any) {
	l.problems = append(l.problems, Problem{File: file, Line: line, Limit: limit, Message: fmt.Sprintf(format, args...)})
}

// scope is the place problems are reported for: a file, and a limit in it.
type scope struct {
	l     *loader
	file  string
	limit string
}

func (s scope) add(line int, format string, args ...any) {
	s.l.add(s.file, line, s.limit, format, args...)
}

// field is one key and value of a mapping.
type field struct {
	key, val *yaml.Node
}

// fields reads a mapping whose keys must be among allowed, reporting unknown
// and duplicate keys. misplaced maps keys that are not allowed here but are
// elsewhere to the message that says so.
func (s scope) fields(m *yaml.Node, misplaced map[string]string, allowed ...string) map[string]field {
	fs := make(map[string]field, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch {
		case !isString(k):
			s.add(k.Line, "a field name must be a plain string, got %s", describe(k))
		case misplaced[k.Value] != "":
			s.add(k.Line, "%s", misplaced[k.Value])
		case !slices.Contains(allowed, k.Value):
			s.add(k.Line, "unknown field %s (allowed: %s)", quoteShort(k.Value), strings.Join(allowed, ", "))
		case fs[k.Value].key != nil:
			s.add(k.Line, "duplicate field %q (first at line %d)", k.Value, fs[k.Value].key.Line)
		default:
			fs[k.Value] = field{key: k, val: v}
		}
	}
	return fs
}

// readGCRALimit reads burst, count and period and validates them with
// ratelimits.NewLimit. key is the limit's name node, where missing fields
// list reads the field name of fs as a list of at least one item, the
// shape every file gives its collections (ids, descriptors, keys,
// limits), and returns the items. Otherwise it reports what is wrong and
// returns false: missing (the message missing, at line), not a list
// ("NAME must be WANT, got ..."), or empty ("NAME is empty: EMPTYWHY").
func (s scope) list(fs map[string]field, name string, line int, missing, want, emptyWhy string) ([]*yaml.Node, bool) {
	f, has := fs[name]
	switch {
	case !has:
		s.add(line, "%s", missing)
		return nil, false
	case f.val.Kind != yaml.SequenceNode:
		s.add(f.val.Line, "%s must be %s, got %s", name, want, describe(f.val))
		return nil, false
	case len(f.val.Content) == 0:
		s.add(f.val.Line, "%s is empty: %s", name, emptyWhy)
		return nil, false
	}
	return f.val.Content, true
}

// are reported.
func (s scope) readGCRALimit(key *yaml.Node, fs map[string]field) (ratelimits.Limit, bool) {
	burst, okBurst := s.positiveInt(key, fs, "burst")
	count, okCount := s.positiveInt(key, fs, "count")
	period, okPeriod := s.period(key, fs)
	if !okBurst || !okCount || !okPeriod {
		return ratelimits.Limit{}, false
	}
	lim, err := ratelimits.NewLimit(burst, count, period)
	if err != nil {
		s.add(key.Line, "%v", err)
		return ratelimits.Limit{}, false
	}
	return lim, true
}

// positiveInt reads a required field that must be an integer > 0.
func (s scope) positiveInt(key *yaml.Node, fs map[string]field, name string) (int64, bool) {
	f, ok := fs[name]
	if !ok {
		s.add(key.Line, "missing %s", name)
		return 0, false
	}
	return s.positiveValue(f.val, name)
}

// positiveValue reads the value of field name, an integer > 0.
func (s scope) positiveValue(n *yaml.Node, name string) (int64, bool) {
	v, ok := s.int64Value(n, name)
	if !ok {
		return 0, false
	}
	if v <= 0 {
		s.add(n.Line, "%s must be greater than 0, got %d", name, v)
		return 0, false
	}
	return v, true
}

// looksInteger matches what yaml.v3 turns into a float only because it is
// too large for an integer.
var looksInteger = regexp.MustCompile(`^[-+]?[0-9]+$`)

// int64Value reads a YAML integer (not a float, a quoted string or a bool)
// that fits in an int64.
func (s scope) int64Value(n *yaml.Node, name string) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" && looksInteger.MatchString(n.Value) {
			s.add(n.Line, "%s %s is out of range: it must fit in a 64-bit signed integer", name, n.Value)
		} else {
			s.add(n.Line, "%s must be an integer, got %s", name, describe(n))
		}
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		s.add(n.Line, "%s %s is out of range: it must fit in a 64-bit signed integer", name, n.Value)
		return 0, false
	}
	return v, true
}

// period reads the required period: a Go duration string greater than 0.
func (s scope) period(key *yaml.Node, fs map[string]field) (time.Duration, bool) {
	f, ok := fs["period"]
	if !ok {
		s.add(key.Line, "missing period")
		return 0, false
	}
	return s.periodValue(f.val)
}

// periodValue reads a period's value: a Go duration string greater than 0.
func (s scope) periodValue(n *yaml.Node) (time.Duration, bool) {
	if !isString(n) {
		s.add(n.Line, "period must be a duration such as 1s, 15m or 3h, got %s", describe(n))
		return 0, false
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		s.add(n.Line, "period %s is not a valid duration: use Go syntax such as 1s, 15m or 168h", quoteShort(n.Value))
		return 0, false
	}
	if d <= 0 {
		s.add(n.Line, "period must be greater than 0, got %s", n.Value)
		return 0, false
	}
	return d, true
}

// nameKey reads a limit name used as a mapping key and checks its syntax.
func (l *loader) nameKey(file string, key *yaml.Node) (string, bool) {
	if !isString(key) {
		l.add(file, key.Line, "", "a limit name must be a plain string, got %s", describe(key))
		return "", false
	}
	if !ratelimits.ValidLimitName(key.Value) {
		l.add(file, key.Line, "", "invalid limit name %s: a name starts with a letter, has only letters, digits and underscores, and is at most %d characters",
			quoteShort(key.Value), ratelimits.MaxLimitNameLength)
		return "", false
	}
	return key.Value, true
}

// unknownName explains what to do about a name that is neither built in nor
// declared, with a guess when it looks like a misspelt known name.
func (l *loader) unknownName(name string) string {
	msg := "unknown limit name: to add a limit, declare it in the defaults file with an enum (100 or more, unique) and an id kind (" + declarableKinds + ")"
	if guess := l.closestName(name); guess != "" {
		msg += "; did you mean " + guess + "?"
	}
	return msg
}

// declarableKinds lists the id kinds a declared name may use.
const declarableKinds = "ip, ipv6-range, account, domain or string"

// closestName returns the known name nearest to name in spelling, ignoring
// case, if it is close enough to be a likely typo.
func (l *loader) closestName(name string) string {
	const maxDistance = 3
	best, bestDistance := "", maxDistance+1
	for _, known := range slices.Sorted(maps.Keys(l.names)) {
		d := editDistance(strings.ToLower(name), strings.ToLower(known))
		if d < bestDistance {
			best, bestDistance = known, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// isString reports whether n is a scalar string (quoted or plain).
func isString(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str"
}

// isNull reports whether n is an explicit null ("~", "null", or nothing).
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node holds, for "got ..." in messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias (YAML aliases are not supported)"
	case yaml.ScalarNode:
		return describeScalar(n)
	}
	return "nothing"
}

func describeScalar(n *yaml.Node) string {
	switch n.ShortTag() {
	case "!!null":
		return "no value"
	case "!!str":
		return "the string " + quoteShort(n.Value)
	case "!!int":
		return "the integer " + n.Value
	case "!!float":
		return "the number " + n.Value
	case "!!bool":
		return "the boolean " + n.Value
	}
	return n.ShortTag() + " " + quoteShort(n.Value)
}

// quoteShort quotes s for a message, cut to a readable length.
func quoteShort(s string) string {
	const max = 80
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}
