package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
	"github.com/limiter-dev/limiter/source/memory"
)

// observedSource records the duration and the errors of every source call,
// whatever the source is.
type observedSource struct {
	ratelimits.Source
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
}

func observeSource(src ratelimits.Source, reg prometheus.Registerer) ratelimits.Source {
	o := &observedSource{
		Source: src,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "limiter_source_operation_duration_seconds",
			Help:    "Duration of bucket source calls by operation (spend, refund, reset, ping), errors included.",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
		}, []string{"op"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limiter_source_operation_errors_total",
			Help: "Bucket source calls that failed (including timeouts), by operation.",
		}, []string{"op"}),
	}
	reg.MustRegister(o.duration, o.errors)
	for _, op := range []string{"spend", "refund", "reset", "ping"} {
		o.errors.WithLabelValues(op) // present at 0 from the start, so alerts can rate() it
	}
	if mem, ok := src.(*memory.Source); ok {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "limiter_memory_buckets",
				Help: "Buckets held by the memory source (some may have refilled and not been forgotten yet).",
			}, func() float64 { return float64(mem.Len()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "limiter_memory_evictions_total",
				Help: "Buckets the memory source evicted to stay within --max-buckets, full or not.",
			}, func() float64 { return float64(mem.Evictions()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "limiter_memory_evictions_not_full_total",
				Help: "Buckets the memory source evicted that were not full: their subscribers got back tokens they had spent.",
			}, func() float64 { return float64(mem.EvictionsNotFull()) }),
		)
	}
	return o
}

func (o *observedSource) record(op string, start time.Time, err error) {
	o.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		o.errors.WithLabelValues(op).Inc()
	}
}

func (o *observedSource) Spend(ctx context.Context, now int64, ops []gcra.Op, outcomes []gcra.Outcome) error {
	start := time.Now()
	err := o.Source.Spend(ctx, now, ops, outcomes)
	o.record("spend", start, err)
	return err
}

func (o *observedSource) Refund(ctx context.Context, now int64, ops []gcra.Op, outcomes []gcra.Outcome) error {
	start := time.Now()
	err := o.Source.Refund(ctx, now, ops, outcomes)
	o.record("refund", start, err)
	return err
}

func (o *observedSource) Reset(ctx context.Context, now int64, keys []string) (int, error) {
	start := time.Now()
	n, err := o.Source.Reset(ctx, now, keys)
	o.record("reset", start, err)
	return n, err
}

func (o *observedSource) Ping(ctx context.Context) error {
	start := time.Now()
	err := o.Source.Ping(ctx)
	o.record("ping", start, err)
	return err
}
