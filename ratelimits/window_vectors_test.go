package ratelimits_test

import (
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/internal/vectors"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

// The public window vectors (vectors.Windows says which, and why only
// those) at the library level on the memory source: exact nanoseconds,
// every decision's algorithm included.
func TestWindowVectors(t *testing.T) {
	f, err := vectors.Windows()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configfile.Parse("defaults.yaml", f.Defaults, "overrides.yaml", f.Overrides)
	if err != nil {
		t.Fatal(err)
	}
	begin, err := f.StartTime(start)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(begin)
	l, err := ratelimits.NewLimiter(cfg, memory.New(0), clk)
	if err != nil {
		t.Fatal(err)
	}
	vectors.Run(t, f, &vectors.LimiterDriver{Limiter: l, Clock: clk}, time.Nanosecond)
}
