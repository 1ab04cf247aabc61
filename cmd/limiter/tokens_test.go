package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Listening beyond loopback takes admin tokens, or the insecure flag that
// says the open admin calls are meant; loopback and Unix sockets take
// neither.
func TestAdminExposedRefusesAnOpenListener(t *testing.T) {
	tests := []struct {
		args    []string
		env     map[string]string
		refused bool
	}{
		{[]string{"--listen", "127.0.0.1:8080"}, nil, false},
		{[]string{"--listen", "127.0.0.2:0"}, nil, false},
		{[]string{"--listen", "[::1]:8080"}, nil, false},
		{[]string{"--listen", "localhost:8080"}, nil, false},
		{[]string{"--listen", "unix:/run/limiter.sock"}, nil, false},
		{[]string{"--listen", "0.0.0.0:8080"}, nil, true},
		{[]string{"--listen", ":8080"}, nil, true},
		{[]string{"--listen", "[::]:8080"}, nil, true},
		{[]string{"--listen", "192.0.2.7:8080"}, nil, true},
		{[]string{"--listen", "limiter.internal:8080"}, nil, true},
		{nil, map[string]string{"LIMITER_LISTEN": "0.0.0.0:8080"}, true},
		{[]string{"--listen", "0.0.0.0:8080", "--admin-token-file", "/run/secrets/admin"}, nil, false},
		{[]string{"--listen", "0.0.0.0:8080"}, map[string]string{"LIMITER_ADMIN_TOKEN_FILE": "/run/secrets/admin"}, false},
		{[]string{"--listen", "0.0.0.0:8080", "--insecure-no-admin-token"}, nil, false},
		{[]string{"--listen", "0.0.0.0:8080"}, map[string]string{"LIMITER_INSECURE_NO_ADMIN_TOKEN": "true"}, false},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := parseServeFlags(tt.args, io.Discard, io.Discard)
			refused := err != nil && strings.Contains(err.Error(), "there is no --admin-token-file")
			if refused != tt.refused || (err != nil && !refused) {
				t.Errorf("%v %v: %v; want refused %v", tt.args, tt.env, err, tt.refused)
			}
		})
	}
	var stderr strings.Builder
	if code := run([]string{"serve", "--listen", "0.0.0.0:0"}, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "--insecure-no-admin-token") {
		t.Errorf("serve on 0.0.0.0 without a token: exit %d, %q; want 2 and the way out", code, stderr.String())
	}
}

// A token file is one token per line, comments and blank lines skipped; a
// byte-order mark before the first is not part of it, and a token no
// client could send in a header is refused at its line, never quoted.
func TestReadTokenFile(t *testing.T) {
	tests := []struct {
		name, content string
		want          []string
		problem       string
	}{
		{"tokens and comments", "# rotated monthly\nalpha\n\n  beta  \r\n", []string{"alpha", "beta"}, ""},
		{"a byte-order mark first", "\xef\xbb\xbfalpha\nbeta\n", []string{"alpha", "beta"}, ""},
		{"a byte-order mark later", "alpha\n\xef\xbb\xbfbeta\n", nil, ":2: a token must be visible ASCII characters"},
		{"a control character", "al\x01pha\n", nil, ":1: a token must be visible ASCII characters"},
		{"a space", "al pha\n", nil, ":1: a token may not contain spaces"},
		{"no token", "# none yet\n", nil, "holds no token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readTokenFile(path)
			if tt.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tt.problem) {
					t.Fatalf("readTokenFile = %q, %v; want a problem %q", got, err, tt.problem)
				}
				return
			}
			var strs []string
			for _, tok := range got {
				strs = append(strs, string(tok))
			}
			if err != nil || !slices.Equal(strs, tt.want) {
				t.Errorf("readTokenFile = %q, %v; want %q", strs, err, tt.want)
			}
		})
	}
}
