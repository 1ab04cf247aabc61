package forwardauth_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/limiter-dev/limiter/forwardauth"
)

// The peers of the tests below: two trusted proxies (one IPv4, one IPv6)
// and a client that calls the limiter itself.
const (
	trustedPeer   = "10.0.0.1:43210"
	trustedPeerV6 = "[::1]:43210"
	untrustedPeer = "192.0.2.1:43210"
)

// testRules trusts 10.0.0.0/8 and ::1, the proxies of the tests.
func testRules(t *testing.T) *forwardauth.Rules {
	t.Helper()
	rs, err := forwardauth.New([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// headers is a request's headers in order; a name given twice is two
// header lines.
type headers [][2]string

// forwarded is a forward-auth call from peer, with hdrs, as a proxy would
// send it.
func forwarded(method, peer string, hdrs headers) *http.Request {
	r := httptest.NewRequest(method, "/v1/forward-auth/api?ignored=1", nil)
	r.RemoteAddr = peer
	for _, h := range hdrs {
		r.Header.Add(h[0], h[1])
	}
	return r
}

func mustSource(t *testing.T, s string) forwardauth.Source {
	t.Helper()
	src, err := forwardauth.ParseSource(s)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// The client's address. From a trusted proxy, X-Forwarded-For is walked
// from the right, every header line in order as one list, to the first
// address that is not a trusted proxy: the nearest hop no trusted proxy
// vouches for, whatever the client wrote further left. Entries may carry a
// port or brackets; empty entries are skipped; an entry that is not an
// address ends the walk with nothing, and X-Real-IP, then the proxy
// itself, are the answer. From anyone else, the peer is the client and
// every forwarding header is ignored.
func TestClientIP(t *testing.T) {
	tests := []struct {
		name string
		peer string
		hdrs headers
		want string
	}{
		{"a trusted proxy without headers is the client", trustedPeer, nil, "10.0.0.1"},
		{"one address", trustedPeer, headers{{"X-Forwarded-For", "203.0.113.7"}}, "203.0.113.7"},
		{"the rightmost untrusted address, not what the client wrote left of it", trustedPeer,
			headers{{"X-Forwarded-For", "198.51.100.1, 203.0.113.7, 10.0.0.2"}}, "203.0.113.7"},
		{"trusted hops are skipped", trustedPeer,
			headers{{"X-Forwarded-For", "203.0.113.7,10.9.9.9,10.0.0.2"}}, "203.0.113.7"},
		{"all trusted: the leftmost", trustedPeer,
			headers{{"X-Forwarded-For", "10.0.0.3, 10.0.0.2, ::1"}}, "10.0.0.3"},
		{"several lines are one list, in order", trustedPeer,
			headers{{"X-Forwarded-For", "198.51.100.1"}, {"X-Forwarded-For", "203.0.113.7, 10.0.0.2"}}, "203.0.113.7"},
		{"the walk goes on into earlier lines", trustedPeer,
			headers{{"X-Forwarded-For", "198.51.100.1, 203.0.113.9"}, {"X-Forwarded-For", "10.0.0.2"}, {"X-Forwarded-For", "10.0.0.3"}}, "203.0.113.9"},
		{"all trusted over several lines: the leftmost of the first", trustedPeer,
			headers{{"X-Forwarded-For", "10.0.0.5, 10.0.0.4"}, {"X-Forwarded-For", "10.0.0.3"}}, "10.0.0.5"},
		{"an IPv4 address with a port", trustedPeer, headers{{"X-Forwarded-For", "203.0.113.7:4711"}}, "203.0.113.7"},
		{"an IPv6 address with a port", trustedPeer, headers{{"X-Forwarded-For", "[2001:db8::7]:443"}}, "2001:db8::7"},
		{"an IPv6 address in brackets", trustedPeer, headers{{"X-Forwarded-For", "[2001:db8::8]"}}, "2001:db8::8"},
		{"a bare IPv6 address", trustedPeer, headers{{"X-Forwarded-For", "2001:DB8::9"}}, "2001:db8::9"},
		{"a trusted hop with a port is skipped", trustedPeer,
			headers{{"X-Forwarded-For", "203.0.113.7, 10.0.0.2:8080, [::1]:9090"}}, "203.0.113.7"},
		{"an IPv4-mapped address is the IPv4 address", trustedPeer,
			headers{{"X-Forwarded-For", "::ffff:203.0.113.7"}}, "203.0.113.7"},
		{"an IPv4-mapped trusted hop is skipped", trustedPeer,
			headers{{"X-Forwarded-For", "203.0.113.7, ::ffff:10.0.0.2"}}, "203.0.113.7"},
		{"empty entries are skipped", trustedPeer,
			headers{{"X-Forwarded-For", "203.0.113.7, , 10.0.0.2,"}, {"X-Forwarded-For", ""}}, "203.0.113.7"},
		{"only empty entries: the proxy", trustedPeer, headers{{"X-Forwarded-For", " , ,"}}, "10.0.0.1"},
		{"garbage ends the walk: the proxy", trustedPeer,
			headers{{"X-Forwarded-For", "203.0.113.7, unknown, 10.0.0.2"}}, "10.0.0.1"},
		{"garbage ends the walk: X-Real-IP", trustedPeer,
			headers{{"X-Forwarded-For", "203.0.113.7, unknown, 10.0.0.2"}, {"X-Real-IP", "192.0.2.55"}}, "192.0.2.55"},
		{"garbage left of the answer does not matter", trustedPeer,
			headers{{"X-Forwarded-For", "unknown, 203.0.113.7, 10.0.0.2"}, {"X-Real-IP", "192.0.2.55"}}, "203.0.113.7"},
		{"an address with a zone is garbage", trustedPeer,
			headers{{"X-Forwarded-For", "fe80::1%eth0"}, {"X-Real-IP", "192.0.2.55"}}, "192.0.2.55"},
		{"a CIDR is garbage", trustedPeer, headers{{"X-Forwarded-For", "203.0.113.0/24"}}, "10.0.0.1"},
		{"a name is garbage", trustedPeer, headers{{"X-Forwarded-For", "client.example"}}, "10.0.0.1"},
		{"an obfuscated identifier (RFC 7239) is garbage", trustedPeer, headers{{"X-Forwarded-For", "_hidden"}}, "10.0.0.1"},
		{"X-Real-IP without X-Forwarded-For", trustedPeer, headers{{"X-Real-IP", "192.0.2.55"}}, "192.0.2.55"},
		{"X-Real-IP with a port", trustedPeer, headers{{"X-Real-IP", "192.0.2.55:80"}}, "192.0.2.55"},
		{"X-Real-IP in brackets", trustedPeer, headers{{"X-Real-IP", "[2001:db8::55]"}}, "2001:db8::55"},
		{"X-Forwarded-For before X-Real-IP", trustedPeer,
			headers{{"X-Real-IP", "192.0.2.55"}, {"X-Forwarded-For", "203.0.113.7"}}, "203.0.113.7"},
		{"X-Real-IP that is not an address: the proxy", trustedPeer, headers{{"X-Real-IP", "nobody"}}, "10.0.0.1"},
		{"a trusted IPv6 proxy", trustedPeerV6, headers{{"X-Forwarded-For", "2001:db8::7"}}, "2001:db8::7"},
		{"a trusted IPv6 proxy alone", trustedPeerV6, nil, "::1"},
		{"a trusted proxy connecting over IPv4-mapped IPv6", "[::ffff:10.0.0.1]:80",
			headers{{"X-Forwarded-For", "203.0.113.7"}}, "203.0.113.7"},
		{"an IPv4-mapped peer alone is its IPv4 address", "[::ffff:10.0.0.1]:80", nil, "10.0.0.1"},
		{"an untrusted peer is the client", untrustedPeer,
			headers{{"X-Forwarded-For", "203.0.113.7"}, {"X-Real-IP", "192.0.2.55"}}, "192.0.2.1"},
		{"an untrusted IPv6 peer is the client", "[2001:db8::1]:5000",
			headers{{"X-Forwarded-For", "203.0.113.7"}}, "2001:db8::1"},
		{"an untrusted peer with a zone", "[fe80::1%eth0]:5000", headers{{"X-Forwarded-For", "203.0.113.7"}}, "fe80::1"},
		{"an address written without a port", "10.0.0.1", headers{{"X-Forwarded-For", "203.0.113.7"}}, "203.0.113.7"},
	}
	rs := testRules(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := rs.Describe(forwarded("GET", tt.peer, tt.hdrs), false)
			got, ok := q.Value(forwardauth.Source{Kind: forwardauth.ClientIP})
			if !ok || got != tt.want {
				t.Fatalf("client_ip = %q, %v; want %q", got, ok, tt.want)
			}
			if a := q.ClientIP(); a.String() != tt.want {
				t.Errorf("ClientIP() = %v; want %s", a, tt.want)
			}
		})
	}
}

// Trusted says whose headers are believed: the peer's address, whatever
// the headers say.
func TestTrusted(t *testing.T) {
	rs := testRules(t)
	for _, tt := range []struct {
		peer string
		want bool
	}{
		{trustedPeer, true},
		{trustedPeerV6, true},
		{"[::ffff:10.0.0.1]:80", true},
		{untrustedPeer, false},
		{"", false},
		{"@", false},
		{"not an address", false},
	} {
		r := forwarded("GET", tt.peer, headers{{"X-Forwarded-For", "10.0.0.2"}})
		if got := rs.Describe(r, false).Trusted(); got != tt.want {
			t.Errorf("peer %q: Trusted() = %v; want %v", tt.peer, got, tt.want)
		}
	}
	// nil rules trust no one.
	var none *forwardauth.Rules
	if none.Describe(forwarded("GET", trustedPeer, nil), false).Trusted() {
		t.Error("nil rules trust 10.0.0.1")
	}
}

// A connection without an IP address (a Unix socket) has no client
// address: client_ip is missing, and the rule's missing action decides.
func TestClientIPWithoutAnAddress(t *testing.T) {
	rs := testRules(t)
	for _, peer := range []string{"", "@", "/run/limiter.sock"} {
		q := rs.Describe(forwarded("GET", peer, headers{{"X-Forwarded-For", "203.0.113.7"}}), false)
		if got, ok := q.Value(forwardauth.Source{Kind: forwardauth.ClientIP}); ok {
			t.Errorf("peer %q: client_ip = %q; want it missing", peer, got)
		}
	}
}

// Every other source, from a trusted proxy and from an untrusted peer:
// the method, path and host come from the forwarding headers only when
// the proxy is trusted (X-Forwarded-* before X-Original-*), with the query
// cut from the path and the port from the host; headers and cookies are
// the call's own, from anyone; a constant is always itself. An absent or
// empty value is missing.
func TestValue(t *testing.T) {
	tests := []struct {
		name     string
		method   string // GET when empty
		peer     string
		hdrs     headers
		host     string // the call's Host; example.com (httptest's) when empty
		noHost   bool   // an empty Host
		auth     bool   // the limiter requires a token
		source   string
		want     string
		wantMiss bool
	}{
		// method
		{name: "method: the call's own", method: "POST", peer: trustedPeer, source: "method", want: "POST"},
		{name: "method: X-Forwarded-Method", method: "GET", peer: trustedPeer, hdrs: headers{{"X-Forwarded-Method", "DELETE"}}, source: "method", want: "DELETE"},
		{name: "method: X-Original-Method", peer: trustedPeer, hdrs: headers{{"X-Original-Method", "PUT"}}, source: "method", want: "PUT"},
		{name: "method: X-Forwarded-Method before X-Original-Method", peer: trustedPeer,
			hdrs: headers{{"X-Original-Method", "PUT"}, {"X-Forwarded-Method", "PATCH"}}, source: "method", want: "PATCH"},
		{name: "method: a blank X-Forwarded-Method is absent", peer: trustedPeer,
			hdrs: headers{{"X-Forwarded-Method", "  "}, {"X-Original-Method", "PUT"}}, source: "method", want: "PUT"},
		{name: "method: untrusted peer, headers ignored", method: "HEAD", peer: untrustedPeer,
			hdrs: headers{{"X-Forwarded-Method", "DELETE"}, {"X-Original-Method", "PUT"}}, source: "method", want: "HEAD"},

		// path
		{name: "path: X-Forwarded-Uri", peer: trustedPeer, hdrs: headers{{"X-Forwarded-Uri", "/api/items"}}, source: "path", want: "/api/items"},
		{name: "path: the query is cut", peer: trustedPeer, hdrs: headers{{"X-Forwarded-Uri", "/api/items?id=3&x=/y"}}, source: "path", want: "/api/items"},
		{name: "path: X-Original-URI", peer: trustedPeer, hdrs: headers{{"X-Original-URI", "/login?next=/account"}}, source: "path", want: "/login"},
		{name: "path: X-Forwarded-Uri before X-Original-URI", peer: trustedPeer,
			hdrs: headers{{"X-Original-URI", "/original"}, {"X-Forwarded-Uri", "/forwarded"}}, source: "path", want: "/forwarded"},
		{name: "path: a blank X-Forwarded-Uri is absent", peer: trustedPeer,
			hdrs: headers{{"X-Forwarded-Uri", " "}, {"X-Original-URI", "/original"}}, source: "path", want: "/original"},
		{name: "path: absent is missing", peer: trustedPeer, source: "path", wantMiss: true},
		{name: "path: a query alone is missing", peer: trustedPeer, hdrs: headers{{"X-Forwarded-Uri", "?a=1"}}, source: "path", wantMiss: true},
		{name: "path: untrusted peer is missing, whatever it sends", peer: untrustedPeer,
			hdrs: headers{{"X-Forwarded-Uri", "/api"}, {"X-Original-URI", "/api"}}, source: "path", wantMiss: true},

		// host
		{name: "host: the call's Host", peer: trustedPeer, host: "shop.example", source: "host", want: "shop.example"},
		{name: "host: the port is cut", peer: untrustedPeer, host: "shop.example:8080", source: "host", want: "shop.example"},
		{name: "host: IPv6 with a port", peer: untrustedPeer, host: "[::1]:80", source: "host", want: "::1"},
		{name: "host: IPv6 in brackets", peer: untrustedPeer, host: "[2001:db8::1]", source: "host", want: "2001:db8::1"},
		{name: "host: IPv4 with a port", peer: untrustedPeer, host: "192.0.2.9:443", source: "host", want: "192.0.2.9"},
		{name: "host: X-Forwarded-Host", peer: trustedPeer, host: "limiter.internal:8080",
			hdrs: headers{{"X-Forwarded-Host", "shop.example:443"}}, source: "host", want: "shop.example"},
		{name: "host: X-Forwarded-Host written by two proxies, the first is the client's", peer: trustedPeer,
			hdrs: headers{{"X-Forwarded-Host", "shop.example, internal.example:8080"}}, source: "host", want: "shop.example"},
		{name: "host: X-Forwarded-Host IPv6 with a port", peer: trustedPeer,
			hdrs: headers{{"X-Forwarded-Host", "[2001:db8::2]:443"}}, source: "host", want: "2001:db8::2"},
		{name: "host: untrusted peer, X-Forwarded-Host ignored", peer: untrustedPeer, host: "limiter.internal",
			hdrs: headers{{"X-Forwarded-Host", "shop.example"}}, source: "host", want: "limiter.internal"},
		{name: "host: empty is missing", peer: untrustedPeer, noHost: true, source: "host", wantMiss: true},
		{name: "host: empty, with X-Forwarded-Host from a trusted proxy", peer: trustedPeer, noHost: true,
			hdrs: headers{{"X-Forwarded-Host", "shop.example"}}, source: "host", want: "shop.example"},

		// header
		{name: "header: present", peer: untrustedPeer, hdrs: headers{{"X-Api-Key", "k1"}}, source: "header:X-Api-Key", want: "k1"},
		{name: "header: any spelling of the name", peer: untrustedPeer, hdrs: headers{{"x-api-key", "k1"}}, source: "header:X-API-KEY", want: "k1"},
		{name: "header: the first value", peer: trustedPeer, hdrs: headers{{"X-Api-Key", "k1"}, {"X-Api-Key", "k2"}}, source: "header:X-Api-Key", want: "k1"},
		{name: "header: absent is missing", peer: trustedPeer, source: "header:X-Api-Key", wantMiss: true},
		{name: "header: empty is missing", peer: trustedPeer, hdrs: headers{{"X-Api-Key", ""}}, source: "header:X-Api-Key", wantMiss: true},
		{name: "header: a forwarding header is read as it is, from anyone", peer: untrustedPeer,
			hdrs: headers{{"X-Forwarded-For", "203.0.113.7"}}, source: "header:X-Forwarded-For", want: "203.0.113.7"},
		{name: "header: Authorization without tokens", peer: trustedPeer,
			hdrs: headers{{"Authorization", "Bearer client"}, {"X-Forwarded-Authorization", "Bearer other"}}, source: "header:Authorization", want: "Bearer client"},
		{name: "header: Authorization with tokens reads X-Forwarded-Authorization", peer: trustedPeer, auth: true,
			hdrs: headers{{"Authorization", "Bearer limiter-token"}, {"X-Forwarded-Authorization", "Bearer client"}}, source: "header:authorization", want: "Bearer client"},
		{name: "header: Authorization with tokens, none forwarded, is missing", peer: trustedPeer, auth: true,
			hdrs: headers{{"Authorization", "Bearer limiter-token"}}, source: "header:Authorization", wantMiss: true},
		{name: "header: other headers are unchanged with tokens", peer: trustedPeer, auth: true,
			hdrs: headers{{"X-Api-Key", "k1"}}, source: "header:X-Api-Key", want: "k1"},

		// cookie
		{name: "cookie: present", peer: untrustedPeer, hdrs: headers{{"Cookie", "theme=dark; session=abc123"}}, source: "cookie:session", want: "abc123"},
		{name: "cookie: over several Cookie lines", peer: untrustedPeer,
			hdrs: headers{{"Cookie", "theme=dark"}, {"Cookie", "session=abc123"}}, source: "cookie:session", want: "abc123"},
		{name: "cookie: the first of two", peer: untrustedPeer, hdrs: headers{{"Cookie", "session=one; session=two"}}, source: "cookie:session", want: "one"},
		{name: "cookie: names are case-sensitive", peer: untrustedPeer, hdrs: headers{{"Cookie", "Session=abc123"}}, source: "cookie:session", wantMiss: true},
		{name: "cookie: absent is missing", peer: untrustedPeer, hdrs: headers{{"Cookie", "theme=dark"}}, source: "cookie:session", wantMiss: true},
		{name: "cookie: no Cookie header is missing", peer: untrustedPeer, source: "cookie:session", wantMiss: true},
		{name: "cookie: empty is missing", peer: untrustedPeer, hdrs: headers{{"Cookie", "session=; theme=dark"}}, source: "cookie:session", wantMiss: true},

		// const
		{name: "const: itself", peer: untrustedPeer, source: "const:global", want: "global"},
		{name: "const: itself from a trusted proxy", peer: trustedPeer, hdrs: headers{{"X-Forwarded-For", "garbage"}}, source: "const:a:b", want: "a:b"},
	}
	rs := testRules(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = "GET"
			}
			r := forwarded(method, tt.peer, tt.hdrs)
			switch {
			case tt.noHost:
				r.Host = ""
			case tt.host != "":
				r.Host = tt.host
			}
			got, ok := rs.Describe(r, tt.auth).Value(mustSource(t, tt.source))
			if tt.wantMiss {
				if ok {
					t.Fatalf("%s = %q; want it missing", tt.source, got)
				}
				return
			}
			if !ok || got != tt.want {
				t.Fatalf("%s = %q, %v; want %q", tt.source, got, ok, tt.want)
			}
		})
	}
}

