package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/limiter-dev/limiter/configfile"
)

// readTokenFile reads bearer tokens, one per line. Blank lines and lines
// starting with # are skipped. A file that names no token is an error: a
// flag that promises access control must not silently grant none or all.
// Error messages never contain a token.
func readTokenFile(path string) ([][]byte, error) {
	return parseTokenFile(path, os.ReadFile)
}

// readTokenFileOnReload is readTokenFile refusing a path that holds
// anything but a regular file, as a reload refuses such a configuration
// file (configfile.ReadRegular).
func readTokenFileOnReload(path string) ([][]byte, error) {
	return parseTokenFile(path, configfile.ReadRegular)
}

func parseTokenFile(path string, read func(string) ([]byte, error)) ([][]byte, error) {
	if path == "" {
		return nil, nil
	}
	data, err := read(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	// A byte-order mark, which some editors put first, is not the first
	// token's.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var tokens [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		tok := bytes.TrimSpace(sc.Bytes())
		if len(tok) == 0 || tok[0] == '#' {
			continue
		}
		if bytes.ContainsAny(tok, " \t") {
			return nil, fmt.Errorf("token file %s:%d: a token may not contain spaces", path, line)
		}
		if bytes.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }) {
			// A client sends its token in an Authorization header, as
			// visible ASCII: any other byte (a stray mark, a control
			// character) makes a token no client can present.
			return nil, fmt.Errorf("token file %s:%d: a token must be visible ASCII characters", path, line)
		}
		tokens = append(tokens, bytes.Clone(tok))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("token file %s holds no token", path)
	}
	return tokens, nil
}

// adminExposed refuses to serve the API beyond loopback with no admin
// token: reset, reload and sync would then be open to anyone who reaches
// the port, which a service listening on 0.0.0.0 (a container's default)
// must not be by accident. --insecure-no-admin-token says it is meant.
func (f *serveFlags) adminExposed() error {
	if f.adminTokenFile != "" || f.insecureNoAdminToken || loopbackOnly(f.listen) {
		return nil
	}
	return fmt.Errorf("--listen %s is reachable beyond this host, and there is no --admin-token-file (%s): anyone who reaches it could reset any limit, reload and sync; give a file of admin tokens, listen on loopback, or say --insecure-no-admin-token (%s=true) to serve so anyway",
		f.listen, envName("admin-token-file"), envName("insecure-no-admin-token"))
}

// loopbackOnly reports whether a --listen address is reachable from this
// host alone: a Unix socket, localhost, or a loopback address. An empty
// host (":8080") is every interface; a host name other than localhost may
// resolve to anything, and counts as reachable.
func loopbackOnly(listen string) bool {
	if strings.HasPrefix(listen, unixPrefix) {
		return true
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
