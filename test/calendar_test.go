package test

import (
	"testing"

	"github.com/limiter-dev/limiter/internal/vectors"
)

// calendarVectorsConfig is vectorsConfig for the project's calendar
// vectors, on one clock from the file's start.
func calendarVectorsConfig(t *testing.T) (*vectors.File, map[string]string) {
	t.Helper()
	return configOf(t, vectors.Calendar)
}

// Every calendar vector through the binary on the memory source: its own
// zone database decides the periods.
func TestCalendarVectorsOverHTTPMemory(t *testing.T) {
	f, env := calendarVectorsConfig(t)
	p := startLimiter(t, procOptions{Env: env})
	runVectorsOverHTTP(t, f, p)
}

// The calendar vectors through three processes sharing one Redis (or the
// cluster), round-robin, in both key formats.
func TestRedisCalendarVectorsOverHTTP(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	runRedisVectorsOverHTTP(t, calendarVectorsConfig)
}
