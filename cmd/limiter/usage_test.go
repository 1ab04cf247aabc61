package main

import (
	"bytes"
	"strings"
	"testing"
)

// Every command's help is asked for either way (COMMAND --help, help
// COMMAND), goes to stdout with exit 0, and writes flags as the docs do.
func TestHelp(t *testing.T) {
	tests := []struct {
		command string
		want    []string
	}{
		{"serve", []string{"usage: limiter serve [flags]", "\n  --listen string\n", "\n  --grpc-listen string\n", "(env LIMITER_LISTEN) (default \"127.0.0.1:8080\")"}},
		{"check-config", []string{"usage: limiter check-config [flags]", "\n  --defaults string\n", "\n  --forward-auth string\n"}},
		{"version", []string{"usage: limiter version\n", "Prints the version"}},
	}
	for _, tt := range tests {
		var answers []string
		for _, args := range [][]string{{tt.command, "--help"}, {tt.command, "-h"}, {"help", tt.command}} {
			var stdout, stderr bytes.Buffer
			if code := run(args, &stdout, &stderr); code != 0 || stderr.Len() > 0 {
				t.Errorf("%v: exit %d, stderr %q; want 0 and nothing", args, code, stderr.String())
			}
			out := stdout.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("%v: the help lacks %q:\n%s", args, w, out)
				}
			}
			if strings.Contains(out, "\n  -") && !strings.Contains(out, "\n  --") || strings.Contains(out, "limiter dev") {
				t.Errorf("%v: flags written -name, or the version printed instead of help:\n%s", args, out)
			}
			answers = append(answers, out)
		}
		if answers[0] != answers[1] || answers[0] != answers[2] {
			t.Errorf("%s: --help, -h and help %s answer differently", tt.command, tt.command)
		}
	}
}

// Usage errors exit 2, with a message on stderr that says what to do.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--source", "carrier-pigeon://x"}, `--source "carrier-pigeon://x": want memory`},
		{[]string{"serve", "--source", "redis"}, `--source "redis": want memory`},
		{[]string{"serve", "--no-such-flag"}, "run 'limiter serve --help' for its flags"},
		{[]string{"check-config", "--no-such-flag"}, "run 'limiter check-config --help' for its flags"},
		{[]string{"version", "--short"}, "run 'limiter version --help' for its flags"},
		{[]string{"help", "nope"}, `unknown command "nope"`},
		{[]string{"nope"}, `unknown command "nope"`},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		if code := run(tt.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}
