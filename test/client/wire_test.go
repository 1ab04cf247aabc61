package client_test

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/client"
	"github.com/limiter-dev/limiter/httpapi/wire"
)

// The client is a module of its own that imports nothing but the
// standard library, so it keeps its own copies of the API's bodies
// (unexported structs). httpapi/wire declares the protocol; these tests
// hold the copies to it.

// wirePairs are each of the service's wire types and the client's struct
// for the same body.
var wirePairs = []struct {
	server any
	client string
}{
	{wire.BatchResponse{}, "batchJSON"},
	{wire.DecisionResponse{}, "decisionJSON"},
	{wire.LimitsResponse{}, "limitsJSON"},
	{wire.LimitResponse{}, "limitJSON"},
	{wire.LimitSettings{}, "settingsJSON"},
	{wire.TransactionRequest{}, "transactionJSON"},
	{wire.LeaseRequest{}, "leaseJSON"},
	{wire.TopResponse{}, "topJSON"},
	{wire.TopEntry{}, "topEntryJSON"},
	{wire.BoxesResponse{}, "boxesJSON"},
	{wire.BoxEntry{}, "boxEntryJSON"},
	{wire.ReloadStatusResponse{}, "reloadStatusJSON"},
	{wire.ReloadAttempt{}, "reloadAttemptJSON"},
	{wire.ReloadFile{}, "reloadFileJSON"},
}

// jsonName is the name a field goes by in JSON: its tag's, else its own.
func jsonName(field, tag string) string {
	name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
	if name == "" {
		return field
	}
	return name
}

// serverFields lists the JSON names of a wire type's fields.
func serverFields(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		names = append(names, jsonName(f.Name, string(f.Tag)))
	}
	slices.Sort(names)
	return names
}

// clientFiles parses the client's source: the module the tests build
// against, client/ in this tree, without its tests.
func clientFiles(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/limiter-dev/limiter/client").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/limiter-dev/limiter/client: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

// clientStructs lists the JSON names of the fields of each struct type
// the client declares, by type name.
func clientStructs(t *testing.T) map[string][]string {
	t.Helper()
	fset, files := clientFiles(t)
	structs := map[string][]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := spec.Type.(*ast.StructType)
			if !ok {
				return true
			}
			var names []string
			for _, field := range st.Fields.List {
				tag := ""
				if field.Tag != nil {
					var err error
					if tag, err = strconv.Unquote(field.Tag.Value); err != nil {
						t.Fatalf("%s: %v", fset.Position(field.Pos()), err)
					}
				}
				if len(field.Names) == 0 {
					t.Fatalf("%s: an embedded field in %s; this test reads named fields only", fset.Position(field.Pos()), spec.Name.Name)
				}
				for _, id := range field.Names {
					names = append(names, jsonName(id.Name, tag))
				}
			}
			slices.Sort(names)
			structs[spec.Name.Name] = names
			return true
		})
	}
	return structs
}

// The client's copy of each body has the fields the service's has, by
// their JSON names: a field added to the API and not to the client, or
// one the client expects that the API does not send, fails here.
func TestClientWireTypesMatchTheService(t *testing.T) {
	structs := clientStructs(t)
	for _, p := range wirePairs {
		s := reflect.TypeOf(p.server)
		got, ok := structs[p.client]
		if !ok {
			t.Errorf("the client declares no struct %s (the copy of %v)", p.client, s)
			continue
		}
		if want := serverFields(s); !slices.Equal(got, want) {
			t.Errorf("the client's %s has %v; %v has %v", p.client, got, s, want)
		}
	}
}

// clientCodes lists the values of the client's Code constants.
func clientCodes(t *testing.T) map[string]bool {
	t.Helper()
	_, files := clientFiles(t)
	codes := map[string]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range spec.Names {
				if !strings.HasPrefix(name.Name, "Code") || i >= len(spec.Values) {
					continue
				}
				if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					codes[v] = true
				}
			}
			return true
		})
	}
	return codes
}

// errorRow is a row of the error table in docs/api.md: | status | `code` |.
var errorRow = regexp.MustCompile("^\\| [^|]+ \\| `([a-z_]+)` \\|")

// Every error code the API documents has a constant in the client, so a
// caller can switch on it, except forward-auth's missing_id: the client
// makes no forward-auth call.
func TestClientKnowsEveryErrorCode(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	codes := clientCodes(t)
	documented := 0
	for line := range strings.Lines(string(doc)) {
		m := errorRow.FindStringSubmatch(line)
		if m == nil || m[1] == "missing_id" {
			continue
		}
		documented++
		if !codes[m[1]] {
			t.Errorf("docs/api.md documents the error code %q; the client has no constant for it", m[1])
		}
	}
	if documented < 20 {
		t.Fatalf("found %d error codes in docs/api.md's table; has its form changed?", documented)
	}
}

// A decision answer with every field set, as the service's wire types
// encode it, reaches the caller with every value.
func TestClientDecodesEveryDecisionField(t *testing.T) {
	yes, rate := true, 0.5
	body, err := json.Marshal(wire.BatchResponse{
		Allowed: true, Remaining: 7, RetryInMS: 1, ResetInMS: 2500, Degraded: true,
		Decisions: []wire.DecisionResponse{{
			Limit: "L", ID: "i", Allowed: true, Remaining: 7, RetryInMS: 1, ResetInMS: 2500, Unlimited: true,
			Burst: 9, Count: 8, Period: "15m0s", Override: true, Algorithm: "fixed-window",
			Penalized: &yes, Shadow: true, SyncRate: &rate, Lease: "0123456789abcdef0123456789abcdef", LeaseExpiresInMS: 600_000,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		w.Write(body)
	}))
	defer srv.Close()
	c, err := client.New(client.Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.Spend(context.Background(), client.Transaction{Limit: "L", ID: "i"})
	if err != nil {
		t.Fatal(err)
	}
	want := []client.TransactionDecision{{
		Limit: "L", ID: "i", Allowed: true, Remaining: 7, RetryIn: time.Millisecond, ResetIn: 2500 * time.Millisecond, Unlimited: true,
		Burst: 9, Count: 8, Period: 15 * time.Minute, Override: true, Algorithm: client.FixedWindow,
		HasPenaltyBox: true, Penalized: true, Shadow: true, HasSyncRate: true, SyncRate: 500 * time.Millisecond,
		Lease: "0123456789abcdef0123456789abcdef", LeaseExpiresIn: 10 * time.Minute,
	}}
	if !got.Allowed || got.Remaining != 7 || got.RetryIn != time.Millisecond || got.ResetIn != 2500*time.Millisecond ||
		!got.Degraded || !got.Replayed || !reflect.DeepEqual(got.Decisions, want) {
		t.Fatalf("got  %+v\nwant the batch's figures and %+v", got, want)
	}
}
