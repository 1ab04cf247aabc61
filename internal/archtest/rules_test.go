package archtest

import (
	"slices"
	"strings"
	"testing"
)

// fakeGraph is a module "m" whose packages import as edges says, with
// one package in every layer so that each rule applies.
func fakeGraph(edges map[string][]string) *graph {
	g := &graph{module: "m", pkgs: map[string]*pkg{}}
	mod := &struct{ Path string }{"m"}
	add := func(path string) {
		if _, ok := g.pkgs[path]; !ok {
			p := &pkg{ImportPath: path}
			if path == "m" || strings.HasPrefix(path, "m/") {
				p.Module = mod
			}
			g.pkgs[path] = p
		}
	}
	for _, path := range []string{"m/ratelimits", "m/source/memory", "m/httpapi", "m/envoyapi", "m/forwardauth", "m/internal/boundedtable", "m/internal/spacesaving", "m/topdenied", "m/ratelimits/concurrency", "m/ratelimits/calendar", "m/ui"} {
		add(path)
	}
	for from, to := range edges {
		add(from)
		for _, imp := range to {
			add(imp)
		}
		g.pkgs[from].Imports = to
	}
	return g
}

// The rules catch a forbidden import, direct or through another package,
// in each layer, and let the allowed ones through.
func TestRulesCatchForbiddenImports(t *testing.T) {
	tests := []struct {
		name  string
		edges map[string][]string
		want  []string // the start of each violation, in order; none: allowed
	}{
		{"the domain speaks HTTP", map[string][]string{"m/ratelimits/gcra": {"math", "net/http"}},
			[]string{"ratelimits/gcra imports net/http (ratelimits/gcra → net/http)"}},
		{"the domain through a helper", map[string][]string{"m/ratelimits": {"m/ratelimits/once"}, "m/ratelimits/once": {"net/http/httptest"}},
			[]string{"ratelimits imports net/http (ratelimits → ratelimits/once → net/http/httptest)",
				"ratelimits/once imports net/http (ratelimits/once → net/http/httptest)"}},
		{"the domain reads YAML", map[string][]string{"m/ratelimits": {"gopkg.in/yaml.v3"}},
			[]string{"ratelimits imports gopkg.in/yaml.v3"}},
		{"the domain talks to Redis", map[string][]string{"m/ratelimits/window": {"github.com/redis/go-redis/v9"}},
			[]string{"ratelimits/window imports github.com/redis"}},
		{"the domain uses chi", map[string][]string{"m/ratelimits": {"github.com/go-chi/chi/v5"}},
			[]string{"ratelimits imports github.com/go-chi"}},
		{"the config loader reads YAML", map[string][]string{"m/configfile": {"m/ratelimits", "gopkg.in/yaml.v3"}}, nil},
		{"the domain loads its files", map[string][]string{"m/ratelimits": {"m/configfile"}, "m/configfile": {"gopkg.in/yaml.v3"}},
			[]string{"ratelimits imports gopkg.in/yaml.v3", "ratelimits imports the config loader"}},
		{"a source uses the config loader", map[string][]string{"m/source/redis": {"m/configfile"}, "m/configfile": {"gopkg.in/yaml.v3"}},
			[]string{"source/redis imports gopkg.in/yaml.v3", "source/redis imports the config loader"}},
		{"a source speaks HTTP", map[string][]string{"m/source/memory": {"net/http"}},
			[]string{"source/memory imports net/http"}},
		{"a source uses the domain and Redis", map[string][]string{"m/source/redis": {"m/ratelimits", "m/ratelimits/gcra", "github.com/redis/go-redis/v9"}}, nil},
		{"a handler uses a source", map[string][]string{"m/httpapi": {"m/ratelimits", "m/source/memory"}},
			[]string{"httpapi imports source/..."}},
		{"a handler talks to Redis", map[string][]string{"m/httpapi/debug": {"github.com/redis/go-redis/v9"}},
			[]string{"httpapi/debug imports github.com/redis"}},
		{"a handler uses HTTP and chi", map[string][]string{"m/httpapi": {"net/http", "github.com/go-chi/chi/v5", "m/ratelimits"}}, nil},
		{"Envoy's service uses a source", map[string][]string{"m/envoyapi": {"m/ratelimits", "m/source/memory"}},
			[]string{"envoyapi imports source/..."}},
		{"Envoy's service loads the limit files", map[string][]string{"m/envoyapi": {"m/configfile"}},
			[]string{"envoyapi imports the config loader"}},
		{"Envoy's rules talk to Redis", map[string][]string{"m/envoyapi/descriptors": {"github.com/redis/go-redis/v9"}},
			[]string{"envoyapi/descriptors imports github.com/redis"}},
		{"Envoy's service uses gRPC, the rules and the HTTP API's headers", map[string][]string{
			"m/envoyapi": {"google.golang.org/grpc", "m/envoyapi/descriptors", "m/httpapi/headers", "m/ratelimits"}}, nil},
		{"the top lists use the clock and the sketch", map[string][]string{"m/topdenied": {"github.com/jmhodges/clock", "m/internal/spacesaving"}}, nil},
		{"the top lists talk to Redis", map[string][]string{"m/topdenied": {"github.com/redis/go-redis/v9"}},
			[]string{"topdenied imports github.com/redis"}},
		{"the top lists read the domain", map[string][]string{"m/topdenied": {"m/ratelimits"}},
			[]string{"topdenied imports ratelimits/..."}},
		{"cmd wires everything", map[string][]string{"m/cmd/limiter": {"m/httpapi", "m/source/redis", "m/configfile", "net/http"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := violations(t, fakeGraph(tt.edges))
			if len(got) != len(tt.want) {
				t.Fatalf("violations:\n%s\nwant %d starting %q", strings.Join(got, "\n"), len(tt.want), tt.want)
			}
			for _, w := range tt.want {
				if !slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, w) }) {
					t.Errorf("violations:\n%s\nnone starts %q", strings.Join(got, "\n"), w)
				}
			}
		})
	}
}

