package envoyapi

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// methodUnknown is the method label of a call to a method the server does
// not have: the name a client sent is never a label, so a client cannot
// grow the series.
const methodUnknown = "unknown"

// maxCode is the largest of gRPC's codes; a status carries no other.
const maxCode = codes.Unauthenticated

// requestMetrics is the service's own series: call durations by method and
// code. The observer of each (method, code) pair is cached once used, so
// a call does not hash its labels; series appear only once observed.
type requestMetrics struct {
	durations *prometheus.HistogramVec
	// methods are the registered full method names, then methodUnknown.
	methods []string
	index   map[string]int
	cache   [][maxCode + 1]atomic.Pointer[observer]
}

// observer boxes a prometheus.Observer for an atomic pointer.
type observer struct{ prometheus.Observer }

// newRequestMetrics registers the series on reg for the methods of the
// services registered on srv.
func newRequestMetrics(reg prometheus.Registerer, srv *grpc.Server) *requestMetrics {
	var methods []string
	for service, info := range srv.GetServiceInfo() {
		for _, m := range info.Methods {
			methods = append(methods, "/"+service+"/"+m.Name)
		}
	}
	slices.Sort(methods)
	methods = append(methods, methodUnknown)
	m := &requestMetrics{
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "limiter_grpc_request_duration_seconds",
			Help:    "gRPC call duration by full method name (\"unknown\" for a method the server does not have) and status code.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"method", "code"}),
		methods: methods,
		index:   make(map[string]int, len(methods)),
		cache:   make([][maxCode + 1]atomic.Pointer[observer], len(methods)),
	}
	for i, name := range methods {
		m.index[name] = i
	}
	reg.MustRegister(m.durations)
	return m
}

// label is the method label of a call to fullMethod.
func (m *requestMetrics) label(fullMethod string) string {
	return m.methods[m.methodIndex(fullMethod)]
}

func (m *requestMetrics) methodIndex(fullMethod string) int {
	if i, ok := m.index[fullMethod]; ok {
		return i
	}
	return len(m.methods) - 1
}

// observe records a call to fullMethod that ended with code after d.
func (m *requestMetrics) observe(fullMethod string, code codes.Code, d time.Duration) {
	i := m.methodIndex(fullMethod)
	if code > maxCode {
		m.durations.WithLabelValues(m.methods[i], code.String()).Observe(d.Seconds())
		return
	}
	slot := &m.cache[i][code]
	o := slot.Load()
	if o == nil {
		o = &observer{m.durations.WithLabelValues(m.methods[i], code.String())}
		slot.Store(o) // a racing call stores the same series
	}
	o.Observe(d.Seconds())
}
