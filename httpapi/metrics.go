package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/ratelimits"
)

// metrics are the handler's Prometheus series. Labels carry limit names,
// registered routes, standard methods and statuses only, never subscriber
// ids nor any other text a client sent: their number is bounded by the
// configuration, not by traffic.
type metrics struct {
	decisions    *prometheus.CounterVec
	requests     *prometheus.HistogramVec
	sourceErrors prometheus.Counter
	degraded     prometheus.Counter
	replays      *prometheus.CounterVec
	// clientCancelled counts requests abandoned by their client while the
	// source was asked; they are kept out of sourceErrors, which alerts
	// watch.
	clientCancelled prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limiter_decisions_total",
			Help: "Transaction decisions by operation, limit name and outcome (allowed, denied, unlimited, degraded).",
		}, []string{"op", "limit", "outcome"}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "limiter_http_request_duration_seconds",
			Help:    "HTTP request duration by route pattern, method and status code.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"route", "method", "status"}),
		sourceErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "limiter_source_errors_total",
			Help: "Requests that failed because the bucket source failed or timed out.",
		}),
		degraded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "limiter_degraded_answers_total",
			Help: "Spends and checks answered allowed without a decision because the source failed and fail-open is set.",
		}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limiter_idempotent_replays_total",
			Help: "Spends and refunds answered from the record of an earlier request with the same Idempotency-Key, by operation; they are not counted in limiter_decisions_total.",
		}, []string{"op"}),
		clientCancelled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "limiter_client_cancelled_requests_total",
			Help: "Requests whose client went away while the bucket source was being asked; not source failures.",
		}),
	}
	reg.MustRegister(m.decisions, m.requests, m.sourceErrors, m.degraded, m.replays, m.clientCancelled)
	return m
}

// countDecisions counts each transaction's decision under op, the
// route's label: spend, check or refund.
func (m *metrics) countDecisions(op string, bd *ratelimits.BatchDecision) {
	for i := range bd.Decisions {
		d := &bd.Decisions[i]
		outcome := "denied"
		switch {
		case bd.Degraded && !d.Unlimited:
			outcome = "degraded" // allowed without a decision (fail-open)
		case d.Unlimited:
			outcome = "unlimited"
		case d.Allowed:
			outcome = "allowed"
		}
		m.decisions.WithLabelValues(op, d.Limit, outcome).Inc()
	}
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// observe records each request's duration by route, method and status.
func (h *handler) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		route, method, elapsed := h.routes.label(r), methodLabel(r.Method), time.Since(start)
		h.metrics.requests.WithLabelValues(route, method, strconv.Itoa(rec.status)).Observe(elapsed.Seconds())
		if h.accessLog {
			h.log.Info("request", "method", method, "route", route, "status", rec.status,
				"duration_ms", float64(elapsed.Microseconds())/1000, "remote", r.RemoteAddr)
		}
	})
}
