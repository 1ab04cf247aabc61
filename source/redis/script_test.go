package redis

import (
	"io/fs"
	"os"
	"slices"
	"testing"
)

// TestScriptFragments checks that every file of lua/ is a fragment of the
// script, joined once, and that none is over 600 lines.
func TestScriptFragments(t *testing.T) {
	names, err := fs.Glob(scriptFiles, "lua/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	listed := append(slices.Clone(scriptFragments), "protocol.lua")
	slices.Sort(listed)
	for i := range names {
		names[i] = names[i][len("lua/"):]
	}
	if !slices.Equal(names, listed) || len(slices.Compact(listed)) != len(scriptFragments)+1 {
		t.Fatalf("lua/ holds %v, scriptFragments lists %v", names, scriptFragments)
	}
	for _, name := range listed {
		text, _ := scriptFiles.ReadFile("lua/" + name)
		if n := countLines(text); n > 600 {
			t.Errorf("lua/%s: %d lines", name, n)
		}
	}
}

// TestScriptText writes the joined script to the file named by
// LIMITER_SCRIPT_OUT, for bench/script-instructions.sh; without it the
// test is skipped.
func TestScriptText(t *testing.T) {
	path := os.Getenv("LIMITER_SCRIPT_OUT")
	if path == "" {
		t.Skip("LIMITER_SCRIPT_OUT not set")
	}
	if err := os.WriteFile(path, []byte(bucketLua), 0o644); err != nil {
		t.Fatal(err)
	}
}

func countLines(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '\n' {
			n++
		}
	}
	return n
}
