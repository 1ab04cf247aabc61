package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/limiter-dev/limiter/source/syncpush"

	"github.com/jmhodges/clock"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/local"
)

// syncMetrics are the series of the local layer (window and rate-counter
// limits, and penalty boxes, whose sync_rate is not 0). They are registered whatever the source, so that
// dashboards and alerts find them at 0 where nothing syncs. Labels carry
// the cycle's trigger only, never a limit or an id.
type syncMetrics struct {
	cycles   *prometheus.CounterVec
	failures *prometheus.CounterVec
	duration prometheus.Histogram
}

// syncTriggers are the values of the trigger label.
func syncTriggers() [3]local.Trigger {
	return [...]local.Trigger{local.TriggerTimer, local.TriggerAdmin, local.TriggerShutdown}
}

// newSyncMetrics registers the series of the sync cycles on reg.
func newSyncMetrics(reg prometheus.Registerer) *syncMetrics {
	m := &syncMetrics{
		cycles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limiter_sync_cycles_total",
			Help: "Sync cycles of window and rate-counter limits with a sync_rate above 0 (one source call each), by trigger (timer, admin, shutdown), failed ones included.",
		}, []string{"trigger"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limiter_sync_failures_total",
			Help: "Sync cycles whose push failed, by trigger; their hits are kept and pushed again by the next cycle.",
		}, []string{"trigger"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "limiter_sync_duration_seconds",
			Help:    "Duration of sync cycles (push and read back), failed ones included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
	}
	reg.MustRegister(m.cycles, m.failures, m.duration)
	for _, tr := range syncTriggers() {
		m.cycles.WithLabelValues(string(tr)) // present at 0 from the start, so alerts can rate() them
		m.failures.WithLabelValues(string(tr))
	}
	return m
}

// observe records one cycle.
func (m *syncMetrics) observe(c local.Cycle) {
	m.cycles.WithLabelValues(string(c.Trigger)).Inc()
	m.duration.Observe(c.Duration.Seconds())
	if c.Err != nil {
		m.failures.WithLabelValues(string(c.Trigger)).Inc()
	}
}

// registerLayerGauges registers the gauges that read the layer (0 when it
// is nil).
func registerLayerGauges(reg prometheus.Registerer, layer *local.Layer) {
	read := func(f func(*local.Layer) float64) func() float64 {
		return func() float64 {
			if layer == nil {
				return 0
			}
			return f(layer)
		}
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "limiter_sync_pending_counters",
			Help: "Counters and box entries of limits with a sync_rate above 0 holding hits or expiries not pushed to the source yet.",
		}, read(func(l *local.Layer) float64 { return float64(l.Pending()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "limiter_local_counters",
			Help: "Counters of window and rate-counter limits with a sync_rate other than 0 held in this process's memory.",
		}, read(func(l *local.Layer) float64 { return float64(l.Counters()) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "limiter_local_evictions_lost_total",
			Help: "Local counters that lost hits at the bound: below 0, evicted while they counted hits; above 0, evicted (or put back after a failed push) with no room left for their unpushed hits. Their subscribers got those hits back.",
		}, read(func(l *local.Layer) float64 { _, lost := l.Evictions(); return float64(lost) })),
	)
}

// newLocalLayer builds the local layer in front of a shared source, with
// its metrics and a log line per failed cycle; its Front's calls to the
// source last at most timeout each. src is the source as opened, before
// any wrapper: it is its own WindowSyncer. A source that is not one still
// gets a layer, whose limits above 0 then count in each process only
// (every cycle fails, and says why).
func newLocalLayer(src ratelimits.Source, clk clock.Clock, timeout time.Duration, m *syncMetrics, log *slog.Logger) (*local.Layer, error) {
	syncer, ok := src.(syncpush.WindowSyncer)
	if !ok {
		log.Warn("the source cannot sync window counters: limits with a sync_rate above 0 count in each process only")
	}
	return local.New(local.Options{
		Syncer:        syncer,
		Clock:         clk,
		SourceTimeout: timeout,
		OnCycle: func(c local.Cycle) {
			m.observe(c)
			if c.Err != nil {
				log.Warn("sync failed; the hits not pushed are kept for the next cycle",
					"trigger", string(c.Trigger), "sync_rate", c.SyncRate, "err", c.Err)
			}
			if c.BoxLogErr != nil {
				log.Warn("reading the box entries other processes stored failed; the next cycle reads on from there",
					"trigger", string(c.Trigger), "sync_rate", c.SyncRate, "err", c.BoxLogErr)
			}
		},
	})
}

// closeLocalLayer pushes the hits not pushed yet, within timeout, once the
// servers have stopped taking requests.
func closeLocalLayer(layer *local.Layer, timeout time.Duration, log *slog.Logger) {
	pending := layer.Pending()
	if pending > 0 {
		log.Info("pushing the hits not synced yet", "counters", pending, "timeout", timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := layer.Close(ctx); err != nil {
		log.Error("hits not synced are lost", "err", err)
	}
}

// followedBoxes lists the limits of cfg whose box entries sync (a penalty
// box and a sync_rate above 0), for the layer to read their box logs.
func followedBoxes(cfg *ratelimits.Config) []local.Followed {
	var followed []local.Followed
	for _, n := range cfg.Names() {
		if cfg.HasBox(n.Name) && cfg.SyncRate(n.Name) > 0 {
			followed = append(followed, local.Followed{
				Name:     n.BucketKey(""), // "<enum>:"
				SyncRate: cfg.SyncRate(n.Name),
				Capacity: cfg.Capacity(n.Name),
			})
		}
	}
	return followed
}

// reloadPushTimeout bounds the push a reload makes of the limits whose
// sync_rate it changes (local.Layer.Move): a source that does not answer
// holds the reload that long at most, and the hits wait for the old
// sync_rate's next cycle.
const reloadPushTimeout = 2 * time.Second

// movedLimits lists the limits whose sync_rate next changes from running,
// by name and enum both (a reload refuses any other change of a name in
// use).
func movedLimits(running, next *ratelimits.Config) []local.Moved {
	var moved []local.Moved
	for _, n := range next.Names() {
		was, ok := running.Lookup(n.Limit)
		if !ok || was.Name != n.Name {
			continue
		}
		if from, to := running.SyncRate(n.Name), next.SyncRate(n.Name); from != to {
			moved = append(moved, local.Moved{Name: n.BucketKey(""), From: from, To: to})
		}
	}
	return moved
}
