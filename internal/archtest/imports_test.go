package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// pkg is what `go list -deps -json` says of one package.
type pkg struct {
	ImportPath string
	Imports    []string
	Module     *struct{ Path string }
}

// graph is the module's packages and everything they import, by import
// path.
type graph struct {
	module string
	pkgs   map[string]*pkg
}

// rel is an import path relative to the module ("ratelimits/gcra"), or ""
// for a package outside it.
func (g *graph) rel(path string) string {
	if path == g.module {
		return "."
	}
	if r, ok := strings.CutPrefix(path, g.module+"/"); ok {
		return r
	}
	return ""
}

// under reports whether a module-relative path is dir or inside it.
func under(rel, dir string) bool {
	return rel == dir || strings.HasPrefix(rel, dir+"/")
}

// isConfigLoader tells the config-file loader, beside the domain, from
// everything else.
func isConfigLoader(rel string) bool {
	return under(rel, "configfile")
}

// target is an import a layer must not have, directly or through another
// package.
type target struct {
	what  string
	match func(g *graph, path string) bool
}

// external matches an import path outside the module: the path itself or
// anything below it.
func external(prefix string) target {
	return target{prefix, func(_ *graph, path string) bool {
		return path == prefix || strings.HasPrefix(path, prefix+"/")
	}}
}

// internal matches a directory of the module and its subpackages.
func internal(dir string) target {
	return target{dir + "/...", func(g *graph, path string) bool {
		r := g.rel(path)
		return r != "" && under(r, dir)
	}}
}

var configLoader = target{"the config loader", func(g *graph, path string) bool {
	return isConfigLoader(g.rel(path))
}}

// rule is one edge: the packages it applies to, what they must not import
// and why.
type rule struct {
	layer  string
	from   func(rel string) bool
	forbid []target
	why    string
}

var rules = []rule{
	{
		layer: "the domain (ratelimits/...)",
		from:  func(rel string) bool { return under(rel, "ratelimits") },
		forbid: []target{
			external("net/http"), external("github.com/redis"), external("github.com/go-chi"),
			external("gopkg.in/yaml.v3"), configLoader, internal("source"), internal("httpapi"),
		},
		why: "the domain decides; it loads no file (YAML belongs in the config loader), speaks no HTTP and knows no storage",
	},
	{
		layer:  "a source (source/...)",
		from:   func(rel string) bool { return under(rel, "source") },
		forbid: []target{external("net/http"), external("github.com/go-chi"), external("gopkg.in/yaml.v3"), configLoader, internal("httpapi")},
		why:    "a source stores buckets for the domain's algorithms; it loads no configuration and speaks no HTTP",
	},
	{
		layer:  "the handlers (httpapi/...)",
		from:   func(rel string) bool { return under(rel, "httpapi") },
		forbid: []target{internal("source"), external("github.com/redis")},
		why:    "handlers call the Limiter; which source it uses is cmd/limiter's choice",
	},
	{
		layer:  "Envoy's rate-limit service (envoyapi/...)",
		from:   func(rel string) bool { return under(rel, "envoyapi") },
		forbid: []target{internal("source"), external("github.com/redis"), configLoader},
		why:    "the gRPC front end calls the Limiter with rules it is given; which source and which files are cmd/limiter's choice",
	},
	{
		layer: "the top denied ids (topdenied/...)",
		from:  func(rel string) bool { return under(rel, "topdenied") },
		forbid: []target{
			external("net/http"), external("github.com/redis"), external("github.com/go-chi"),
			internal("source"), internal("httpapi"), internal("ratelimits"), configLoader,
		},
		why: "the top lists count ids the front ends hand them and merge what a store gives back as bytes; " +
			"which store, and how the list is served, are cmd/limiter's and the handlers' business",
	},
}

