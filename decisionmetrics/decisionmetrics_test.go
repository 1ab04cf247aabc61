package decisionmetrics_test

import (
	"fmt"
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

// denialLog records what a Denials is told.
type denialLog []string

func (l *denialLog) Denied(limit, id string) { *l = append(*l, limit+"/"+id) }

// The denials of spends and forward-auth calls reach the Denials; checks,
// refunds, check-only and spend-only transactions (which refuse nothing),
// shadow limits, allowed, unlimited and degraded decisions do not.
func TestDenials(t *testing.T) {
	bd := &ratelimits.BatchDecision{Decisions: []ratelimits.Decision{
		{Limit: "L", ID: "denied", Allowed: false},
		{Limit: "L", ID: "check-only", Allowed: false, Mode: ratelimits.CheckOnly},
		{Limit: "L", ID: "spend-only", Allowed: false, Mode: ratelimits.SpendOnly},
		{Limit: "L", ID: "allowed", Allowed: true},
		{Limit: "S", ID: "shadow", Allowed: false, Shadow: true},
		{Limit: "U", ID: "unlimited", Unlimited: true, Allowed: true},
	}}
	tests := []struct {
		op       string
		degraded bool
		want     string
	}{
		{"spend", false, "[L/denied]"},
		{"forward_auth", false, "[L/denied]"},
		{"check", false, "[]"},
		{"refund", false, "[]"},
		{"release", false, "[]"},
		{"renew", false, "[]"},
		{"spend", true, "[]"},
	}
	for _, tt := range tests {
		var log denialLog
		m := decisionmetrics.New(prometheus.NewRegistry(), decisionmetrics.WithDenials(&log))
		b := *bd
		b.Degraded = tt.degraded
		m.CountDecisions(tt.op, &b)
		if got := fmt.Sprint([]string(log)); got != tt.want {
			t.Errorf("%s (degraded %v): denials %s, want %s", tt.op, tt.degraded, got, tt.want)
		}
	}
}
