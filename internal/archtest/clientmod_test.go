package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// clientModule is the Go client's module path.
const clientModule = "github.com/limiter-dev/limiter/client"

// goModDirectives returns the module path a go.mod declares and the lines
// of its require and replace directives (those inside a block included),
// the ones that would let the module import another.
func goModDirectives(data string) (module string, deps []string) {
	block := ""
	for line := range strings.Lines(data) {
		line, _, _ = strings.Cut(line, "//")
		line = strings.TrimSpace(line)
		if block != "" {
			if line == ")" {
				block = ""
			} else if line != "" && (block == "require" || block == "replace") {
				deps = append(deps, block+" "+line)
			}
			continue
		}
		verb, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch {
		case rest == "(":
			block = verb
		case verb == "module":
			module = strings.Trim(rest, `"`)
		case verb == "require" || verb == "replace":
			deps = append(deps, line)
		}
	}
	return module, deps
}

// The client's go.mod requires nothing: the go command then builds it
// from the standard library alone, and an application that imports it
// gets no other module in its go.sum.
func TestClientModuleRequiresNothing(t *testing.T) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/limiter-dev/limiter").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", stderrOf(err))
	}
	data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(root)), "client", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module, deps := goModDirectives(string(data))
	if module != clientModule {
		t.Errorf("client/go.mod declares module %q, want %q", module, clientModule)
	}
	for _, d := range deps {
		t.Errorf("client/go.mod: %s: the client is what applications import; it requires no module, so that it brings them nothing but itself", d)
	}
}

// goModDirectives finds every directive that adds a module, in a block
// or on one line, and ignores the rest and comments.
func TestGoModDirectives(t *testing.T) {
	tests := []struct {
		in     string
		module string
		deps   []string
	}{
		{"module " + clientModule + "\n\ngo 1.24\n", clientModule, nil},
		{"// require x v1\nmodule m // require y v1\ngo 1.24\ntoolchain go1.26.0\n", "m", nil},
		{"module m\nrequire golang.org/x/net v0.60.0\n", "m", []string{"require golang.org/x/net v0.60.0"}},
		{"module m\nrequire (\n\tgithub.com/limiter-dev/limiter v0.0.0\n\n\tgolang.org/x/sys v0.48.0 // indirect\n)\nreplace github.com/limiter-dev/limiter => ../\n", "m",
			[]string{"require github.com/limiter-dev/limiter v0.0.0", "require golang.org/x/sys v0.48.0", "replace github.com/limiter-dev/limiter => ../"}},
		{"module m\nexclude (\n\tgolang.org/x/net v0.1.0\n)\nreplace (\n\tx => ./x\n)\n", "m", []string{"replace x => ./x"}},
	}
	for _, tt := range tests {
		module, deps := goModDirectives(tt.in)
		if module != tt.module || strings.Join(deps, "\n") != strings.Join(tt.deps, "\n") {
			t.Errorf("%q: module %q, %q; want %q, %q", tt.in, module, deps, tt.module, tt.deps)
		}
	}
}
