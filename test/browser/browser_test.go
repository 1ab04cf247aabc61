//go:build browser

package browser

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// adminToken is the admin token the service under test is given.
const adminToken = "ui-test-admin-token"

// binary is the limiter built once for every test.
var binary string

// TestMain builds the limiter, and fails the run at once, with what to do,
// when there is no Chromium: these tests are run on purpose (-tags
// browser), so nothing here is skipped.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if _, err := browserPath(); err != nil {
		fmt.Fprintln(os.Stderr, "browser tests:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "limiter-ui-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "limiter")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/limiter")...)
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the limiter failed: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// browserPath finds Debian's chromium (or CHROMIUM, when set).
func browserPath() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no chromium in PATH; install it (e.g. sudo apt-get install -y chromium) or set CHROMIUM")
}

var listeningLine = regexp.MustCompile(`msg=listening addr=(\S+)`)

// service is one `limiter serve` on the bundled configuration, a fake
// clock and an admin token, on a free loopback port.
type service struct {
	URL  string
	logs *bytes.Buffer
	mu   sync.Mutex
}

func startService(t *testing.T) *service {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "admin-tokens")
	if err := os.WriteFile(tokens, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve", "--admin-token-file", tokens)
	cmd.Dir = "../.."
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"LIMITER_LISTEN=127.0.0.1:0", "LIMITER_FAKECLOCK=2026-11-22T00:00:00Z"}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &service{logs: &bytes.Buffer{}}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.mu.Lock()
			s.logs.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := listeningLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	select {
	case a := <-addr:
		s.URL = "http://" + a
	case <-time.After(30 * time.Second):
		s.mu.Lock()
		defer s.mu.Unlock()
		t.Fatalf("limiter did not listen within 30s:\n%s", s.logs)
	}
	return s
}

// spend spends one token of limit for id over HTTP, and reports whether
// it was allowed.
func (s *service) spend(t *testing.T, limit, id string) bool {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+"/v1/spend", strings.NewReader(fmt.Sprintf(`{"limit":%q,"id":%q}`, limit, id)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("spend: %d %s", resp.StatusCode, b.String())
	}
	return strings.HasPrefix(b.String(), `{"allowed":true`)
}

// newBrowser starts a headless Chromium with a profile of its own, and a
// tab in it; everything the test does in it must end within a minute.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := browserPath()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.CombinedOutput(&out),
	)
	ctx, cancelTab := chromedp.NewContext(alloc)
	ctx, cancelTime := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
		cancelAlloc()
		if t.Failed() && out.Len() > 0 {
			t.Logf("chromium's output:\n%s", out.String())
		}
	})
	return ctx
}

// waitText waits until the text of the element sel holds want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	js := fmt.Sprintf(`(document.querySelector(%q) || {}).textContent?.includes(%q) ? true : false`, sel, want)
	ok, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil || !ok {
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || "(no such element)"`, sel)))
		t.Fatalf("%s never held %q (%v); it holds: %s", sel, want, err, strings.Join(strings.Fields(text), " "))
	}
}

// textOf returns the text of the element sel, spaces collapsed; of a
// table row, its cells' texts joined by spaces.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(() => {
		const e = document.querySelector(%q);
		if (!e) return "";
		return e.tagName === "TR" ? [...e.cells].map((c) => c.textContent).join(" ") : e.textContent;
	})()`, sel)))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(text), " ")
}