// allowRule is an edge given as what a layer may import directly, rather
// than what it must not: for the pure algorithm packages, whose whole list
// of imports is short and meant to stay so, and for the forward-auth
// rules and the bounded tables, which import the standard library alone
// (whose packages import nothing else, so their direct imports are all
// there is to check).
type allowRule struct {
	layer string
	from  func(rel string) bool
	// allow reports whether an import of the layer is allowed.
	allow func(g *graph, path string) bool
	why   string
}

// mathish are the standard packages an algorithm's arithmetic may use.
var mathish = []string{"math", "math/bits"}

// calendarish are the standard packages the calendar periods may use: the
// zone database's, the cache of the current period's, and its errors'.
var calendarish = []string{"archive/zip", "embed", "errors", "fmt", "io", "math", "strings", "sync/atomic", "time"}

var allowRules = []allowRule{
	{
		layer: "the pure algorithms (ratelimits/gcra, ratelimits/window, ratelimits/ratecounter)",
		from: func(rel string) bool {
			return rel == "ratelimits/gcra" || rel == "ratelimits/window" || rel == "ratelimits/ratecounter"
		},
		allow: func(g *graph, path string) bool { return g.rel(path) == "" && slices.Contains(mathish, path) },
		why:   "an algorithm is integer arithmetic on its arguments: nothing from the module, and of the standard library only " + strings.Join(mathish, " and "),
	},
	{
		layer: "the lease arithmetic (ratelimits/concurrency)",
		from:  func(rel string) bool { return rel == "ratelimits/concurrency" },
		allow: func(g *graph, path string) bool {
			return g.rel(path) == "" && slices.Contains([]string{"cmp", "slices", "crypto/rand", "encoding/hex"}, path)
		},
		why: "the lease arithmetic is pure: ordering and searching its leases, and random lease ids; no clock, no I/O, nothing from the module",
	},
	{
		layer: "the calendar periods (ratelimits/calendar)",
		from:  func(rel string) bool { return rel == "ratelimits/calendar" },
		allow: func(g *graph, path string) bool { return g.rel(path) == "" && slices.Contains(calendarish, path) },
		why: "a calendar quota is integer arithmetic on bounds that the zone database gives: nothing from the module, and of the standard library only " +
			strings.Join(calendarish, ", ") + " (no clock is read: now is an argument; archive/zip, embed, io and strings read the zone database the package carries)",
	},
	{
		layer: "the forward-auth rules (forwardauth/...)",
		from:  func(rel string) bool { return under(rel, "forwardauth") },
		allow: func(g *graph, path string) bool { return g.rel(path) == "" && standard(path) },
		why: "the forward-auth rules and the reading of a forwarded request are plain Go on net/http's types: " +
			"the standard library only, so that the config loader and the handlers share them without either's dependencies",
	},
	{
		layer: "the batch rules (ratelimits/bucket)",
		from:  func(rel string) bool { return rel == "ratelimits/bucket" },
		allow: func(g *graph, path string) bool {
			r := g.rel(path)
			return r == "" || r == "ratelimits/gcra" || r == "ratelimits/window" || r == "ratelimits/ratecounter" || r == "ratelimits/calendar" || r == "ratelimits/concurrency"
		},
		why: "the batch rules hand each op to its algorithm; from the module they use the algorithms alone",
	},
	{
		layer: "the Space-Saving sketch (internal/spacesaving)",
		from:  func(rel string) bool { return under(rel, "internal/spacesaving") },
		allow: func(g *graph, path string) bool {
			return g.rel(path) == "" && standard(path) && path != "time" && path != "sync" && !strings.HasPrefix(path, "net")
		},
		why: "the sketch is a pure data structure: the standard library without clock, locks or I/O, so that its callers choose those",
	},
	{
		layer: "the bounded tables (internal/boundedtable)",
		from:  func(rel string) bool { return under(rel, "internal/boundedtable") },
		allow: func(g *graph, path string) bool { return g.rel(path) == "" && standard(path) },
		why: "the bounded tables are the data structure the memory source and the local layer share: " +
			"the standard library only, so that neither brings the other's packages or the domain into it",
	},
	{
		layer: "the operator's page (ui)",
		from:  func(rel string) bool { return under(rel, "ui") },
		allow: func(g *graph, path string) bool { return g.rel(path) == "" && standard(path) },
		why: "the operator's page is a file the binary serves and reads only the HTTP API, as any client does: " +
			"the standard library only, nothing of the module",
	},
}

