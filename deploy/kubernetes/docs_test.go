package kubernetes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// userDir is a directory of the user's own beside the checkout, relative to
// this directory in the in-memory file system (memRoot).
const userDir = "../../../mine"

// TestOwnKustomizationExample renders the kustomization docs/operations.md
// shows under "Your own kustomization", as written there, in a directory
// beside a checkout with the four files of its own, on the base and on the
// Redis overlay, and runs every check on the result (the ConfigMap compared
// with those files).
func TestOwnKustomizationExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n### Your own kustomization\n")
	if !ok {
		t.Fatal(`docs/operations.md has no "### Your own kustomization" section`)
	}
	_, block, ok := strings.Cut(section, "\n```yaml\n")
	block, _, closed := strings.Cut(block, "\n```\n")
	if !ok || !closed {
		t.Fatal(`no yaml block in "Your own kustomization" of docs/operations.md`)
	}
	const baseRef = "../limiter/deploy/kubernetes/base"
	if !strings.Contains(block, "  - "+baseRef+"\n") {
		t.Fatalf("the example's resources do not name %s:\n%s", baseRef, block)
	}
	h := limiterHelp(t)
	// The user's files: the bundled ones with a line of their own, so that
	// the ConfigMap is seen to be made of them.
	mine := map[string][]byte{}
	for name, b := range bundledConfig(t) {
		mine[name] = append(append([]byte{}, b...), "\n# mine\n"...)
	}
	for _, resource := range []string{baseRef, "../limiter/deploy/kubernetes/overlays/redis"} {
		t.Run(resource, func(t *testing.T) {
			tr := readTree(t)
			tr[userDir+"/kustomization.yaml"] = []byte(strings.Replace(block, baseRef, resource, 1) + "\n")
			for name, b := range mine {
				tr[userDir+"/"+name] = b
			}
			r, err := render(tr, userDir)
			if err != nil {
				t.Fatal(err)
			}
			for _, pr := range check(r, h, mine) {
				t.Error(pr)
			}
			for _, o := range r.objects {
				switch x := o.obj.(type) {
				case *appsv1.Deployment:
					if img := x.Spec.Template.Spec.Containers[0].Image; o.name == limiterName && img != "registry.example/limiter:1.0" {
						t.Errorf("image %s, want the example's registry.example/limiter:1.0", img)
					}
				case *corev1.ConfigMap:
					if o.name != "limiter-config" {
						t.Errorf("ConfigMap %s, want limiter-config, updated in place", o.name)
					}
				}
			}
		})
	}
}