// The page end to end: it asks for the admin token, refuses a wrong one
// in plain words, then shows the denials made over HTTP in the top list
// and the penalty box, and the lookup shows an id's bucket.
func TestOperatorPage(t *testing.T) {
	s := startService(t)
	// LoginAttemptsPerAccount allows 5 in 15 minutes, then boxes for 15:
	// account 12345 is denied 3 times, 67890 once.
	for i := range 8 {
		if allowed := s.spend(t, "LoginAttemptsPerAccount", "12345"); allowed != (i < 5) {
			t.Fatalf("spend %d of 12345: allowed %v", i+1, allowed)
		}
	}
	for range 6 {
		s.spend(t, "LoginAttemptsPerAccount", "67890")
	}

	ctx := newBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/ui/")); err != nil {
		t.Fatal(err)
	}
	// No token yet: the page says it needs one and opens the form.
	waitText(t, ctx, "#errors", "needs its admin token")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("token-input"))); err != nil {
		t.Fatal(err)
	}

	// A wrong token: refused, in words, and the form stays open.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("token-input"), "not-the-token"),
		chromedp.Click(chromedp.CSS(`#token-form button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#errors", "The admin token was refused (401 unauthorized)")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("token-form"))); err != nil {
		t.Fatal(err)
	}

	// The right token: the lists fill, and the error goes.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("token-input"), adminToken),
		chromedp.Click(chromedp.CSS(`#token-form button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "#limits", "LoginAttemptsPerAccount")
	waitText(t, ctx, `#top tr[data-id="12345"]`, "3")
	if row := textOf(t, ctx, `#top tr[data-id="12345"]`); row != "LoginAttemptsPerAccount 12345 3 0" {
		t.Errorf("top row of 12345: %q, want its limit, id, 3 denials and no error", row)
	}
	if row := textOf(t, ctx, `#top tr[data-id="67890"]`); row != "LoginAttemptsPerAccount 67890 1 0" {
		t.Errorf("top row of 67890: %q", row)
	}
	if errs := textOf(t, ctx, "#errors"); errs != "" {
		t.Errorf("errors still shown with the right token: %q", errs)
	}
	// The hour's list holds the same denials.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("window-1h"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, `#window-1h[aria-pressed="true"]`, "1h")
	waitText(t, ctx, `#top tr[data-id="12345"]`, "3")

	// Both accounts are in the box, 12345 for 15 minutes from its sixth try.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#limits tr[data-limit="LoginAttemptsPerAccount"]`))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, `#boxes tr[data-id="12345"]`, "2026-11-22T00:15:00.000Z")
	waitText(t, ctx, `#boxes tr[data-id="67890"]`, "15m")

	// The lookup: 12345 is boxed with nothing left; 55555 has its 5.
	lookup := func(id string) {
		t.Helper()
		if err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.ID("lookup-limit"), "LoginAttemptsPerAccount"),
			chromedp.SetValue(chromedp.ID("lookup-id"), id),
			chromedp.Click(chromedp.CSS(`#lookup-form button[type="submit"]`)),
		); err != nil {
			t.Fatal(err)
		}
		waitText(t, ctx, `#lookup-state dd[data-key="id"]`, id)
	}
	state := func(key string) string { return textOf(t, ctx, `#lookup-state dd[data-key="`+key+`"]`) }
	lookup("12345")
	if v, r, retry, boxed := textOf(t, ctx, "#lookup-verdict"), state("remaining"), state("retry in"), state("in the penalty box"); v != "A request now: denied" || r != "0 of 5" || retry != "15m" || boxed != "yes" {
		t.Errorf("lookup of 12345: %q, remaining %q, retry in %q, boxed %q", v, r, retry, boxed)
	}
	lookup("55555")
	if v, r, reset, boxed := textOf(t, ctx, "#lookup-verdict"), state("remaining"), state("reset in"), state("in the penalty box"); v != "A request now: allowed" || r != "5 of 5" || reset != "0s" || boxed != "no" {
		t.Errorf("lookup of 55555: %q, remaining %q, reset in %q, boxed %q", v, r, reset, boxed)
	}

	// The last reload and the source's health.
	waitText(t, ctx, "#reload-last", "loaded")
	waitText(t, ctx, "#reload", "config/defaults.yaml")
	waitText(t, ctx, "#health", "source: ready")

	// The token never went into a URL; it is in this tab's sessionStorage.
	href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	if err != nil || strings.Contains(href, adminToken) {
		t.Errorf("location %q (%v) holds the token", href, err)
	}
	if stored, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("limiter.adminToken")`)); stored != adminToken {
		t.Errorf("sessionStorage holds %q", stored)
	}

	// With auto-refresh on, denials made after the page loaded show
	// without a click on Refresh (it runs every 10 s).
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("auto-refresh"))); err != nil {
		t.Fatal(err)
	}
	if on, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("limiter.autoRefresh")`)); on != "1" {
		t.Fatalf("auto-refresh on, sessionStorage holds %q", on)
	}
	for range 7 {
		s.spend(t, "LoginAttemptsPerAccount", "24680")
	}
	waitText(t, ctx, `#top tr[data-id="24680"]`, "2")
	waitText(t, ctx, `#boxes tr[data-id="24680"]`, "15m")

	if dir := os.Getenv("LIMITER_UI_SCREENSHOTS"); dir != "" {
		screenshots(t, ctx, dir)
	}
}

// screenshots saves the page at a desktop's width and a phone's, as
// docs/operations.md shows it, and checks each stays well under 1 MB.
func screenshots(t *testing.T, ctx context.Context, dir string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("window-5m"))); err != nil {
		t.Fatal(err)
	}
	for _, size := range []struct {
		name          string
		width, height int64
	}{{"ui-1280.png", 1280, 1000}, {"ui-420.png", 420, 1400}} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(size.width, size.height),
			chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`)); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if len(png) > 600<<10 {
			t.Errorf("%s is %d KB, want well under 1 MB", size.name, len(png)>>10)
		}
		if err := os.WriteFile(filepath.Join(dir, size.name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
