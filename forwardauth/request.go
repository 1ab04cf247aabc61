package forwardauth

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// The headers a proxy describes the original request with.
const (
	headerForwardedFor    = "X-Forwarded-For"
	headerRealIP          = "X-Real-Ip"
	headerForwardedMethod = "X-Forwarded-Method"
	headerOriginalMethod  = "X-Original-Method"
	headerForwardedURI    = "X-Forwarded-Uri"
	headerOriginalURI     = "X-Original-Uri"
	headerForwardedHost   = "X-Forwarded-Host"
	// HeaderForwardedAuthorization carries the client's own Authorization
	// header when the proxy's Authorization holds the limiter's token.
	HeaderForwardedAuthorization = "X-Forwarded-Authorization"
)

// Request is the original request as a forward-auth call describes it. It
// reads the call's headers only as far as a rule asks.
type Request struct {
	r       *http.Request
	rules   *Rules
	peer    netip.Addr
	trusted bool
	// authForwarded says that the call's Authorization header is the
	// proxy's (it carries the limiter's token), so the client's own is
	// read from X-Forwarded-Authorization.
	authForwarded bool
	client        netip.Addr // computed on first use
}

// Describe reads r, a forward-auth call, with the trusted proxies of rs.
// authForwarded is true when the limiter requires a token: the call's own
// Authorization header is then the proxy's, and a rule's
// header:Authorization reads X-Forwarded-Authorization.
func (rs *Rules) Describe(r *http.Request, authForwarded bool) *Request {
	q := &Request{r: r, rules: rs, authForwarded: authForwarded}
	if overUnixSocket(r) {
		// No address: a process on this host, trusted or not as a whole.
		q.trusted = rs.TrustsUnixSockets()
		return q
	}
	q.peer = peerAddr(r.RemoteAddr)
	q.trusted = rs.Trusts(q.peer)
	return q
}

// overUnixSocket reports whether r came in on a Unix socket listener.
func overUnixSocket(r *http.Request) bool {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && la.Network() == "unix"
}

// Trusted reports whether the call came from a trusted proxy, whose
// forwarding headers are therefore believed.
func (q *Request) Trusted() bool { return q.trusted }

// Value returns the id src gives for the original request, and false when
// it has none (an absent or empty header or cookie, or a path the proxy
// did not send). The client address (over IP) and a constant always
// have a value.
func (q *Request) Value(src Source) (string, bool) {
	switch src.Kind {
	case ClientIP:
		a := q.ClientIP()
		if !a.IsValid() {
			return "", false // a connection without an IP address
		}
		return a.String(), true
	case Header:
		name := src.Arg
		if q.authForwarded && name == "Authorization" {
			name = HeaderForwardedAuthorization
		}
		return nonEmpty(q.r.Header.Get(name))
	case Cookie:
		c, err := q.r.Cookie(src.Arg)
		if err != nil {
			return "", false
		}
		return nonEmpty(c.Value)
	case Method:
		if q.trusted {
			if m, ok := q.forwarded(headerForwardedMethod, headerOriginalMethod); ok {
				return m, true
			}
		}
		return nonEmpty(q.r.Method)
	case Path:
		if !q.trusted {
			return "", false
		}
		uri, ok := q.forwarded(headerForwardedURI, headerOriginalURI)
		if !ok {
			return "", false
		}
		path, _, _ := strings.Cut(uri, "?")
		return nonEmpty(path)
	case Host:
		host := q.r.Host
		if q.trusted {
			if h, ok := q.forwarded(headerForwardedHost); ok {
				// Proxies in a row may each add theirs: the first is
				// the one the client asked for.
				host, _, _ = strings.Cut(h, ",")
			}
		}
		return nonEmpty(stripPort(host))
	case Const:
		return src.Arg, true
	}
	return "", false
}

// forwarded returns the first non-empty value among the headers names.
func (q *Request) forwarded(names ...string) (string, bool) {
	for _, n := range names {
		if v := strings.TrimSpace(q.r.Header.Get(n)); v != "" {
			return v, true
		}
	}
	return "", false
}

// ClientIP is the address of the client that sent the original request.
// From a trusted proxy: the rightmost address of X-Forwarded-For that is
// not a trusted proxy (the nearest hop that no trusted proxy vouches
// for), the leftmost when every one is trusted; else X-Real-IP; else the
// proxy itself. From anyone else: the peer, whatever headers it sent. A
// call over a Unix socket has no peer address: from a trusted one, the
// client is what the headers say; otherwise it has none (invalid).
func (q *Request) ClientIP() netip.Addr {
	if q.client.IsValid() {
		return q.client
	}
	q.client = q.peer
	if q.trusted {
		if a, ok := q.fromForwardedFor(); ok {
			q.client = a
		} else if a, ok := parseAddr(q.r.Header.Get(headerRealIP)); ok {
			q.client = a
		}
	}
	return q.client
}

// fromForwardedFor walks X-Forwarded-For (every line of it, in order) from
// the right. An entry that is not an address ends the walk without an
// answer: whoever wrote it is not a proxy the limiter trusts, so nothing
// left of it can be believed either.
func (q *Request) fromForwardedFor() (netip.Addr, bool) {
	lines := q.r.Header.Values(headerForwardedFor)
	var leftmost netip.Addr
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		for line != "" {
			var entry string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				entry, line = line[j+1:], line[:j]
			} else {
				entry, line = line, ""
			}
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			a, ok := parseAddr(entry)
			if !ok {
				return netip.Addr{}, false
			}
			if !q.rules.Trusts(a) {
				return a, true
			}
			leftmost = a
		}
	}
	return leftmost, leftmost.IsValid()
}

// parseAddr reads an address as forwarding headers write it: bare, or
// with a port (192.0.2.1:443, [2001:db8::1]:443), or bracketed. A zone is
// refused: it means nothing beyond the host that wrote it.
func parseAddr(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Addr{}, false
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), a.Zone() == ""
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), ap.Addr().Zone() == ""
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return a.Unmap(), a.Zone() == ""
		}
	}
	return netip.Addr{}, false
}

// peerAddr is the address of the connection's far end, from net/http's
// RemoteAddr ("host:port"). A request served some other way (a test's
// handler call with a bare address) still gets its address read.
func peerAddr(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	if a, ok := parseAddr(remote); ok {
		return a
	}
	return netip.Addr{}
}

// stripPort cuts the port off a Host header's value: example.com:8080 is
// example.com, [2001:db8::1]:443 is 2001:db8::1.
func stripPort(host string) string {
	host = strings.TrimSpace(host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

func nonEmpty(s string) (string, bool) {
	return s, s != ""
}
