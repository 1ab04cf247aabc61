package forwardauth_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/limiter-dev/limiter/forwardauth"
)

// Every spelling of an id source the rules file accepts, with what it
// reads: header names take their canonical form (so that header:x-api-key
// and header:X-API-KEY read the same header), cookie names and constants
// are kept as written, and a constant may hold anything after the first
// colon, colons included.
func TestParseSourceForms(t *testing.T) {
	tests := []struct {
		in   string
		want forwardauth.Source
	}{
		{"client_ip", forwardauth.Source{Kind: forwardauth.ClientIP}},
		{"method", forwardauth.Source{Kind: forwardauth.Method}},
		{"path", forwardauth.Source{Kind: forwardauth.Path}},
		{"host", forwardauth.Source{Kind: forwardauth.Host}},
		{"header:X-Api-Key", forwardauth.Source{Kind: forwardauth.Header, Arg: "X-Api-Key"}},
		{"header:x-api-key", forwardauth.Source{Kind: forwardauth.Header, Arg: "X-Api-Key"}},
		{"header:X-API-KEY", forwardauth.Source{Kind: forwardauth.Header, Arg: "X-Api-Key"}},
		{"header:authorization", forwardauth.Source{Kind: forwardauth.Header, Arg: "Authorization"}},
		// Canonical as net/http files a received header: only the letters
		// after a '-' (and the first) upper-case.
		{"header:X_Odd~Name!", forwardauth.Source{Kind: forwardauth.Header, Arg: "X_odd~name!"}},
		{"cookie:session", forwardauth.Source{Kind: forwardauth.Cookie, Arg: "session"}},
		{"cookie:Session_ID", forwardauth.Source{Kind: forwardauth.Cookie, Arg: "Session_ID"}},
		{"const:global", forwardauth.Source{Kind: forwardauth.Const, Arg: "global"}},
		{"const:a:b", forwardauth.Source{Kind: forwardauth.Const, Arg: "a:b"}},
		{"const:2001:db8::/48", forwardauth.Source{Kind: forwardauth.Const, Arg: "2001:db8::/48"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := forwardauth.ParseSource(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("ParseSource(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
			// What String writes reads back as the same source.
			again, err := forwardauth.ParseSource(got.String())
			if err != nil || again != got {
				t.Errorf("ParseSource(%q) = %+v, %v; want it to read back as %+v", got.String(), again, err, got)
			}
		})
	}
}

// Everything else is refused with ErrInvalidSource and a message that
// quotes what was written: names that are not HTTP tokens, empty names
// and constants, unknown prefixes and other spellings of the plain
// sources (which are case-sensitive, as the rest of the file is).
func TestParseSourceRefusals(t *testing.T) {
	tests := []struct {
		in   string
		hint string // a part of the message
	}{
		{"", "want client_ip"},
		{"ip", "want client_ip"},
		{"CLIENT_IP", "want client_ip"},
		{"Client_IP", "want client_ip"},
		{"client-ip", "want client_ip"},
		{"client_ip:x", "want client_ip"},
		{"query:id", "want client_ip"},
		{"Header:X-Api-Key", "want client_ip"},
		{"headers:X-Api-Key", "want client_ip"},
		{"header", "want client_ip"},
		{"header:", "a header name is a non-empty HTTP token"},
		{"header:X Api Key", "a header name is a non-empty HTTP token"},
		{"header:X-Api-Key:", "a header name is a non-empty HTTP token"},
		{"header:X-Api-Key ", "a header name is a non-empty HTTP token"},
		{"header:Kéy", "a header name is a non-empty HTTP token"},
		{"header:(x)", "a header name is a non-empty HTTP token"},
		{"cookie:", "a cookie name is a non-empty HTTP token"},
		{"cookie:a=b", "a cookie name is a non-empty HTTP token"},
		{"cookie:a;b", "a cookie name is a non-empty HTTP token"},
		{"cookie:\"s\"", "a cookie name is a non-empty HTTP token"},
		{"const:", "const needs a value"},
		{"const", "want client_ip"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := forwardauth.ParseSource(tt.in)
			if !errors.Is(err, forwardauth.ErrInvalidSource) {
				t.Fatalf("ParseSource(%q) = %+v, %v; want ErrInvalidSource", tt.in, got, err)
			}
			if got != (forwardauth.Source{}) {
				t.Errorf("ParseSource(%q) returned %+v with its error; want the zero Source", tt.in, got)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.hint) || !strings.Contains(msg, strconv.Quote(tt.in)) {
				t.Errorf("message %q; want it to quote %q and say %q", msg, tt.in, tt.hint)
			}
		})
	}
}

// A Source that ParseSource never makes still prints, rather than
// passing for one of the real ones.
func TestSourceStringOfUnknownKind(t *testing.T) {
	for _, k := range []forwardauth.SourceKind{0, forwardauth.Const + 1} {
		if got := (forwardauth.Source{Kind: k, Arg: "x"}).String(); !strings.HasPrefix(got, "Source(") {
			t.Errorf("Source{Kind: %d}.String() = %q; want Source(%d)", k, got, k)
		}
	}
}

// The three missing actions, as the rules file spells them, read and
// print back; anything else, other cases included, is refused.
func TestParseMissing(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want forwardauth.Missing
	}{
		{"deny", forwardauth.MissingDeny},
		{"allow", forwardauth.MissingAllow},
		{"client_ip", forwardauth.MissingClientIP},
	} {
		got, ok := forwardauth.ParseMissing(tt.in)
		if !ok || got != tt.want {
			t.Errorf("ParseMissing(%q) = %v, %v; want %v", tt.in, got, ok, tt.want)
		}
		if got.String() != tt.in {
			t.Errorf("%v.String() = %q; want %q", got, got.String(), tt.in)
		}
	}
	if forwardauth.MissingDeny != 0 {
		t.Error("the zero Missing is not deny: a rule built without one would let requests through")
	}
	for _, bad := range []string{"", "Deny", "ALLOW", "skip", "client-ip", "ip", "null"} {
		if got, ok := forwardauth.ParseMissing(bad); ok {
			t.Errorf("ParseMissing(%q) = %v, true; want it refused", bad, got)
		}
	}
	if got := forwardauth.Missing(7).String(); got != "Missing(7)" {
		t.Errorf("Missing(7).String() = %q", got)
	}
}
