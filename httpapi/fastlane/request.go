package fastlane

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
)

// maxHeaders bounds the header lines of a lane request; a head with more
// goes to Fallback. A 4 KiB head holds about this many short ones.
const maxHeaders = 64

// readRequest reads head (through its empty line) into the request the
// handler gets, or reports false when the request is not the lane's.
func (c *conn) readRequest(head []byte) (*http.Request, bool) {
	// One string for the whole head: every method, path, header name and
	// value below is a piece of it, not a copy.
	text := string(head)
	line, rest, _ := strings.Cut(text, "\r\n")
	method, target, ok := requestLine(line)
	if !ok || !c.srv.Match(target) {
		return nil, false
	}
	h, ok := readHeader(rest)
	if !ok {
		return nil, false
	}
	r := new(http.Request)
	*r = c.request
	r.Method = method
	r.URL = &url.URL{Path: target}
	r.RequestURI = target
	r.Host = h.host
	r.Header = h.header
	r.Close = h.closeAfter
	return r, true
}

// requestLine reads "GET /path HTTP/1.1" or the same with HEAD: the only
// request lines the lane takes. The path is origin-form, made only of
// characters that net/url leaves as they are (no query, no percent
// escapes), so r.URL.Path is the target itself.
func requestLine(line string) (method, target string, ok bool) {
	method, rest, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || proto != "HTTP/1.1" || (method != http.MethodGet && method != http.MethodHead) {
		return "", "", false
	}
	if len(target) == 0 || target[0] != '/' {
		return "", "", false
	}
	for i := 0; i < len(target); i++ {
		if !isPathByte(target[i]) {
			return "", "", false
		}
	}
	return method, target, true
}

// isPathByte reports the bytes a lane path may hold: letters, digits,
// "-", ".", "_", "~" and "/".
func isPathByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
		b == '-' || b == '.' || b == '_' || b == '~' || b == '/'
}

// laneHeader is what the lane reads of a request's header lines.
type laneHeader struct {
	header     http.Header // without Host, as net/http gives it
	host       string
	closeAfter bool // Connection: close
}

// readHeader reads the header lines of a head (each ended by CRLF, then
// the empty line). It takes only what net/http would read to the same
// *http.Request with nothing of its own added: every name a token, every
// value free of control characters, exactly one Host, no body (no
// Transfer-Encoding, a Content-Length only of 0), a Connection of
// keep-alive or close only, and none of the headers net/http acts on
// further (Expect, Upgrade, Pragma). ok is false for anything else.
func readHeader(lines string) (laneHeader, bool) {
	n := strings.Count(lines, "\r\n") - 1 // the last ends the empty line
	if n > maxHeaders {
		return laneHeader{}, false
	}
	h := laneHeader{header: make(http.Header, n)}
	// One backing array for every value, as net/textproto does: a header
	// seen once costs no allocation of its own.
	values := make([]string, n)
	hosts := 0
	for {
		line, rest, _ := strings.Cut(lines, "\r\n")
		lines = rest
		if line == "" {
			break
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || !validName(name) {
			return laneHeader{}, false
		}
		value = trimSpace(value)
		if !validValue(value) {
			return laneHeader{}, false
		}
		name = http.CanonicalHeaderKey(name)
		switch name {
		case "Host":
			hosts++
			if hosts > 1 || !validHost(value) {
				return laneHeader{}, false
			}
			h.host = value
			continue
		case "Content-Length":
			if value != "0" || h.header[name] != nil {
				return laneHeader{}, false
			}
		case "Connection":
			switch {
			case h.header[name] != nil:
				return laneHeader{}, false
			case strings.EqualFold(value, "close"):
				h.closeAfter = true
			case !strings.EqualFold(value, "keep-alive"):
				return laneHeader{}, false
			}
		case "Transfer-Encoding", "Expect", "Upgrade", "Pragma":
			return laneHeader{}, false
		}
		if vv := h.header[name]; vv != nil {
			h.header[name] = append(vv, value)
			continue
		}
		values[0] = value
		h.header[name] = values[:1:1]
		values = values[1:]
	}
	if hosts != 1 {
		return laneHeader{}, false
	}
	return h, true
}

// plausibleRequestLine reports whether line (without its CRLF) can be
// the request line of a lane request, whatever the path: GET or HEAD, a
// path of isPathByte bytes, HTTP/1.1.
func plausibleRequestLine(line []byte) bool {
	var target []byte
	switch {
	case len(line) > 4 && string(line[:4]) == "GET ":
		target = line[4:]
	case len(line) > 5 && string(line[:5]) == "HEAD ":
		target = line[5:]
	default:
		return false
	}
	const proto = " HTTP/1.1"
	if len(target) <= len(proto) || string(target[len(target)-len(proto):]) != proto {
		return false
	}
	target = target[:len(target)-len(proto)]
	if target[0] != '/' {
		return false
	}
	for _, b := range target {
		if !isPathByte(b) {
			return false
		}
	}
	return true
}

// plausibleHeaderLine reports whether line (without its CRLF) is a header
// line the lane reads: a token, a colon, a value without control
// characters. Which headers it takes is readHeader's to say.
func plausibleHeaderLine(line []byte) bool {
	name, value, ok := bytes.Cut(line, []byte(":"))
	return ok && validName(name) && validValue(value)
}

// validName reports a header name of token characters only (RFC 9110).
func validName[T string | []byte](name T) bool {
	if len(name) == 0 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isTokenByte(name[i]) {
			return false
		}
	}
	return true
}

// isTokenByte reports the bytes of an RFC 9110 token: letters, digits and
// !#$%&'*+-.^_`|~, as two 64-bit masks over the ASCII range.
func isTokenByte(b byte) bool {
	const (
		// Bits 0-63: '!', '#'-'\'', '*', '+', '-', '.', '0'-'9'.
		low = 1<<'!' | 1<<'#' | 1<<'$' | 1<<'%' | 1<<'&' | 1<<'\'' | 1<<'*' | 1<<'+' | 1<<'-' | 1<<'.' |
			1<<'0' | 1<<'1' | 1<<'2' | 1<<'3' | 1<<'4' | 1<<'5' | 1<<'6' | 1<<'7' | 1<<'8' | 1<<'9'
		// Bits 64-127: letters, '^', '_', '`', '|', '~'.
		high = (1<<26-1)<<('A'-64) | (1<<26-1)<<('a'-64) | 1<<('^'-64) | 1<<('_'-64) | 1<<('`'-64) | 1<<('|'-64) | 1<<('~'-64)
	)
	switch {
	case b < 64:
		return low&(uint64(1)<<b) != 0
	case b < 128:
		return high&(uint64(1)<<(b-64)) != 0
	}
	return false
}

// trimSpace drops the spaces and tabs around a header value.
func trimSpace(v string) string {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

// validValue reports a header value without control characters other
// than tab, the test net/http applies.
func validValue[T string | []byte](v T) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < ' ' && b != '\t' || b == 0x7f {
			return false
		}
	}
	return true
}

// validHost reports a Host the lane takes: a name or address with an
// optional port, in the characters such a thing is written with. net/http
// accepts more (and refuses some); those go to it.
func validHost(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		b := h[i]
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
			b == '-' || b == '.' || b == '_' || b == ':' || b == '[' || b == ']') {
			return false
		}
	}
	return true
}
