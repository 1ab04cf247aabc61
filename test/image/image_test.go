//go:build image

package image

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/internal/redistest"
)

// imageName is the image under test: the tag scripts/image.sh builds.
var imageName = envOr("LIMITER_IMAGE", "limiter:dev")

// caBundle is the CA bundle scripts/image.sh copies into the image.
var caBundle = envOr("LIMITER_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")

// configDir is the repository's bundled configuration, which the image
// holds at /etc/limiter.
const configDir = "../../config"

// The image's user, and where it expects the admin token file.
const (
	imageUser      = "65532:65532"
	tokenMountDir  = "/run/secrets/limiter"
	tokenFileName  = "admin-tokens"
	imageConfigDir = "/etc/limiter"
)

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// TestMain fails the run at once, with what to do, when there is no
// Docker daemon or no image: these tests are run on purpose (-tags
// image), so nothing here is skipped.
func TestMain(m *testing.M) {
	if out, err := docker("info", "--format", "{{.ServerVersion}}"); err != nil {
		fmt.Fprintf(os.Stderr, "image tests: no Docker daemon answers (docker info: %v):\n%s", err, out)
		os.Exit(1)
	}
	if out, err := docker("image", "inspect", "--format", "{{.Id}}", imageName); err != nil {
		fmt.Fprintf(os.Stderr, "image tests: no image %s; build it with scripts/image.sh (%v):\n%s", imageName, err, out)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// docker runs the docker CLI and returns what it printed, stdout and
// stderr together.
func docker(args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.Command("docker", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func mustDocker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := docker(args...)
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

// uniqueName is a container name no other run uses.
func uniqueName(t *testing.T) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "limiter-image-test-" + hex.EncodeToString(b)
}

// tokenSecret writes an admin token file as a mounted Secret holds it:
// a directory with the file, readable by the image's user. It returns the
// directory and the token.
func tokenSecret(t *testing.T) (dir, token string) {
	t.Helper()
	dir = t.TempDir()
	token = "image-test-admin-" + uniqueName(t)
	if err := os.WriteFile(filepath.Join(dir, tokenFileName), []byte("# admin tokens, one a line\n"+token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chmod(t, dir, 0o755)
	chmod(t, filepath.Join(dir, tokenFileName), 0o644)
	return dir, token
}

// chmod sets a mode whatever the umask: the container's user reads
// what the test writes as another user.
func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// container is one `limiter serve` running from the image.
type container struct {
	t     *testing.T
	name  string
	URL   string // the HTTP API, on a loopback port of the host
	token string // an admin token of its token file
}

// runOptions say how to run a container: variables added to (or
// replacing) the test defaults, and bind mounts (host:container[:ro]).
type runOptions struct {
	env    map[string]string
	mounts []string
}

var listeningLine = regexp.MustCompile(`msg=listening addr=(\S+)`)

// startContainer runs the image detached on the host's network, with its
// API and gRPC listeners on free loopback ports (the image's 0.0.0.0:8080
// and :8081 would be every interface of the host, and may be taken), an
// admin token file mounted where the image expects one, and the hardening
// a deployment would add; it waits until the service logs that it
// listens. The container is removed when the test ends, and its log shown
// if the test failed.
func startContainer(t *testing.T, opts runOptions) *container {
	t.Helper()
	secret, token := tokenSecret(t)
	env := map[string]string{
		"LIMITER_LISTEN":      "127.0.0.1:0",
		"LIMITER_GRPC_LISTEN": "127.0.0.1:0",
	}
	for k, v := range opts.env {
		env[k] = v
	}
	c := &container{t: t, name: uniqueName(t), token: token}
	// Hardened as docs/operations.md suggests: a read-only root file
	// system, no capabilities, no privilege gained.
	args := []string{"run", "--detach", "--network", "host", "--name", c.name,
		"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--volume", secret + ":" + tokenMountDir + ":ro"}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--env", k+"="+env[k])
	}
	for _, m := range opts.mounts {
		args = append(args, "--volume", m)
	}
	args = append(args, imageName)
	if out, err := docker(args...); err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of container %s:\n%s", c.name, c.logs())
		}
		if out, err := docker("rm", "--force", "--volumes", c.name); err != nil {
			t.Errorf("removing container %s: %v\n%s", c.name, err, out)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		logs := c.logs()
		if m := listeningLine.FindStringSubmatch(logs); m != nil {
			c.URL = "http://" + m[1]
			return c
		}
		if c.inspect("{{.State.Running}}") != "true" {
			t.Fatalf("container %s exited before listening (exit code %s):\n%s", c.name, c.inspect("{{.State.ExitCode}}"), logs)
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s did not listen within 30s:\n%s", c.name, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logs is everything the container has written; the service logs to
// stderr.
func (c *container) logs() string {
	out, _ := docker("logs", c.name)
	return out
}

func (c *container) inspect(format string) string {
	c.t.Helper()
	return mustDocker(c.t, "container", "inspect", "--format", format, c.name)
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// call sends a request with a JSON body (when body is not empty) and an
// admin token (when admin), and returns the status and body.
func (c *container) call(method, path, body string, admin bool) (int, []byte) {
	c.t.Helper()
	status, b, err := c.try(method, path, body, admin)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return status, b
}

// try is call for use off the test's goroutine: it returns the error.
func (c *container) try(method, path, body string, admin bool) (int, []byte, error) {
	req, err := http.NewRequest(method, c.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if admin {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// decision is the part of a decision response the tests read.
type decision struct {
	Allowed   bool  `json:"allowed"`
	Remaining int64 `json:"remaining"`
}

// spend spends one token of limit for id, as README's example does.
func (c *container) spend(limit, id string) (decision, error) {
	status, body, err := c.try(http.MethodPost, "/v1/spend", fmt.Sprintf(`{"limit": %q, "id": %q}`, limit, id), false)
	if err != nil {
		return decision{}, err
	}
	if status != http.StatusOK {
		return decision{}, fmt.Errorf("spend: %d %s", status, body)
	}
	var d decision
	if err := json.Unmarshal(body, &d); err != nil {
		return decision{}, fmt.Errorf("spend: %v in %s", err, body)
	}
	return d, nil
}

func (c *container) mustSpend(limit, id string) decision {
	c.t.Helper()
	d, err := c.spend(limit, id)
	if err != nil {
		c.t.Fatalf("%s: %v", c.name, err)
	}
	return d
}

// defaultBurst is the burst GET /v1/limits gives as limit's default.
func (c *container) defaultBurst(limit string) int64 {
	c.t.Helper()
	status, body := c.call(http.MethodGet, "/v1/limits", "", false)
	if status != http.StatusOK {
		c.t.Fatalf("GET /v1/limits: %d %s", status, body)
	}
	var v struct {
		Limits []struct {
			Limit   string `json:"limit"`
			Default *struct {
				Burst int64 `json:"burst"`
			} `json:"default"`
		} `json:"limits"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		c.t.Fatalf("GET /v1/limits: %v in %s", err, body)
	}
	for _, l := range v.Limits {
		if l.Limit == limit && l.Default != nil {
			return l.Default.Burst
		}
	}
	c.t.Fatalf("GET /v1/limits has no default for %s: %s", limit, body)
	return 0
}

// waitForBurst polls GET /v1/limits until limit's default burst is want,
// and returns how long that took.
func (c *container) waitForBurst(limit string, want int64, within time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	for {
		got := c.defaultBurst(limit)
		if got == want {
			return time.Since(start)
		}
		if time.Since(start) > within {
			c.t.Fatalf("%s's default burst is still %d, not %d, %v after the change", limit, got, want, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The image as built: a numeric non-root user, the binary as entrypoint
// with serve as its command, both ports, the defaults as the binary's own
// variables, the bundled configuration and the host's CA bundle at their
// paths, and the version scripts/image.sh stamped, in the label and in
// the binary alike.
func TestImageLayout(t *testing.T) {
	t.Parallel()
	var cfg struct {
		User         string
		Entrypoint   []string
		Cmd          []string
		ExposedPorts map[string]struct{}
		Env          []string
		Labels       map[string]string
	}
	if err := json.Unmarshal([]byte(mustDocker(t, "image", "inspect", "--format", "{{json .Config}}", imageName)), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.User != imageUser {
		t.Errorf("user %q, want %q", cfg.User, imageUser)
	}
	if !slices.Equal(cfg.Entrypoint, []string{"/limiter"}) || !slices.Equal(cfg.Cmd, []string{"serve"}) {
		t.Errorf("entrypoint %q and command %q, want [/limiter] and [serve]", cfg.Entrypoint, cfg.Cmd)
	}
	for _, port := range []string{"8080/tcp", "8081/tcp"} {
		if _, ok := cfg.ExposedPorts[port]; !ok {
			t.Errorf("port %s not exposed: %v", port, cfg.ExposedPorts)
		}
	}
	for _, want := range []string{
		"LIMITER_LISTEN=0.0.0.0:8080",
		"LIMITER_GRPC_LISTEN=0.0.0.0:8081",
		"LIMITER_DEFAULTS=/etc/limiter/defaults.yaml",
		"LIMITER_OVERRIDES=/etc/limiter/overrides.yaml",
		"LIMITER_DESCRIPTORS=/etc/limiter/descriptors.yaml",
		"LIMITER_FORWARD_AUTH=/etc/limiter/forward-auth.yaml",
		"LIMITER_ADMIN_TOKEN_FILE=" + tokenMountDir + "/" + tokenFileName,
		"LIMITER_SHUTDOWN_TIMEOUT=4s",
	} {
		if !slices.Contains(cfg.Env, want) {
			t.Errorf("no %s in the image's environment: %q", want, cfg.Env)
		}
	}

	// The files, as docker cp reads them from a container never started.
	name := uniqueName(t)
	mustDocker(t, "container", "create", "--name", name, imageName)
	t.Cleanup(func() { _, _ = docker("rm", "--force", name) })
	files := copyOut(t, name, imageConfigDir)
	bundled, err := filepath.Glob(filepath.Join(configDir, "*.yaml"))
	if err != nil || len(bundled) == 0 {
		t.Fatalf("no bundled config in %s (%v)", configDir, err)
	}
	for _, path := range bundled {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := files["limiter/"+filepath.Base(path)]
		if !ok {
			t.Errorf("no %s in %s: %v", filepath.Base(path), imageConfigDir, slices.Sorted(maps.Keys(files)))
		} else if !bytes.Equal(got, want) {
			t.Errorf("%s/%s differs from %s", imageConfigDir, filepath.Base(path), path)
		}
	}
	if len(files) != len(bundled) {
		t.Errorf("%s holds %v, want the %d bundled files", imageConfigDir, slices.Sorted(maps.Keys(files)), len(bundled))
	}
	wantCA, err := os.ReadFile(caBundle)
	if err != nil {
		t.Fatal(err)
	}
	ca := copyOut(t, name, "/etc/ssl/certs/ca-certificates.crt")
	if !bytes.Equal(ca["ca-certificates.crt"], wantCA) {
		t.Errorf("the image's CA bundle is not %s (%d bytes against %d)", caBundle, len(ca["ca-certificates.crt"]), len(wantCA))
	}

	version := cfg.Labels["org.opencontainers.image.version"]
	if version == "" || version == "dev" {
		t.Errorf("the image's version label is %q, want the stamped version", version)
	}
	out, err := docker("run", "--rm", "--network", "none", imageName, "version")
	if err != nil || strings.TrimSpace(out) != "limiter "+version {
		t.Errorf("limiter version in the image: %q (%v), want %q", out, err, "limiter "+version)
	}
}

// copyOut reads path out of a container (docker cp to a tar stream) and
// returns its regular files by their names in the stream.
func copyOut(t *testing.T, name, path string) map[string][]byte {
	t.Helper()
	var out, stderr bytes.Buffer
	cmd := exec.Command("docker", "cp", name+":"+path, "-")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker cp %s:%s: %v\n%s", name, path, err, stderr.String())
	}
	files := map[string][]byte{}
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}

// Run as shipped, without a token file mounted, the service refuses to
// start, and says why; with the token file's variable emptied, it refuses
// to serve every interface without one. Neither gets as far as listening;
// the containers have no network all the same.
func TestImageRefusesWithoutAdminToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantLog  string
	}{
		{"no token file mounted", nil, 2,
			`msg="limiter stopped" err="token file: open ` + tokenMountDir + "/" + tokenFileName + `: no such file or directory"`},
		{"no token file named", []string{"--env", "LIMITER_ADMIN_TOKEN_FILE="}, 2,
			"limiter serve: --listen 0.0.0.0:8080 is reachable beyond this host, and there is no --admin-token-file (LIMITER_ADMIN_TOKEN_FILE)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"run", "--rm", "--network", "none"}, tc.args...), imageName)
			out, err := docker(args...)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != tc.wantCode {
				t.Fatalf("docker run: %v, want exit code %d:\n%s", err, tc.wantCode, out)
			}
			if !strings.Contains(out, tc.wantLog) {
				t.Errorf("the log does not say %q:\n%s", tc.wantLog, out)
			}
		})
	}
}

// On the memory source, with the bundled configuration: it answers
// README's spend, health and readiness, the gRPC listener is up, reset
// needs the mounted admin token, and the process runs as the image's
// user, as the host's /proc sees it.
func TestImageServesMemory(t *testing.T) {
	t.Parallel()
	c := startContainer(t, runOptions{})
	for _, path := range []string{"/healthz", "/readyz"} {
		if status, body := c.call(http.MethodGet, path, "", false); status != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, status, body)
		}
	}
	if d := c.mustSpend("LoginAttemptsPerUser", "alice"); !d.Allowed || d.Remaining != 4 {
		t.Errorf("README's spend: %+v, want allowed with 4 remaining", d)
	}
	if !strings.Contains(c.logs(), "msg=listening server=grpc") {
		t.Errorf("no gRPC listener in the log:\n%s", c.logs())
	}
	reset := `{"limit": "LoginAttemptsPerUser", "id": "alice"}`
	if status, body := c.call(http.MethodPost, "/v1/reset", reset, false); status != http.StatusUnauthorized {
		t.Errorf("reset without a token: %d %s, want 401", status, body)
	}
	if status, body := c.call(http.MethodPost, "/v1/reset", reset, true); status != http.StatusOK || strings.TrimSpace(string(body)) != `{"reset":1}` {
		t.Errorf("reset with the mounted admin token: %d %s, want 200 {\"reset\":1}", status, body)
	}

	pid := c.inspect("{{.State.Pid}}")
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatalf("the container's process %s as the host sees it: %v", pid, err)
	}
	for _, field := range []string{"Uid:", "Gid:"} {
		var ids []string
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, field) {
				ids = strings.Fields(strings.TrimPrefix(line, field))
			}
		}
		// real, effective, saved and filesystem ids
		if len(ids) != 4 || slices.ContainsFunc(ids, func(id string) bool { return id != "65532" }) {
			t.Errorf("process %s has %s %q, want 65532 four times", pid, field, ids)
		}
	}
}

// Two containers on one Redis share every limit exactly: a burst of 5
// spent in turns across both, then denied on either; and 20 spends at
// once across both allow exactly 5.
func TestImageRedisShared(t *testing.T) {
	t.Parallel()
	redis := redistest.NewStandalone(t)
	// Generous timeouts, for tests of what is decided rather than how
	// fast, on a busy machine.
	env := map[string]string{
		"LIMITER_SOURCE":              redis.URL(),
		"LIMITER_SOURCE_TIMEOUT":      "2s",
		"LIMITER_REDIS_DIAL_TIMEOUT":  "1s",
		"LIMITER_REDIS_READ_TIMEOUT":  "1s",
		"LIMITER_REDIS_WRITE_TIMEOUT": "1s",
	}
	both := []*container{startContainer(t, runOptions{env: env}), startContainer(t, runOptions{env: env})}
	for _, c := range both {
		if logs := c.logs(); !strings.Contains(logs, " source=redis ") {
			t.Fatalf("%s does not use the Redis source:\n%s", c.name, logs)
		}
	}
	const limit, burst = "LoginAttemptsPerUser", 5 // the bundled configuration's

	for i := range burst {
		c := both[i%2]
		if d := c.mustSpend(limit, "alice"); !d.Allowed || d.Remaining != int64(burst-1-i) {
			t.Fatalf("spend %d of %d, on %s: %+v, want allowed with %d remaining", i+1, burst, c.name, d, burst-1-i)
		}
	}
	for _, c := range both {
		if d := c.mustSpend(limit, "alice"); d.Allowed {
			t.Errorf("a spend beyond the burst on %s was allowed: %+v", c.name, d)
		}
	}

	const spends = 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed, errs := 0, []error(nil)
	for i := range spends {
		wg.Add(1)
		go func(c *container) {
			defer wg.Done()
			d, err := c.spend(limit, "bob")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if d.Allowed {
				allowed++
			}
		}(both[i%2])
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent spends failed: %v", errs)
	}
	if allowed != burst {
		t.Errorf("%d concurrent spends across both containers allowed %d, want exactly %d", spends, allowed, burst)
	}
}

// configMap is a directory laid out as Kubernetes lays out a mounted
// ConfigMap: the files in a timestamped directory, a ..data symlink to it,
// and each file a symlink through ..data. An update writes a new
// timestamped directory, points ..data_tmp at it, renames that over ..data
// (the one atomic step) and removes the old directory.
type configMap struct {
	t       *testing.T
	dir     string
	current string // the timestamped directory ..data points at
}

func newConfigMap(t *testing.T, files map[string][]byte) *configMap {
	t.Helper()
	cm := &configMap{t: t, dir: t.TempDir()}
	chmod(t, cm.dir, 0o755)
	cm.update(files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(cm.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return cm
}

func (cm *configMap) update(files map[string][]byte) {
	t := cm.t
	t.Helper()
	ts, err := os.MkdirTemp(cm.dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		t.Fatal(err)
	}
	chmod(t, ts, 0o755)
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(ts, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
		chmod(t, filepath.Join(ts, name), 0o644)
	}
	tmp := filepath.Join(cm.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(cm.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if cm.current != "" {
		if err := os.RemoveAll(cm.current); err != nil {
			t.Fatal(err)
		}
	}
	cm.current = ts
}

// bundledConfig is the repository's config/*.yaml by file name, and the
// same with LoginAttemptsPerUser's burst and count raised from 5 to 7.
func bundledConfig(t *testing.T) (files, raised map[string][]byte) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(configDir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no bundled config in %s (%v)", configDir, err)
	}
	files, raised = map[string][]byte{}, map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)], raised[filepath.Base(p)] = b, b
	}
	const from = "LoginAttemptsPerUser:\n  enum: 101\n  id: string\n  burst: 5\n  count: 5\n"
	if !bytes.Contains(files["defaults.yaml"], []byte(from)) {
		t.Fatalf("the bundled defaults.yaml no longer has %q; update this test", from)
	}
	raised["defaults.yaml"] = bytes.Replace(files["defaults.yaml"], []byte(from),
		[]byte(strings.ReplaceAll(from, ": 5\n", ": 7\n")), 1)
	return files, raised
}

// A configuration directory mounted as Kubernetes mounts a ConfigMap, in
// place of the bundled one, is reloaded without a restart when Kubernetes
// swaps in a new version: the watch follows the symlinks.
func TestImageConfigMapReload(t *testing.T) {
	t.Parallel()
	files, raised := bundledConfig(t)
	cm := newConfigMap(t, files)
	c := startContainer(t, runOptions{mounts: []string{cm.dir + ":" + imageConfigDir + ":ro"}})
	if got := c.defaultBurst("LoginAttemptsPerUser"); got != 5 {
		t.Fatalf("LoginAttemptsPerUser's burst before the update: %d, want 5", got)
	}
	cm.update(raised)
	took := c.waitForBurst("LoginAttemptsPerUser", 7, 15*time.Second)
	t.Logf("the new version was in use %v after the swap", took.Round(time.Millisecond))
	if d := c.mustSpend("LoginAttemptsPerUser", "carol"); !d.Allowed || d.Remaining != 6 {
		t.Errorf("a spend after the reload: %+v, want allowed with 6 remaining", d)
	}
	logs := c.logs()
	if !strings.Contains(logs, `msg="configuration reloaded" trigger="file change"`) {
		t.Errorf("no reload by the file watch in the log:\n%s", logs)
	}
	if n := len(listeningLine.FindAllString(logs, -1)); n != 1 {
		t.Errorf("the service started %d times, want once:\n%s", n, logs)
	}
}

// The binary is PID 1 and gets the signals a runtime sends: SIGHUP
// reloads (the file watch is off here, so nothing else does), and
// docker stop's SIGTERM drains and exits 0 well within docker's 10 s.
func TestImageSignals(t *testing.T) {
	t.Parallel()
	files, raised := bundledConfig(t)
	cm := newConfigMap(t, files)
	c := startContainer(t, runOptions{
		env:    map[string]string{"LIMITER_RELOAD_INTERVAL": "0"},
		mounts: []string{cm.dir + ":" + imageConfigDir + ":ro"},
	})
	cm.update(raised)
	mustDocker(t, "kill", "--signal", "HUP", c.name)
	c.waitForBurst("LoginAttemptsPerUser", 7, 10*time.Second)
	if logs := c.logs(); !strings.Contains(logs, `msg="configuration reloaded" trigger=SIGHUP`) {
		t.Errorf("no reload by SIGHUP in the log:\n%s", logs)
	}

	start := time.Now()
	mustDocker(t, "stop", c.name)
	took := time.Since(start)
	t.Logf("docker stop took %v", took.Round(time.Millisecond))
	if code := c.inspect("{{.State.ExitCode}}"); code != "0" {
		t.Errorf("exit code %s after docker stop, want 0:\n%s", code, c.logs())
	}
	if took > 5*time.Second {
		t.Errorf("docker stop took %v, want well within its 10s grace", took)
	}
	logs := c.logs()
	for _, want := range []string{"msg=\"shutting down: finishing in-flight requests\"", "msg=stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no %s in the log:\n%s", want, logs)
		}
	}
}
