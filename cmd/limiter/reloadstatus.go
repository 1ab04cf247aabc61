package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/limiter-dev/limiter/httpapi/wire"
)

// maxReloadProblems bounds the problems a failed attempt keeps for GET
// /v1/admin/reload: a broken file can report one per line, and the log
// has them all.
const maxReloadProblems = 50

// reloadStatus remembers the last load attempt and the last one that went
// into use, for GET /v1/admin/reload and the operator page: what an
// operator asks after a change ("did my file load, and which one?")
// without reading the logs.
type reloadStatus struct {
	mu          sync.Mutex
	lastAttempt wire.ReloadAttempt
	inUse       wire.ReloadAttempt
}

// succeeded records a load that went into use.
func (s *reloadStatus) succeeded(at time.Time, trigger string, loaded *loadedConfig) {
	a := wire.ReloadAttempt{At: at.UTC().Format(time.RFC3339), Trigger: trigger, OK: true}
	counts := loaded.counts()
	for role := range fileRoles {
		a.Files = append(a.Files, wire.ReloadFile{File: role.flag(), Path: loaded.paths[role], Entries: counts[role]})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastAttempt, s.inUse = a, a
}

// failed records a load that did not go into use, with its problems.
func (s *reloadStatus) failed(at time.Time, trigger string, err error) {
	problems := problemLines(err)
	if n := len(problems); n > maxReloadProblems {
		// The last place says how many are left out: at most
		// maxReloadProblems lines in all.
		kept := maxReloadProblems - 1
		problems = append(problems[:kept:kept], fmt.Sprintf("... and %d more (the log has every problem)", n-kept))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastAttempt = wire.ReloadAttempt{At: at.UTC().Format(time.RFC3339), Trigger: trigger, Problems: problems}
}

// status returns both, copied.
func (s *reloadStatus) status() wire.ReloadStatusResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return wire.ReloadStatusResponse{LastAttempt: s.lastAttempt, InUse: s.inUse}
}
