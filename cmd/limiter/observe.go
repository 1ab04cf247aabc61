package main

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
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
			Help:    "Duration of bucket source calls by operation (spend, refund, reset, call: an ERL call, ping, list_box: a page of a penalty box listing), errors included.",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
		}, []string{"op"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limiter_source_operation_errors_total",
			Help: "Bucket source calls that failed (including timeouts), by operation; calls abandoned because the client went away are not counted.",
		}, []string{"op"}),
	}
	reg.MustRegister(o.duration, o.errors)
	for _, op := range []string{"spend", "refund", "reset", "call", "ping", "list_box"} {
		o.errors.WithLabelValues(op) // present at 0 from the start, so alerts can rate() it
	}
	if mem, ok := src.(*memory.Source); ok {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "limiter_memory_buckets",
				Help: "Buckets and window counters held by the memory source (some may have refilled or expired and not been forgotten yet).",
			}, func() float64 { return float64(mem.Len()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "limiter_memory_evictions_total",
				Help: "Buckets and window counters the memory source evicted to stay within --max-buckets, whether or not they still counted anything.",
			}, func() float64 { return float64(mem.Evictions()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "limiter_memory_idempotency_evictions_total",
				Help: "Idempotency records the memory source forgot before they expired, to stay within its bound; retries of those requests are decided again.",
			}, func() float64 { return float64(mem.IdempotencyEvictions()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "limiter_memory_evictions_not_full_total",
				Help: "Buckets and window counters the memory source evicted while they still counted: their subscribers got back tokens or hits they had spent.",
			}, func() float64 { return float64(mem.EvictionsNotFull()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "limiter_memory_rate_counter_entries",
				Help: "Rate-counter entries held by the memory source, all counters together (each counter is bounded by its limit's capacity, not by --max-buckets).",
			}, func() float64 { return float64(mem.ERLStats().Counters) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "limiter_memory_penalty_box_entries",
				Help: "Penalty box entries held by the memory source, all boxes together (each box is bounded by its limit's capacity).",
			}, func() float64 { return float64(mem.ERLStats().Boxes) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "limiter_memory_rate_counter_evictions_total",
				Help: "Rate-counter entries the memory source evicted, to stay within their limit's capacity, while they still had hits in the last minute.",
			}, func() float64 { return float64(mem.ERLStats().CounterEvictions) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "limiter_memory_penalty_box_evictions_total",
				Help: "Penalty box entries the memory source evicted, to stay within their limit's capacity, while still in the box: those ids were let out early.",
			}, func() float64 { return float64(mem.ERLStats().BoxEvictions) }),
		)
	}
	return o
}

func (o *observedSource) record(ctx context.Context, op string, start time.Time, err error) {
	o.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil && !callerCancelled(ctx, err) && !refusedRequest(err) {
		o.errors.WithLabelValues(op).Inc()
	}
}

// refusedRequest reports whether a source refused a call for what the
// request asked, not for a failure of its own: a box listing's bad
// cursor, an idempotency key the batch cannot have, one reused for
// another request or whose first request is unsettled. The caller gets a
// 4xx; the source is well, and the error alert must not fire.
func refusedRequest(err error) bool {
	for _, e := range []error{ratelimits.ErrInvalidArgument, ratelimits.ErrNoBoxListing, ratelimits.ErrInvalidIdempotencyKey, once.ErrMismatch, once.ErrUnsettled} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// callerCancelled reports whether a call failed only because its caller
// gave up: the context was cancelled (a client hung up) and the error says
// so. The source did not fail then, and the error alert must not fire. A
// call that ran out of the source timeout has a deadline error instead,
// and is counted.
func callerCancelled(ctx context.Context, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(ctx.Err(), context.Canceled)
}

func (o *observedSource) Spend(ctx context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome) error {
	start := time.Now()
	err := o.Source.Spend(ctx, now, ops, outcomes)
	o.record(ctx, "spend", start, err)
	return err
}

func (o *observedSource) Refund(ctx context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome) error {
	start := time.Now()
	err := o.Source.Refund(ctx, now, ops, outcomes)
	o.record(ctx, "refund", start, err)
	return err
}

func (o *observedSource) SpendOnce(ctx context.Context, now int64, rec once.Record, ops []bucket.Op, outcomes []bucket.Outcome) (bool, error) {
	start := time.Now()
	replayed, err := o.Source.SpendOnce(ctx, now, rec, ops, outcomes)
	o.record(ctx, "spend", start, err)
	return replayed, err
}

func (o *observedSource) RefundOnce(ctx context.Context, now int64, rec once.Record, ops []bucket.Op, outcomes []bucket.Outcome) (bool, error) {
	start := time.Now()
	replayed, err := o.Source.RefundOnce(ctx, now, rec, ops, outcomes)
	o.record(ctx, "refund", start, err)
	return replayed, err
}

func (o *observedSource) Reset(ctx context.Context, now int64, ops []bucket.Op) (int, error) {
	start := time.Now()
	n, err := o.Source.Reset(ctx, now, ops)
	o.record(ctx, "reset", start, err)
	return n, err
}

func (o *observedSource) Call(ctx context.Context, now int64, call *bucket.Call, res *bucket.CallResult) error {
	start := time.Now()
	err := o.Source.Call(ctx, now, call, res)
	o.record(ctx, "call", start, err)
	return err
}

func (o *observedSource) Ping(ctx context.Context) error {
	start := time.Now()
	err := o.Source.Ping(ctx)
	o.record(ctx, "ping", start, err)
	return err
}

// ListBox lists a penalty box with the wrapped source, timed as any other
// call, when that source can (ratelimits.BoxLister).
func (o *observedSource) ListBox(ctx context.Context, now int64, enum, cursor string, max int) (ratelimits.BoxPage, error) {
	lister, ok := o.Source.(ratelimits.BoxLister)
	if !ok {
		return ratelimits.BoxPage{}, ratelimits.ErrNoBoxListing
	}
	start := time.Now()
	page, err := lister.ListBox(ctx, now, enum, cursor, max)
	o.record(ctx, "list_box", start, err)
	return page, err
}
