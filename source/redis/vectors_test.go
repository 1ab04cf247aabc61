package redis_test

import (
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/internal/vectors"
	"github.com/limiter-dev/limiter/ratelimits"
)

// The public vectors at the library level, exact to the nanosecond, with
// the Limiter on a jmhodges fake clock deciding in Redis.
func TestPublicVectors(t *testing.T) {
	f, err := vectors.Public()
	if err != nil {
		t.Fatal(err)
	}
	runVectors(t, f, time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
}

// The window vectors (sliding, fixed, overrides, batches mixing them with
// GCRA) the same way, on every backend and key format.
func TestWindowVectors(t *testing.T) {
	f, err := vectors.Windows()
	if err != nil {
		t.Fatal(err)
	}
	begin, err := f.StartTime(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	runVectors(t, f, begin)
}

// The project's calendar vectors (DST days, months, weeks, an override, a
// lockout, batches with GCRA) the same way, on every backend and key
// format.
func TestCalendarVectors(t *testing.T) {
	f, err := vectors.Calendar()
	if err != nil {
		t.Fatal(err)
	}
	begin, err := f.StartTime(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	runVectors(t, f, begin)
}

// runVectors runs f's scenarios through a Limiter deciding in each
// backend, its fake clock starting at begin.
func runVectors(t *testing.T, f *vectors.File, begin time.Time) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			cfg, err := configfile.Parse("defaults.yaml", f.Defaults, "overrides.yaml", f.Overrides)
			if err != nil {
				t.Fatal(err)
			}
			clk := clock.NewFake()
			clk.Set(begin)
			l, err := ratelimits.NewLimiter(cfg, newSource(t, b.opts(t)), clk)
			if err != nil {
				t.Fatal(err)
			}
			vectors.Run(t, f, &vectors.LimiterDriver{Limiter: l, Clock: clk}, time.Nanosecond)
		})
	}
}
