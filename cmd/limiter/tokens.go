package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
)

// readTokenFile reads bearer tokens, one per line. Blank lines and lines
// starting with # are skipped. A file that names no token is an error: a
// flag that promises access control must not silently grant none or all.
// Error messages never contain a token.
func readTokenFile(path string) ([][]byte, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
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
