package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/decisionmetrics"
)

// metrics are the handler's Prometheus series: its own (requests by
// route, idempotent replays) and the decision series it shares with the
// other front ends. Labels carry limit names, registered routes, standard
// methods and statuses only, never subscriber ids nor any other text a
// client sent: their number is bounded by the configuration, not by
// traffic.
type metrics struct {
	*decisionmetrics.Metrics
	requests *prometheus.HistogramVec
	replays  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, shared *decisionmetrics.Metrics) *metrics {
	if shared == nil {
		shared = decisionmetrics.New(reg)
	}
	m := &metrics{
		Metrics: shared,
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "limiter_http_request_duration_seconds",
			Help:    "HTTP request duration by route pattern, method and status code.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"route", "method", "status"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limiter_idempotent_replays_total",
			Help: "Spends and refunds answered from the record of an earlier request with the same Idempotency-Key, by operation; they are not counted in limiter_decisions_total.",
		}, []string{"op"}),
	}
	reg.MustRegister(m.requests, m.replays)
	return m
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
