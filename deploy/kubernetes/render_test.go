package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The kustomizations of this directory, relative to it. "." is the one
// `kubectl apply -k deploy/kubernetes` builds.
var kustomizations = []string{".", "base", "overlays/redis", "overlays/redis-managed"}

// tree is the files of this directory (Go files left out), by slash path
// relative to it: the kustomizations, their config copies and the Envoy
// snippet. The tests render copies of it, some mutated.
type tree map[string][]byte

func readTree(t testing.TB) tree {
	t.Helper()
	files := tree{}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".go") {
			return err
		}
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(p)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// with returns a copy of the tree in which file has its first occurrence of
// old replaced by new; the test fails if old is not there, so that a
// mutation case cannot silently test the unchanged file.
func (tr tree) with(t testing.TB, file, old, new string) tree {
	t.Helper()
	c := tree{}
	for p, b := range tr {
		c[p] = b
	}
	if file == "" {
		return c
	}
	b, ok := c[file]
	if !ok || !bytes.Contains(b, []byte(old)) {
		t.Fatalf("mutation: %q not in %s", old, file)
	}
	c[file] = bytes.Replace(b, []byte(old), []byte(new), 1)
	return c
}

// object is one rendered Kubernetes object, decoded into its type.
type object struct {
	apiVersion, kind, name string
	obj                    any
}

// rendering is one kustomization built.
type rendering struct {
	dir     string
	yaml    []byte
	objects []object
}

// memRoot is where the tree is put in kustomize's in-memory file system:
// as in a checkout named limiter, so that a kustomization beside it
// (docs_test.go) reaches the base as ../limiter/deploy/kubernetes/base.
const memRoot = "/limiter/deploy/kubernetes"

// render builds the kustomization at dir (relative to the tree) with
// kustomize's library, as kubectl apply -k does, and decodes every object
// strictly into its Kubernetes type.
func render(tr tree, dir string) (*rendering, error) {
	mem := filesys.MakeFsInMemory()
	for p, b := range tr {
		full := path.Join(memRoot, p)
		if err := mem.MkdirAll(path.Dir(full)); err != nil {
			return nil, err
		}
		if err := mem.WriteFile(full, b); err != nil {
			return nil, err
		}
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, path.Join(memRoot, dir))
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	all, err := m.AsYaml()
	if err != nil {
		return nil, err
	}
	r := &rendering{dir: dir, yaml: all}
	for _, res := range m.Resources() {
		y, err := res.AsYAML()
		if err != nil {
			return nil, err
		}
		o := object{apiVersion: res.GetApiVersion(), kind: res.GetKind(), name: res.GetName()}
		if o.obj, err = decodeStrict(o.apiVersion, o.kind, y); err != nil {
			return nil, fmt.Errorf("%s: %s %s: %w", dir, o.kind, o.name, err)
		}
		r.objects = append(r.objects, o)
	}
	return r, nil
}

// newObject is the Kubernetes type of each kind the manifests may hold. A
// kind not listed here fails the test rather than going unchecked.
func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "v1 Secret":
		return &corev1.Secret{}, nil // decoded to be refused by the checks
	}
	return nil, fmt.Errorf("apiVersion %q kind %q: no Kubernetes type for it in this test (add it to newObject)", apiVersion, kind)
}

// decodeStrict decodes one object as the API server's strict field
// validation does: a field its type does not have, a field given twice and
// a field in the wrong case are all errors, as is a value of the wrong type.
func decodeStrict(apiVersion, kind string, y []byte) (any, error) {
	obj, err := newObject(apiVersion, kind)
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSONStrict(y)
	if err != nil {
		return nil, err
	}
	strict, err := json.UnmarshalStrict(j, obj, json.DisallowDuplicateFields, json.DisallowUnknownFields)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		return nil, errors.Join(strict...)
	}
	return obj, nil
}

// renderAll renders every kustomization of the tree as committed.
func renderAll(t testing.TB) map[string]*rendering {
	t.Helper()
	tr := readTree(t)
	out := map[string]*rendering{}
	for _, dir := range kustomizations {
		r, err := render(tr, dir)
		if err != nil {
			t.Fatal(err)
		}
		out[dir] = r
	}
	return out
}

