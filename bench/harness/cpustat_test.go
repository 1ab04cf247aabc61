package main

import (
	"strings"
	"testing"
	"time"
)

// parseBusy sums the machine's busy time, leaving idle and iowait out,
// and refuses a table without the machine-wide line.
func TestParseBusy(t *testing.T) {
	const stat = "cpu  1000 20 300 5000 40 5 6 7 0 0\ncpu0 500 10 150 2500 20 2 3 3 0 0\nintr 12345\n"
	got, err := parseBusy(strings.NewReader(stat))
	if want := float64(1000+20+300+5+6+7) / 100; err != nil || got != want {
		t.Errorf("parseBusy = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3\n", "cpu 1 2 x 4 5 6 7 8\n", ""} {
		if _, err := parseBusy(strings.NewReader(bad)); err == nil {
			t.Errorf("read busy time from %q", bad)
		}
	}
	if s, err := busySeconds(); err != nil || s <= 0 {
		t.Errorf("this machine's busy time: %v, %v", s, err)
	}
}

// otherCores is the machine's busy time less what the measured processes
// used, per second of the window.
func TestOtherCores(t *testing.T) {
	start := time.Unix(1000, 0)
	before := cpuSnapshot{at: start, nginx: 10, limiter: 20, own: 5, total: 100}
	after := cpuSnapshot{at: start.Add(10 * time.Second), nginx: 15, limiter: 24, own: 5.5, total: 118}
	// 18 s busy: nginx 5, limiter 4, the harness 0.5, wrk 6.5; 2 s others.
	if got := otherCores(before, after, 6.5); got < 0.2-1e-9 || got > 0.2+1e-9 {
		t.Errorf("otherCores = %v, want 0.2", got)
	}
}
