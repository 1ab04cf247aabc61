package main

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmhodges/clock"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

// The reload status says what loaded at startup, and after a reload that
// fails, the failure with its problem at FILE:LINE beside the load still
// in use; a good reload then replaces both.
func TestReloadStatus(t *testing.T) {
	defaults, write := writableDefaults(t)
	write("API:\n  enum: 120\n  id: string\n  burst: 10\n  count: 10\n  period: 1m\n")
	f := &serveFlags{configFlags: configFlags{defaults: defaults, overrides: filepath.Join(filepath.Dir(defaults), "overrides.yaml")}}
	loaded, err := f.configFlags.load(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	limiter, err := ratelimits.NewLimiter(loaded.cfg, memory.New(0), clock.NewFake())
	if err != nil {
		t.Fatal(err)
	}
	r := newReloader(f, loaded, limiter, bearer.NewTokens(nil, nil), slog.New(slog.DiscardHandler), prometheus.NewRegistry())

	st := r.history.status()
	if !st.LastAttempt.OK || st.LastAttempt.Trigger != "startup" || st.InUse.Trigger != "startup" || len(st.InUse.Files) != int(fileRoles) ||
		st.InUse.Files[0].File != "defaults" || st.InUse.Files[0].Path != defaults || st.InUse.Files[0].Entries != "1" ||
		st.InUse.Files[1].Entries != "none" {
		t.Fatalf("at startup: %+v", st)
	}

	write("API:\n  enum: 120\n  id: string\n  burst: 0\n  count: 10\n  period: 1m\n")
	if err := r.Reload("SIGHUP"); err == nil {
		t.Fatal("a burst of 0 loaded")
	}
	st = r.history.status()
	if st.LastAttempt.OK || st.LastAttempt.Trigger != "SIGHUP" || len(st.LastAttempt.Problems) == 0 ||
		!strings.HasPrefix(st.LastAttempt.Problems[0], defaults+":4:") || len(st.LastAttempt.Files) != 0 || st.InUse.Trigger != "startup" {
		t.Fatalf("after a failed reload: %+v", st)
	}

	write("API:\n  enum: 120\n  id: string\n  burst: 20\n  count: 20\n  period: 1m\nOther:\n  enum: 121\n  id: string\n  burst: 1\n  count: 1\n  period: 1s\n")
	if err := r.Reload("admin endpoint"); err != nil {
		t.Fatal(err)
	}
	st = r.history.status()
	if !st.LastAttempt.OK || st.InUse.Trigger != "admin endpoint" || st.InUse.Files[0].Entries != "2" || st.LastAttempt.At != st.InUse.At {
		t.Fatalf("after a good reload: %+v", st)
	}
}

// A failed attempt keeps at most maxReloadProblems lines, the last of
// which says how many more the log has.
func TestReloadStatusBoundsProblems(t *testing.T) {
	var problems []error
	for i := range 62 {
		problems = append(problems, fmt.Errorf("defaults.yaml:%d: a problem", i+1))
	}
	var s reloadStatus
	s.failed(time.Now(), "SIGHUP", errors.Join(problems...))
	got := s.status().LastAttempt.Problems
	if len(got) != maxReloadProblems || got[0] != "defaults.yaml:1: a problem" || got[len(got)-1] != "... and 13 more (the log has every problem)" {
		t.Errorf("%d problems kept, the last %q; want %d, the last saying 13 more", len(got), got[len(got)-1], maxReloadProblems)
	}
}
