// Package bearer holds the bearer tokens the service's front ends accept,
// API tokens and admin tokens, and checks a presented token in constant
// time. The HTTP API and Envoy's rate-limit service share one set, so a
// reload that revokes a token revokes it everywhere.
package bearer

import (
	"crypto/subtle"
	"errors"
	"strings"
	"sync/atomic"
)

// Access says which token a call needs.
type Access int

const (
	// API: any API token, or an admin token, when API tokens are set;
	// nothing when only admin tokens are.
	API Access = iota
	// Admin: an admin token when admin tokens are set; otherwise the same
	// as API.
	Admin
)

// Tokens is the API tokens and admin tokens in use. Replace swaps them
// while the front ends serve, so that a leaked token can be revoked by a
// reload; it is safe for concurrent use.
//
// Which calls need a token follows from whether each set is empty, which
// front ends may decide once when they start, so Replace keeps that: it
// refuses to empty a set that has tokens, or to fill one that has none.
type Tokens struct {
	sets atomic.Pointer[sets]
}

type sets struct {
	api, admin set
}

// set is some tokens, compared in constant time.
type set [][]byte

// has reports whether presented is one of the tokens. Every token is
// compared, whatever matches, so the time taken says nothing about which
// token (or how much of one) was right.
func (s set) has(presented []byte) bool {
	found := 0
	for _, t := range s {
		found |= subtle.ConstantTimeCompare(t, presented)
	}
	return found == 1
}

// NewTokens returns the token sets api and admin. Either may be empty.
func NewTokens(api, admin [][]byte) *Tokens {
	t := &Tokens{}
	t.sets.Store(&sets{api: api, admin: admin})
	return t
}

// ErrSetEmptiness is Replace's refusal to empty a token set or to fill an
// empty one.
var ErrSetEmptiness = errors.New("bearer: a reload may change tokens but not whether a set has any")

// Replace puts api and admin in use from the next call on.
func (t *Tokens) Replace(api, admin [][]byte) error {
	old := t.sets.Load()
	if (len(api) == 0) != (len(old.api) == 0) || (len(admin) == 0) != (len(old.admin) == 0) {
		return ErrSetEmptiness
	}
	t.sets.Store(&sets{api: api, admin: admin})
	return nil
}

// Configured reports whether any token is required anywhere.
func (t *Tokens) Configured() bool {
	s := t.sets.Load()
	return len(s.api) > 0 || len(s.admin) > 0
}

// Required reports whether a call needing access must present a token.
func (t *Tokens) Required(need Access) bool {
	s := t.sets.Load()
	if need == Admin && len(s.admin) > 0 {
		return true
	}
	return len(s.api) > 0
}

// AdminOnly reports whether a call needing access takes an admin token
// alone: an API token is then not enough.
func (t *Tokens) AdminOnly(need Access) bool {
	return need == Admin && len(t.sets.Load().admin) > 0
}

// Allows reports whether presented gives access. Both sets are always
// compared in full (no short-circuit), so the time taken does not tell an
// admin token from an API token.
func (t *Tokens) Allows(need Access, presented []byte) bool {
	s := t.sets.Load()
	if !(need == Admin && len(s.admin) > 0) && len(s.api) == 0 {
		return true // no token is required
	}
	isAdmin, isAPI := s.admin.has(presented), s.api.has(presented)
	return isAdmin || (isAPI && !(need == Admin && len(s.admin) > 0))
}

// FromAuthorization returns the token of an "Authorization: Bearer
// <token>" value (the scheme in any case), or false.
func FromAuthorization(value string) ([]byte, bool) {
	const prefix = "Bearer "
	if len(value) <= len(prefix) || !strings.EqualFold(value[:len(prefix)], prefix) {
		return nil, false
	}
	tok := strings.TrimSpace(value[len(prefix):])
	if tok == "" {
		return nil, false
	}
	return []byte(tok), true
}
