package forwardauth

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// SourceKind is where an id comes from.
type SourceKind int

// The id sources.
const (
	// ClientIP is the address of the client that sent the original
	// request: the peer itself, or what a trusted proxy says it is.
	ClientIP SourceKind = iota + 1
	// Header is one header of the forwarded request (Source.Arg names it).
	Header
	// Cookie is one cookie of the forwarded request (Source.Arg names it).
	Cookie
	// Method is the original request's method.
	Method
	// Path is the original request's path, without its query string.
	Path
	// Host is the original request's host, without a port.
	Host
	// Const is a fixed id (Source.Arg), one bucket shared by every request.
	Const
)

// Source is one id source of a rule, as the rules file spells it:
// "client_ip", "header:X-Api-Key", "cookie:session", "method", "path",
// "host" or "const:global".
type Source struct {
	Kind SourceKind
	// Arg is the header or cookie name, or the constant; empty otherwise.
	// A header name is kept in its canonical form (X-Api-Key).
	Arg string
}

// ErrInvalidSource wraps every reason ParseSource refuses a source.
var ErrInvalidSource = errors.New("invalid id source")

// sourceForms lists the spellings, for error messages.
const sourceForms = "client_ip, header:<Name>, cookie:<name>, method, path, host or const:<string>"

// ParseSource reads an id source as the rules file spells it.
func ParseSource(s string) (Source, error) {
	switch s {
	case "client_ip":
		return Source{Kind: ClientIP}, nil
	case "method":
		return Source{Kind: Method}, nil
	case "path":
		return Source{Kind: Path}, nil
	case "host":
		return Source{Kind: Host}, nil
	}
	prefix, arg, found := strings.Cut(s, ":")
	if !found {
		return Source{}, fmt.Errorf("%w %q: want %s", ErrInvalidSource, s, sourceForms)
	}
	switch prefix {
	case "header":
		if !isToken(arg) {
			return Source{}, fmt.Errorf("%w %q: a header name is a non-empty HTTP token (letters, digits and !#$%%&'*+-.^_`|~)", ErrInvalidSource, s)
		}
		return Source{Kind: Header, Arg: http.CanonicalHeaderKey(arg)}, nil
	case "cookie":
		if !isToken(arg) {
			return Source{}, fmt.Errorf("%w %q: a cookie name is a non-empty HTTP token (letters, digits and !#$%%&'*+-.^_`|~)", ErrInvalidSource, s)
		}
		return Source{Kind: Cookie, Arg: arg}, nil
	case "const":
		if arg == "" {
			return Source{}, fmt.Errorf("%w %q: const needs a value, as in const:global", ErrInvalidSource, s)
		}
		return Source{Kind: Const, Arg: arg}, nil
	}
	return Source{}, fmt.Errorf("%w %q: want %s", ErrInvalidSource, s, sourceForms)
}

// String spells the source as the rules file does.
func (s Source) String() string {
	switch s.Kind {
	case ClientIP:
		return "client_ip"
	case Header:
		return "header:" + s.Arg
	case Cookie:
		return "cookie:" + s.Arg
	case Method:
		return "method"
	case Path:
		return "path"
	case Host:
		return "host"
	case Const:
		return "const:" + s.Arg
	}
	return fmt.Sprintf("Source(%d)", int(s.Kind))
}

// isToken reports whether s is an RFC 9110 token: what header field names
// (and, by RFC 6265, cookie names) are made of.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
