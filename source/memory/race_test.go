//go:build race

package memory_test

// raceEnabled says the race detector is on: it makes sync.Pool drop some
// of what is put back, so allocation counts are not the service's.
const raceEnabled = true