// A Source that ParseSource never makes gives nothing.
func TestValueOfUnknownSource(t *testing.T) {
	q := testRules(t).Describe(forwarded("GET", trustedPeer, nil), false)
	for _, k := range []forwardauth.SourceKind{0, forwardauth.Const + 1} {
		if got, ok := q.Value(forwardauth.Source{Kind: k, Arg: "x"}); ok {
			t.Errorf("Source{Kind: %d} = %q; want nothing", k, got)
		}
	}
}

// A call over a Unix socket has no peer address. With TrustUnixSockets, a
// proxy on that socket is believed like a trusted address: the client is
// what X-Forwarded-For (or X-Real-IP) says, and the forwarded path counts.
// Without it, the headers are ignored and the call has no client address.
func TestUnixSocketCalls(t *testing.T) {
	overUnix := func() *http.Request {
		r := forwarded("GET", "@", headers{{"X-Forwarded-For", "203.0.113.7"}, {"X-Original-URI", "/login?x=1"}})
		ctx := context.WithValue(r.Context(), http.LocalAddrContextKey, &net.UnixAddr{Name: "/run/limiter.sock", Net: "unix"})
		return r.WithContext(ctx)
	}
	trusting, err := forwardauth.New(nil, nil, forwardauth.TrustUnixSockets())
	if err != nil {
		t.Fatal(err)
	}
	if !trusting.TrustsUnixSockets() || testRules(t).TrustsUnixSockets() {
		t.Fatal("TrustsUnixSockets does not say what New was given")
	}
	q := trusting.Describe(overUnix(), false)
	if ip, ok := q.Value(forwardauth.Source{Kind: forwardauth.ClientIP}); !q.Trusted() || !ok || ip != "203.0.113.7" {
		t.Errorf("trusted socket: trusted %v, client_ip %q, %v; want 203.0.113.7 from X-Forwarded-For", q.Trusted(), ip, ok)
	}
	if path, ok := q.Value(forwardauth.Source{Kind: forwardauth.Path}); !ok || path != "/login" {
		t.Errorf("trusted socket: path %q, %v; want /login", path, ok)
	}
	q = testRules(t).Describe(overUnix(), false)
	if ip, ok := q.Value(forwardauth.Source{Kind: forwardauth.ClientIP}); q.Trusted() || ok {
		t.Errorf("untrusted socket: trusted %v, client_ip %q, %v; want no client address", q.Trusted(), ip, ok)
	}
	if _, ok := q.Value(forwardauth.Source{Kind: forwardauth.Path}); ok {
		t.Error("untrusted socket: the forwarded path was believed")
	}
}
