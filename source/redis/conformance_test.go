package redis_test

import (
	"testing"

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
