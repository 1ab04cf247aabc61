package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --listen unix:PATH serves on a Unix socket: a socket an earlier process
// left at PATH is replaced, any other file there is refused and left
// alone, and the socket is gone once the listener closes.
func TestListenUnixSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "limiter.sock")
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close() // a socket file without a process, as after a crash

	ln, err := listen("unix:" + path)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v, %v; want 0660: owner and group alone", fi.Mode().Perm(), err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(ln)
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	resp, err := c.Get("http://limiter/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Errorf("over the socket: %q", body)
	}
	srv.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("the socket is still there after the listener closed: %v", err)
	}

	regular := filepath.Join(dir, "file")
	if err := os.WriteFile(regular, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := listen("unix:" + regular); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("over a regular file: %v; want it refused", err)
	}
	if b, _ := os.ReadFile(regular); string(b) != "keep me" {
		t.Error("the regular file was touched")
	}
	if ln, err := listen("127.0.0.1:0"); err != nil || ln.Addr().Network() != "tcp" {
		t.Errorf("host:port: %v, %v; want TCP", ln, err)
	} else {
		ln.Close()
	}
}
