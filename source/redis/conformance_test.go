package redis_test

import (
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/sourcetest"
)

// The shared conformance suite, against one Redis and against a cluster.
// On the cluster, the batch tests' keys fall into several hash slots, so
// the per-slot path (with its give-back) is what they exercise.
func TestConformance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			sourcetest.Run(t, func(t *testing.T) ratelimits.Source { return newSource(t, opts) })
		})
	}
}

// The conformance suite's concurrency limits, in both key formats, on one
// Redis and on a cluster.
func TestConformanceLeases(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			sourcetest.RunLeases(t, func(t *testing.T) ratelimits.Source { return newSource(t, opts) })
		})
	}
}

// The conformance suite once more with a coalescing window, on one Redis
// and on a cluster: every call then goes through a flusher's pipeline,
// also when it comes alone. Most of the suite's calls come one at a
// time, each waiting out the window (and the timer's latency), so the two
// run side by side.
func TestConformanceWithACoalesceWindow(t *testing.T) {
	for _, b := range []backend{{"Standalone", standalone}, {"Cluster", cluster}} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			opts := b.opts(t)
			opts.CoalesceWindow = 20 * time.Microsecond
			sourcetest.Run(t, func(t *testing.T) ratelimits.Source { return newSource(t, opts) })
		})
	}
}
