package main

import (
	"io"
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
