// Package decisionmetrics holds the Prometheus series that every front end
// (the HTTP API, Envoy's rate-limit service) counts its decisions in, so
// that one process registers them once and they add up across front ends.
//
// Labels carry operations, limit names and outcomes only, never a
// subscriber id nor other text a client sent: their number is bounded by
// the configuration, not by traffic. Which ids are denied goes to a
// Denials instead (WithDenials), whose memory is bounded otherwise.
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
	denials        Denials
}

// Denials is told of each transaction a spend denies (on any front end:
// HTTP spends, forward-auth, Envoy's calls), with the limit's name and the
// canonical id, so that operators can see who is being limited. A check
// is not a denial: it asks, and takes nothing. Denied runs on the hot
// path and must neither block long nor keep id, which may be a view of
// memory the caller reuses, without copying it.
type Denials interface {
	Denied(limit, id string)
}

// Option configures Metrics.
type Option func(*Metrics)

// WithDenials hands every denial to d.
func WithDenials(d Denials) Option {
	return func(m *Metrics) { m.denials = d }
}

// New makes the series and registers them on reg.
func New(reg prometheus.Registerer, opts ...Option) *Metrics {
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
	for _, opt := range opts {
		opt(m)
	}
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
// check, refund, release, renew or forward_auth), each shadow limit's
// would-be denial, and hands the Denials the check-and-spend denials of
// spends and forward-auth calls, the only ones that refuse a request.
func (m *Metrics) CountDecisions(op string, bd *ratelimits.BatchDecision) {
	// Only spends refuse a request: a check, a refund, a lease's release
	// or renewal never does.
	spends := op == "spend" || op == "forward_auth"
	for i := range bd.Decisions {
		d := &bd.Decisions[i]
		o := outcome(op, bd, d)
		m.decisions.WithLabelValues(op, d.Limit, o).Inc()
		switch {
		case o == "shadow_denied":
			m.shadowDenials.WithLabelValues(op, d.Limit).Inc()
		case o == "denied" && spends && d.Mode == ratelimits.CheckAndSpend && m.denials != nil:
			// A check-only or spend-only transaction's denial refused
			// nothing: only one that decides the request counts.
			m.denials.Denied(d.Limit, d.ID)
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
