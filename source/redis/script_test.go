package redis

import (
	"crypto/sha1"
	"encoding/hex"
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
	listed := slices.Clone(scriptFragments)
	slices.Sort(listed)
	for i := range names {
		names[i] = names[i][len("lua/"):]
	}
	if !slices.Equal(names, listed) || len(slices.Compact(listed)) != len(scriptFragments) {
		t.Fatalf("lua/ holds %v, scriptFragments lists %v", names, scriptFragments)
	}
	for _, name := range scriptFragments {
		text, _ := scriptFiles.ReadFile("lua/" + name)
		if n := countLines(text); n > 600 {
			t.Errorf("lua/%s: %d lines", name, n)
		}
	}
}

// TestScriptUnchanged holds the joined script to the single file it was
// cut from, byte for byte.
func TestScriptUnchanged(t *testing.T) {
	sum := sha1.Sum([]byte(bucketLua))
	if got := hex.EncodeToString(sum[:]); got != "48320c569ebcefa895cf87cd1c6b328ee5969e10" {
		t.Fatalf("joined script's SHA-1 is %s", got)
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
