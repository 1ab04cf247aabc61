package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jmhodges/clock"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/window"
	"github.com/limiter-dev/limiter/source/local"
	"github.com/limiter-dev/limiter/source/memory"
)

// A source that cannot sync still gets a local layer: the start says so,
// every cycle fails with ErrNoSyncer, is counted and logged, and the
// gauges show the hits waiting; at shutdown the loss is logged.
func TestLocalLayerMetrics(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	reg := prometheus.NewRegistry()
	m := newSyncMetrics(reg)
	clk := clock.NewFake()
	layer, err := newLocalLayer(memory.New(0), clk, time.Second, m, log)
	if err != nil {
		t.Fatal(err)
	}
	registerLayerGauges(reg, layer)
	if !strings.Contains(logs.String(), "cannot sync window counters") {
		t.Fatalf("no warning that the source cannot sync:\n%s", logs.String())
	}
	op := bucket.Op{Key: "k", Algorithm: bucket.SlidingWindow, Window: window.Limit{Count: 5, Period: 60_000}, Cost: 1, SyncRate: time.Second}
	if err := layer.Front(memory.New(0)).Spend(context.Background(), clk.Now().UnixNano(), []bucket.Op{op}, make([]bucket.Outcome, 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := layer.Sync(context.Background()); !errors.Is(err, local.ErrNoSyncer) || !errors.Is(err, ratelimits.ErrSourceUnavailable) {
		t.Fatalf("Sync = %v, want ErrNoSyncer, as the source's failure", err)
	}
	for name, want := range map[string]float64{
		"limiter_sync_cycles_total":     1,
		"limiter_sync_failures_total":   1,
		"limiter_sync_pending_counters": 1,
		"limiter_local_counters":        1,
	} {
		if got := gathered(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := observations(t, reg, "limiter_sync_duration_seconds"); got != 1 {
		t.Errorf("limiter_sync_duration_seconds counts %d cycles, want 1", got)
	}
	if !strings.Contains(logs.String(), "sync failed") {
		t.Fatalf("the failed cycle is not logged:\n%s", logs.String())
	}
	closeLocalLayer(layer, time.Millisecond, log)
	if !strings.Contains(logs.String(), "1 counters of sync_rate 1s keep hits that were not pushed") {
		t.Fatalf("the loss at shutdown is not logged:\n%s", logs.String())
	}
}

// gathered sums the values of every series of the metric name.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// observations is the sample count of the histogram name.
func observations(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}