// TestRenderStrict renders every kustomization, and mutated copies of the
// manifests, to show that the strict decoding refuses what the API server
// would: a misspelt field must fail here, not be dropped.
func TestRenderStrict(t *testing.T) {
	tr := readTree(t)
	cases := []struct {
		name, dir, file, old, new string
		want                      string // "" when the build must succeed
	}{
		{name: "base as committed", dir: "base"},
		{name: "top level as committed", dir: "."},
		{name: "redis overlay as committed", dir: "overlays/redis"},
		{name: "managed redis overlay as committed", dir: "overlays/redis-managed"},
		{
			name: "a misspelt field of the Deployment", dir: "base", file: "base/deployment.yaml",
			old: "readinessProbe:", new: "readinesProbe:", want: `unknown field "spec.template.spec.containers[0].readinesProbe"`,
		},
		{
			name: "a field in the wrong case", dir: "base", file: "base/deployment.yaml",
			old: "readOnlyRootFilesystem:", new: "readOnlyRootFileSystem:", want: `unknown field "spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem"`,
		},
		{
			name: "a misspelt field of the Service", dir: "base", file: "base/service.yaml",
			old: "appProtocol: grpc", new: "appProtocoll: grpc", want: `unknown field "spec.ports[1].appProtocoll"`,
		},
		{
			name: "a misspelt field of the PodDisruptionBudget", dir: "base", file: "base/poddisruptionbudget.yaml",
			old: "maxUnavailable:", new: "maxUnavailible:", want: `unknown field "spec.maxUnavailible"`,
		},
		{
			name: "a value of the wrong type", dir: "base", file: "base/deployment.yaml",
			old: "replicas: 1", new: "replicas: one", want: "cannot unmarshal string",
		},
		{
			name: "a misspelt field in the redis overlay's patch", dir: "overlays/redis", file: "overlays/redis/limiter-redis.yaml",
			old: "resources:", new: "resource:", want: `unknown field "spec.template.spec.containers[0].resource"`,
		},
		{
			name: "a misspelt field of the redis Deployment", dir: "overlays/redis", file: "overlays/redis/redis.yaml",
			old: "emptyDir:", new: "emptyDirectory:", want: `unknown field "spec.template.spec.volumes[0].emptyDirectory"`,
		},
		{
			name: "a misspelt field in the managed overlay's patch", dir: "overlays/redis-managed", file: "overlays/redis-managed/limiter-redis.yaml",
			old: "secretKeyRef:", new: "secretKeyReference:", want: `unknown field "spec.template.spec.containers[0].env[`,
		},
		{
			name: "a base misspelt under an overlay", dir: "overlays/redis", file: "base/deployment.yaml",
			old: "terminationGracePeriodSeconds:", new: "terminationGracePeriod:", want: `unknown field "spec.template.spec.terminationGracePeriod"`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := render(tr.with(t, c.file, c.old, c.new), c.dir)
			switch {
			case c.want == "" && err != nil:
				t.Fatal(err)
			case c.want != "" && err == nil:
				t.Fatalf("rendered and decoded without an error; want one with %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("error %q; want one with %q", err, c.want)
			}
		})
	}
}

// TestTopLevelIsBase: kubectl apply -k deploy/kubernetes applies the base,
// nothing more or less.
func TestTopLevelIsBase(t *testing.T) {
	r := renderAll(t)
	if !bytes.Equal(r["."].yaml, r["base"].yaml) {
		t.Errorf("deploy/kubernetes renders otherwise than deploy/kubernetes/base:\n%s\n---- base:\n%s", r["."].yaml, r["base"].yaml)
	}
}

// TestConfigCopies: the ConfigMap is generated from copies of the bundled
// configuration files (kustomize reads nothing outside the kustomization's
// directory); they must stay the same, byte for byte.
func TestConfigCopies(t *testing.T) {
	bundled, err := filepath.Glob(filepath.Join(repoRoot(t), "config", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	copies, err := filepath.Glob(filepath.Join("base", "config", "*"))
	if err != nil {
		t.Fatal(err)
	}
	names := func(paths []string) string {
		var n []string
		for _, p := range paths {
			n = append(n, filepath.Base(p))
		}
		return strings.Join(n, " ")
	}
	if names(bundled) != names(copies) || len(bundled) == 0 {
		t.Fatalf("config/ has %q, deploy/kubernetes/base/config/ has %q: want the same files", names(bundled), names(copies))
	}
	for i := range bundled {
		a, err := os.ReadFile(bundled[i])
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(copies[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("deploy/kubernetes/%s differs from config/%s: copy it again (cp config/*.yaml deploy/kubernetes/base/config/)", filepath.ToSlash(copies[i]), filepath.Base(bundled[i]))
		}
	}
}
