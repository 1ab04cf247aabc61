package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionFrom(t *testing.T) {
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "7a6b50c9e2b2041915cea092dbe30597ba9b486d"},
			{Key: "vcs.time", Value: "2026-11-22T21:28:06Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	tests := []struct {
		name   string
		linked string
		info   *debug.BuildInfo
		want   string
	}{
		{"linked version wins", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v1.0.0"}}, "v1.2.3"},
		{"module version of a tagged build", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.0.0"}}, "v1.0.0"},
		{"go build in a checkout: pseudo-version and commit", "",
			&debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261122212806-7a6b50c9e2b2"}, Settings: vcs("false")},
			"v0.0.0-20261122212806-7a6b50c9e2b2 (commit 7a6b50c9e2b2, 2026-11-22T21:28:06Z)"},
		{"commit recorded without a module version", "",
			&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")},
			"dev (commit 7a6b50c9e2b2, 2026-11-22T21:28:06Z, with uncommitted changes)"},
		{"linked version and commit", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("false")},
			"v1.2.3 (commit 7a6b50c9e2b2, 2026-11-22T21:28:06Z)"},
		{"go run: nothing recorded", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			"dev (no commit recorded: built by go run, or with -buildvcs=false)"},
		{"no build information at all", "", nil, "dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionFrom(tt.linked, tt.info); got != tt.want {
				t.Errorf("versionFrom = %q, want %q", got, tt.want)
			}
		})
	}
}

// `limiter version` takes no arguments; --help prints the version too,
// anything else is a usage error.
func TestVersionCommand(t *testing.T) {
	tests := []struct {
		args        []string
		code        int
		wantVersion bool
	}{
		{[]string{"version"}, 0, true},
		{[]string{"--version"}, 0, true},
		{[]string{"version", "--help"}, 0, false}, // its help (TestHelp)
		{[]string{"version", "-h"}, 0, false},
		{[]string{"version", "extra"}, 2, false},
		{[]string{"version", "--bogus"}, 2, false},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(tt.args, &stdout, &stderr)
		if code != tt.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tt.args, code, tt.code, stderr.String())
		}
		if got := strings.HasPrefix(stdout.String(), "limiter ") && strings.Count(stdout.String(), "\n") == 1; got != tt.wantVersion {
			t.Errorf("%v: stdout %q, want the version line: %v", tt.args, stdout.String(), tt.wantVersion)
		}
	}
}
