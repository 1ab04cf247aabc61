package decisionmetrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/decisionmetrics"
	"github.com/limiter-dev/limiter/ratelimits"
)

// series reads every series of a counter family as "label=value,..." → count.
func series(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + ","
			}
			out[key] = m.GetCounter().GetValue()
		}
	}
	return out
}

// Each decision is counted under its outcome; a shadow limit's denial in a
// spend or a check is a would-be denial, counted apart, while a refund
// denies nobody, shadow or not.
func TestCountDecisions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := decisionmetrics.New(reg)
	bd := &ratelimits.BatchDecision{Allowed: true, Decisions: []ratelimits.Decision{
		{Limit: "Enforced", Allowed: true},
		{Limit: "Watched", Shadow: true},
		{Limit: "Open", Unlimited: true, Allowed: true},
	}}
	m.CountDecisions("spend", bd)
	m.CountDecisions("check", bd)
	m.CountDecisions("refund", bd)
	m.CountDecisions("spend", &ratelimits.BatchDecision{Degraded: true, Allowed: true, Decisions: []ratelimits.Decision{{Limit: "Enforced", Allowed: true}}})

	want := map[string]float64{
		"limit=Enforced,op=spend,outcome=allowed,":      1,
		"limit=Enforced,op=spend,outcome=degraded,":     1,
		"limit=Watched,op=spend,outcome=shadow_denied,": 1,
		"limit=Open,op=spend,outcome=unlimited,":        1,
		"limit=Enforced,op=check,outcome=allowed,":      1,
		"limit=Watched,op=check,outcome=shadow_denied,": 1,
		"limit=Open,op=check,outcome=unlimited,":        1,
		"limit=Enforced,op=refund,outcome=allowed,":     1,
		"limit=Watched,op=refund,outcome=denied,":       1,
		"limit=Open,op=refund,outcome=unlimited,":       1,
	}
	got := series(t, reg, "limiter_decisions_total")
	if len(got) != len(want) {
		t.Errorf("limiter_decisions_total has %d series, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("limiter_decisions_total{%s} = %v, want %v", k, got[k], v)
		}
	}
	shadow := series(t, reg, "limiter_shadow_denials_total")
	if len(shadow) != 2 || shadow["limit=Watched,op=spend,"] != 1 || shadow["limit=Watched,op=check,"] != 1 {
		t.Errorf("limiter_shadow_denials_total = %v, want one spend and one check of Watched", shadow)
	}
}
