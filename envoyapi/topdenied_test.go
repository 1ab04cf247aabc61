package envoyapi_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/decisionmetrics"
)

// denialsOf lists the denials a front end handed the decision series.
type denialsOf []string

func (d *denialsOf) Denied(limit, id string) { *d = append(*d, limit+"/"+id) }

// Envoy's denials reach the top lists through the shared decision series,
// as the HTTP API's do.
func TestDenialsReachTheTopLists(t *testing.T) {
	var seen denialsOf
	h := start(t, func(su *setup) {
		reg := prometheus.NewRegistry()
		su.opts.Registry = reg
		su.opts.Decisions = decisionmetrics.New(reg, decisionmetrics.WithDenials(&seen))
	})
	for range 5 {
		h.call(request("edge", desc("user", "mallory")))
	}
	h.call(request("edge", desc("user", "alice")))
	if len(seen) == 0 || seen[0] != "Logins/mallory" {
		t.Fatalf("denials handed on: %v, want Logins/mallory's", seen)
	}
	for _, d := range seen {
		if d != "Logins/mallory" {
			t.Errorf("denial %s handed on; only mallory's spends were denied", d)
		}
	}
	if len(seen) != 2 {
		t.Errorf("%d denials handed on, want 2 (Logins allows 3 a minute)", len(seen))
	}
}
