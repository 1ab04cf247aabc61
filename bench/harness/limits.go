package main

import (
	"os"
	"path/filepath"
)

// The window limits the harness adds to the bundled defaults: 10,000 ids
// each allowed 100 hits a minute, counted on the source (sync_rate 0) or
// in the process and synced every second (sync_rate 1). Their enums are
// far above any the bundled file uses.
const (
	benchSliding       = "BenchSlidingWindow"
	benchSlidingSynced = "BenchSlidingWindowSynced"
	benchLimits        = `
BenchSlidingWindow:
  enum: 2000000001
  id: string
  algorithm: sliding-window
  count: 100
  period: 1m

BenchSlidingWindowSynced:
  enum: 2000000002
  id: string
  algorithm: sliding-window
  count: 100
  period: 1m
  sync_rate: 1

BenchRequestsPerIP:
  enum: 2000000003
  id: ip
  algorithm: rate-counter
  window: 10s
  rate: 100
  penalty: 1m
`
	benchRateCounter = "BenchRequestsPerIP"
)

// benchDefaults writes the bundled defaults file of the tree at root with
// the harness's limits appended to path, and returns path.
func benchDefaults(root, path string) (string, error) {
	bundled, err := os.ReadFile(filepath.Join(root, "config/defaults.yaml"))
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(bundled, benchLimits+benchCalendarLimits+benchOverLimitDef+benchLeasesLimits...), 0o644)
}