// The allow rules catch an algorithm that imports the module or more than
// arithmetic from the standard library, batch rules that import the
// module beyond the algorithms, forward-auth rules that import anything
// beyond the standard library, and a lane that imports anything but the
// standard library; the imports they have today pass.
func TestAllowRules(t *testing.T) {
	tests := []struct {
		name  string
		edges map[string][]string
		want  []string // the start of each violation, in order; none: allowed
	}{
		{"the algorithms as they are", map[string][]string{
			"m/ratelimits/gcra": {"math"}, "m/ratelimits/window": {"math", "math/bits"},
			"m/ratelimits/bucket": {"m/ratelimits/gcra", "m/ratelimits/window"},
		}, nil},
		{"the calendar periods as they are", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {"m/ratelimits/calendar"},
			"m/ratelimits/calendar": {"errors", "fmt", "sync/atomic", "time"}}, nil},
		{"the calendar periods use the module", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {},
			"m/ratelimits/calendar": {"time", "m/ratelimits/window"}},
			[]string{"ratelimits/calendar imports ratelimits/window: a calendar quota is integer arithmetic"}},
		{"the calendar periods read files", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {},
			"m/ratelimits/calendar": {"os"}},
			[]string{"ratelimits/calendar imports os"}},
		{"an algorithm formats", map[string][]string{"m/ratelimits/gcra": {"math", "fmt"}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {}},
			[]string{"ratelimits/gcra imports fmt: an algorithm is integer arithmetic"}},
		{"an algorithm reads the clock", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {"time"}, "m/ratelimits/bucket": {}},
			[]string{"ratelimits/window imports time"}},
		{"an algorithm uses the module", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {"m/ratelimits/gcra"}, "m/ratelimits/bucket": {}},
			[]string{"ratelimits/window imports ratelimits/gcra"}},
		{"the batch rules use the domain", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {"m/ratelimits/gcra", "m/ratelimits/once"}},
			[]string{"ratelimits/bucket imports ratelimits/once: the batch rules hand each op to its algorithm"}},
		{"the batch rules use the standard library", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {"errors", "m/ratelimits/window"}}, nil},
		{"the forward-auth rules as they are", map[string][]string{
			"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {},
			"m/forwardauth": {"errors", "fmt", "net", "net/http", "net/netip", "slices", "strings"},
		}, nil},
		{"the forward-auth rules use the domain", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {}, "m/forwardauth": {"net/http", "m/ratelimits"}},
			[]string{"forwardauth imports ratelimits: the forward-auth rules and the reading of a forwarded request are plain Go"}},
		{"the forward-auth rules read YAML", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {}, "m/forwardauth": {"gopkg.in/yaml.v3"}},
			[]string{"forwardauth imports gopkg.in/yaml.v3"}},
		{"the forward-auth rules use chi", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {}, "m/forwardauth": {"github.com/go-chi/chi/v5", "strings"}},
			[]string{"forwardauth imports github.com/go-chi/chi/v5"}},
		{"a package under forwardauth uses golang.org/x", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {}, "m/forwardauth/proxyproto": {"golang.org/x/net/http/httpguts"}},
			[]string{"forwardauth/proxyproto imports golang.org/x/net/http/httpguts"}},
		{"the bounded tables use the standard library", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {},
			"m/internal/boundedtable": {"math/bits"}}, nil},
		{"the bounded tables use the domain", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {},
			"m/internal/boundedtable": {"m/ratelimits/ratecounter"}},
			[]string{"internal/boundedtable imports ratelimits/ratecounter: the bounded tables are the data structure"}},
		{"the sketch uses the standard library", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {},
			"m/internal/spacesaving": {"strings", "slices", "cmp"}}, nil},
		{"the sketch reads the clock", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {},
			"m/internal/spacesaving": {"time"}},
			[]string{"internal/spacesaving imports time: the sketch is a pure data structure"}},
		{"the lease arithmetic as it is", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {},
			"m/ratelimits/concurrency": {"cmp", "crypto/rand", "encoding/hex", "slices"}}, nil},
		{"the lease arithmetic reads the clock", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {},
			"m/ratelimits/concurrency": {"slices", "time"}},
			[]string{"ratelimits/concurrency imports time: the lease arithmetic is pure"}},
		{"the operator's page embeds and serves", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {},
			"m/ui": {"embed", "net/http", "crypto/sha256"}}, nil},
		{"the operator's page reads a source", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {},
			"m/ui": {"m/ratelimits"}},
			[]string{"ui imports ratelimits: the operator's page is a file"}},
		{"the bounded tables use a source", map[string][]string{"m/ratelimits/gcra": {}, "m/ratelimits/window": {}, "m/ratelimits/bucket": {},
			"m/internal/boundedtable": {"m/source/memory"}},
			[]string{"internal/boundedtable imports source/memory: the bounded tables are the data structure"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := allowViolations(t, fakeGraph(tt.edges))
			if len(got) != len(tt.want) {
				t.Fatalf("violations:\n%s\nwant %d starting %q", strings.Join(got, "\n"), len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("violation %q does not start %q", got[i], w)
				}
			}
		})
	}
}
