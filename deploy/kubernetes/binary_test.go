package kubernetes

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// repoRoot is the limiter repository's root, two levels up from this
// directory, checked by its go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(mod, []byte("module github.com/limiter-dev/limiter\n")) {
		t.Fatalf("%s is not the limiter repository's root (go.mod: %v)", root, err)
	}
	return root
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// limiterBinary builds the limiter from the repository root, once per run.
func limiterBinary(t testing.TB) string {
	t.Helper()
	root := repoRoot(t)
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "limiter-deploy-test-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "limiter")
		// Built as scripts/release.sh and the image build it (static,
		// -trimpath): the binary these manifests run, and one whose
		// packages a test run has mostly compiled already.
		cmd := exec.Command("go", "build", "-trimpath", "-o", binPath, "./cmd/limiter")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/limiter: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// serveHelp is what `limiter serve --help` says: every flag, the
// environment variable of each, and the defaults it prints.
type serveHelp struct {
	flags    map[string]bool   // flag name, without the dashes
	envFlag  map[string]string // LIMITER_* variable -> flag name
	defaults map[string]string // flag name -> default, as printed
}

var (
	helpOnce   sync.Once
	help       serveHelp
	helpErr    error
	flagLine   = regexp.MustCompile(`^  --([a-z0-9-]+)(?: |$)`)
	envInLine  = regexp.MustCompile(`\(env (LIMITER_[A-Z0-9_]+)\)`)
	defaultEnd = regexp.MustCompile(`\(default "?([^")]*)"?\)$`)
)

func limiterHelp(t testing.TB) serveHelp {
	t.Helper()
	bin := limiterBinary(t)
	helpOnce.Do(func() {
		// The usage is read from stdout and stderr both; --help exits 0.
		cmd := exec.Command(bin, "serve", "--help")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			helpErr = fmt.Errorf("limiter serve --help: %v\n%s", err, out.Bytes())
			return
		}
		help = serveHelp{flags: map[string]bool{}, envFlag: map[string]string{}, defaults: map[string]string{}}
		flag := ""
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			line := sc.Text()
			if m := flagLine.FindStringSubmatch(line); m != nil {
				flag = m[1]
				help.flags[flag] = true
				continue
			}
			if flag == "" || !strings.HasPrefix(line, "    ") {
				continue
			}
			// The description follows on an indented line; its end says the
			// variable and the default.
			if m := envInLine.FindStringSubmatch(line); m != nil {
				help.envFlag[m[1]] = flag
			}
			if m := defaultEnd.FindStringSubmatch(line); m != nil {
				help.defaults[flag] = m[1]
			}
		}
		if len(help.flags) < 20 || len(help.envFlag) != len(help.flags) {
			helpErr = fmt.Errorf("limiter serve --help: read %d flags and %d variables; the format changed?\n%s", len(help.flags), len(help.envFlag), out.Bytes())
		}
	})
	if helpErr != nil {
		t.Fatal(helpErr)
	}
	return help
}

// TestHelpParsed guards the parsing itself with flags the manifests rely on.
func TestHelpParsed(t *testing.T) {
	h := limiterHelp(t)
	for env, flag := range map[string]string{
		"LIMITER_LISTEN":           "listen",
		"LIMITER_GRPC_LISTEN":      "grpc-listen",
		"LIMITER_ADMIN_TOKEN_FILE": "admin-token-file",
		"LIMITER_SOURCE":           "source",
	} {
		if h.envFlag[env] != flag {
			t.Errorf("%s is the variable of --%q, want --%s", env, h.envFlag[env], flag)
		}
	}
	if h.defaults["shutdown-timeout"] == "" || h.defaults["source-timeout"] == "" {
		t.Errorf("no default read for --shutdown-timeout or --source-timeout: %v", h.defaults)
	}
}
