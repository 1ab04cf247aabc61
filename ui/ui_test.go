package ui

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The page is served whole with a policy that names its one inline style
// and one inline script, and nothing from elsewhere: the page must not
// grow a second inline block (its hash would be missing) or a link to
// another origin (it must work offline).
func TestPage(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/", nil))
	if rec.Code != 200 || !bytes.Equal(rec.Body.Bytes(), page) || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET: %d %q", rec.Code, rec.Header())
	}
	csp := rec.Header().Get("Content-Security-Policy")
	if strings.Count(csp, "'sha256-") != 2 || strings.Contains(csp, "unsafe") {
		t.Fatalf("policy %q", csp)
	}
	for _, s := range []string{"<style", "<script"} {
		if n := bytes.Count(page, []byte(s)); n != 1 {
			t.Errorf("%d %s elements, want 1: the policy hashes one", n, s)
		}
	}
	for _, s := range []string{"http://", "https://", " style=", "innerHTML", "localStorage"} {
		if bytes.Contains(page, []byte(s)) {
			t.Errorf("the page holds %q", s)
		}
	}
	head := httptest.NewRecorder()
	Handler().ServeHTTP(head, httptest.NewRequest(http.MethodHead, "/ui/", nil))
	if head.Code != 200 || head.Body.Len() != 0 {
		t.Fatalf("HEAD: %d with %d bytes", head.Code, head.Body.Len())
	}
}
