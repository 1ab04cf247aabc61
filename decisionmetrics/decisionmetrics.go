// Package decisionmetrics holds the Prometheus series that every front end
// (the HTTP API, Envoy's rate-limit service) counts its decisions in, so
// that one process registers them once and they add up across front ends.
//
// Labels carry operations, limit names and outcomes only, never a
// subscriber id nor other text a client sent: their number is bounded by
// the configuration, not by traffic.
package decisionmetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/ratelimits"
)

// Metrics are the shared series. Make them with New; the zero value is not
// usable.
type Metrics struct {
	decisions      *prometheus.CounterVec
	shadowDenials  *prometheus.CounterVec
	sourceErrors   prometheus.Counter
	degraded       prometheus.Counter
	clientGoneAway prometheus.Counter
}

// New makes the series and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limiter_decisions_total",
			Help: "Transaction decisions by operation, limit name and outcome (allowed, denied, unlimited, degraded, shadow_denied).",
		}, []string{"op", "limit", "outcome"}),
		shadowDenials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limiter_shadow_denials_total",
			Help: "Decisions of shadow limits that would have denied, by operation (spend or check) and limit name; the requests were not denied for them.",
		}, []string{"op", "limit"}),
		sourceErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "limiter_source_errors_total",
			Help: "Requests that failed because the bucket source failed or timed out.",
		}),
		degraded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "limiter_degraded_answers_total",
			Help: "Spends and checks answered allowed without a decision because the source failed and fail-open is set.",
		}),
		clientGoneAway: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "limiter_client_cancelled_requests_total",
			Help: "Requests whose client went away while the bucket source was being asked; not source failures.",
		}),
	}
	reg.MustRegister(m.decisions, m.shadowDenials, m.sourceErrors, m.degraded, m.clientGoneAway)
	return m
}

// outcome names how one decision of operation op went, as the outcome
// label says it. A shadow limit's denial in a spend or check is
// "shadow_denied": the request was not denied for it. A refund denies
// nobody (a refund not allowed gave nothing back), so its outcomes are the
// same for shadow limits as for others.
func outcome(op string, bd *ratelimits.BatchDecision, d *ratelimits.Decision) string {
	switch {
	case bd.Degraded && !d.Unlimited:
		return "degraded" // allowed without a decision (fail-open)
	case d.Unlimited:
		return "unlimited"
	case d.Allowed:
		return "allowed"
	case d.Shadow && op != "refund":
		return "shadow_denied"
	}
	return "denied"
}

// CountDecisions counts each transaction's decision of bd under op (spend,
// check or refund), and each shadow limit's would-be denial.
func (m *Metrics) CountDecisions(op string, bd *ratelimits.BatchDecision) {
	for i := range bd.Decisions {
		d := &bd.Decisions[i]
		o := outcome(op, bd, d)
		m.decisions.WithLabelValues(op, d.Limit, o).Inc()
		if o == "shadow_denied" {
			m.shadowDenials.WithLabelValues(op, d.Limit).Inc()
		}
	}
}

// SourceError counts a request that failed because the source did.
func (m *Metrics) SourceError() { m.sourceErrors.Inc() }

// Degraded counts an answer given allowed, undecided, under fail-open.
func (m *Metrics) Degraded() { m.degraded.Inc() }

// ClientCancelled counts a request its client abandoned while the source
// was asked.
func (m *Metrics) ClientCancelled() { m.clientGoneAway.Inc() }
