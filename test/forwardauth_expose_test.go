package test

import (
	"strings"
	"testing"
)

// What a rule's answers show, through the binary: by default the
// deciding limit alone, in the headers and the body; under expose: none
// the status, and Retry-After on a refusal, with no body; under expose:
// all every decision. The three rules count the same two limits,
// FATight (2 a minute) deciding.
func TestForwardAuthExpose(t *testing.T) {
	t.Parallel()
	p, _ := startForwardAuth(t, faTrusted)
	const policy = `"FATight";q=2;w=60`

	t.Run("deciding", func(t *testing.T) {
		for i, want := range []int{200, 200, 429} {
			r := forwardAuth(t, p, "GET", "pair", "", "X-Api-Key: x1", "X-Other: o1")
			a := decoded(t, r)
			if r.Status != want || len(a.Decisions) != 1 || a.Decisions[0].Limit != "FATight" || r.Header.Get("RateLimit-Policy") != policy {
				t.Errorf("call %d: %d %v %s; want %d with FATight's decision and headers alone", i+1, r.Status, r.Header, r.Body, want)
			}
			if strings.Contains(string(r.Body), "FAByKey") {
				t.Errorf("call %d: the body shows the limit that did not decide: %s", i+1, r.Body)
			}
		}
	})

	t.Run("none", func(t *testing.T) {
		for i, tt := range []struct {
			method     string
			status     int
			retryAfter string
		}{{"GET", 200, ""}, {"HEAD", 200, ""}, {"GET", 429, "30"}, {"HEAD", 429, "30"}} {
			r := forwardAuth(t, p, tt.method, "pair-none", "", "X-Api-Key: x2", "X-Other: o2")
			if r.Status != tt.status || len(r.Body) != 0 || r.Header.Get("Retry-After") != tt.retryAfter {
				t.Errorf("call %d (%s): %d, Retry-After %q, body %q; want %d, %q, none", i+1, tt.method, r.Status, r.Header.Get("Retry-After"), r.Body, tt.status, tt.retryAfter)
			}
			for _, h := range []string{"RateLimit", "RateLimit-Policy", "Content-Type"} {
				if v := r.Header.Get(h); v != "" {
					t.Errorf("call %d (%s): %s %q", i+1, tt.method, h, v)
				}
			}
			if tt.method == "GET" && r.Header.Get("Content-Length") != "0" {
				t.Errorf("call %d: Content-Length %q; want 0", i+1, r.Header.Get("Content-Length"))
			}
		}
		// Shown or not, both limits were spent.
		if a, b := checkRemaining(t, p, "", "FATight", "x2"), checkRemaining(t, p, "", "FAByKey", "o2"); a != 0 || b != 998 {
			t.Errorf("FATight x2 has %d left, FAByKey o2 %d; want 0 and 998", a, b)
		}
	})

	t.Run("all", func(t *testing.T) {
		for i, want := range []int{200, 200, 429} {
			r := forwardAuth(t, p, "GET", "pair-all", "", "X-Api-Key: x3", "X-Other: o3")
			a := decoded(t, r)
			if r.Status != want || len(a.Decisions) != 2 || a.Decisions[0].Limit != "FATight" || a.Decisions[1].Limit != "FAByKey" ||
				r.Header.Get("RateLimit-Policy") != policy {
				t.Errorf("call %d: %d %v %s; want %d with both decisions, FATight's headers", i+1, r.Status, r.Header, r.Body, want)
			}
		}
	})
}