// standard reports whether an import path outside the module is of the
// standard library: the go command requires a dot in the first element of
// every other module's path.
func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// allowViolations checks every allow rule against the graph's direct
// imports and returns one line per import a rule does not allow.
func allowViolations(t *testing.T, g *graph) []string {
	t.Helper()
	var found []string
	for _, r := range allowRules {
		applied := 0
		for path, p := range g.pkgs {
			rel := g.rel(path)
			if p.Module == nil || p.Module.Path != g.module || rel == "" || !r.from(rel) {
				continue
			}
			applied++
			for _, imp := range p.Imports {
				if !r.allow(g, imp) {
					if ir := g.rel(imp); ir != "" {
						imp = ir
					}
					found = append(found, rel+" imports "+imp+": "+r.why)
				}
			}
		}
		if applied == 0 {
			t.Errorf("no package is in %s: the rule checks nothing; update it to the module's layout", r.layer)
		}
	}
	slices.Sort(found)
	return found
}

// load lists every package of the module with all it imports, as the
// go command resolves them for the current platform (tests excluded).
func load(t *testing.T) *graph {
	t.Helper()
	mod, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", stderrOf(err))
	}
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", stderrOf(err))
	}
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,Module", "./...")
	cmd.Dir = strings.TrimSpace(string(root))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", stderrOf(err))
	}
	g := &graph{module: strings.TrimSpace(string(mod)), pkgs: map[string]*pkg{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := &pkg{}
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list's output: %v", err)
		}
		g.pkgs[p.ImportPath] = p
	}
	return g
}

func stderrOf(err error) error {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return errors.New(strings.TrimSpace(string(exit.Stderr)))
	}
	return err
}

// path returns the chain of imports from one package to the first package
// the target matches, breadth first (so the shortest), or nil.
func (g *graph) path(from string, forbid target) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur != from && forbid.match(g, cur) {
			var chain []string
			for p := cur; p != ""; p = prev[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		if p, ok := g.pkgs[cur]; ok {
			for _, imp := range p.Imports {
				if _, seen := prev[imp]; !seen {
					prev[imp] = cur
					queue = append(queue, imp)
				}
			}
		}
	}
	return nil
}

// violations checks every rule against the graph and returns one line per
// forbidden import found, naming the chain that brings it in.
func violations(t *testing.T, g *graph) []string {
	t.Helper()
	var found []string
	for _, r := range rules {
		applied := 0
		for path, p := range g.pkgs {
			rel := g.rel(path)
			if p.Module == nil || p.Module.Path != g.module || rel == "" || !r.from(rel) {
				continue
			}
			applied++
			for _, f := range r.forbid {
				if chain := g.path(path, f); chain != nil {
					for i := range chain {
						if rel := g.rel(chain[i]); rel != "" {
							chain[i] = rel
						}
					}
					found = append(found, rel+" imports "+f.what+" ("+strings.Join(chain, " → ")+"): "+r.why)
				}
			}
		}
		if applied == 0 {
			t.Errorf("no package is in %s: the rule checks nothing; update it to the module's layout", r.layer)
		}
	}
	slices.Sort(found)
	return found
}

// Each layer imports only what its edge allows, directly or through
// another package.
func TestImportEdges(t *testing.T) {
	g := load(t)
	for _, v := range append(violations(t, g), allowViolations(t, g)...) {
		t.Error(v)
	}
}
