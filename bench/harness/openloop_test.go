package main

import (
	"bufio"
	"strings"
	"testing"
)

// readResponse reads keep-alive answers one after another, and refuses
// what it cannot measure.
func TestReadResponse(t *testing.T) {
	two := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}" +
		"HTTP/1.1 429 Too Many Requests\r\ncontent-length: 3\r\nRetry-After: 1\r\n\r\n{ }"
	r := bufio.NewReader(strings.NewReader(two))
	for _, want := range []int{200, 429} {
		status, err := readResponse(r)
		if err != nil || status != want {
			t.Fatalf("readResponse = %d, %v; want %d", status, err, want)
		}
	}
	if _, err := readResponse(r); err == nil {
		t.Error("read a third answer from two")
	}
	for name, bad := range map[string]string{
		"no Content-Length": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
		"not HTTP":          "SSH-2.0-OpenSSH\r\n\r\n",
		"bad status":        "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
		"short body":        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",
	} {
		if _, err := readResponse(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
