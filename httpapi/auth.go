package httpapi

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
)

// tokens is a set of bearer tokens compared in constant time.
type tokens [][]byte

// has reports whether presented is one of the tokens. Every token is
// compared, whatever matches, so the time taken says nothing about which
// token (or how much of one) was right.
func (ts tokens) has(presented []byte) bool {
	found := 0
	for _, t := range ts {
		found |= subtle.ConstantTimeCompare(t, presented)
	}
	return found == 1
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) ([]byte, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return nil, false
	}
	return []byte(strings.TrimSpace(h[len(prefix):])), true
}

// access says who may call a route.
type access int

const (
	// accessAPI: any API token, or an admin token, when API tokens are set.
	accessAPI access = iota
	// accessAdmin: an admin token when admin tokens are set; otherwise the
	// same as accessAPI.
	accessAdmin
)

// Tokens is the bearer tokens the API accepts: API tokens and admin
// tokens. Replace swaps them while the handler serves, so that a leaked
// token can be revoked by a reload; it is safe for concurrent use.
//
// Which routes need a token is decided when the handler is made, from
// whether each set is empty, so Replace keeps that: it refuses to empty a
// set that has tokens, or to fill one that has none.
type Tokens struct {
	sets atomic.Pointer[tokenSets]
}

type tokenSets struct {
	api, admin tokens
}

// NewTokens returns the token sets api and admin. Either may be empty.
func NewTokens(api, admin [][]byte) *Tokens {
	t := &Tokens{}
	t.sets.Store(&tokenSets{api: api, admin: admin})
	return t
}

// ErrTokenSetEmptiness is Replace's refusal to empty a token set or to
// fill an empty one.
var ErrTokenSetEmptiness = errors.New("httpapi: a reload may change tokens but not whether a set has any")

// Replace puts api and admin in use from the next request on.
func (t *Tokens) Replace(api, admin [][]byte) error {
	old := t.sets.Load()
	if (len(api) == 0) != (len(old.api) == 0) || (len(admin) == 0) != (len(old.admin) == 0) {
		return ErrTokenSetEmptiness
	}
	t.sets.Store(&tokenSets{api: api, admin: admin})
	return nil
}

// configured reports whether any token is required anywhere.
func (t *Tokens) configured() bool {
	s := t.sets.Load()
	return len(s.api) > 0 || len(s.admin) > 0
}

// authorize wraps a route with the token check its access needs.
func (h *handler) authorize(need access, next http.HandlerFunc) http.HandlerFunc {
	return authorize(h.tokens, need, next)
}

// authorize wraps next with the check of ts that access need requires.
// With no tokens configured every call is allowed. A refusal is a 401 JSON
// error and nothing runs.
func authorize(ts *Tokens, need access, next http.HandlerFunc) http.HandlerFunc {
	sets := ts.sets.Load()
	adminOnly := need == accessAdmin && len(sets.admin) > 0 // an API token is not enough
	if len(sets.api) == 0 && len(sets.admin) == 0 {
		return next
	}
	if len(sets.api) == 0 && need != accessAdmin {
		return next // API routes with only admin tokens configured stay open
	}
	return func(w http.ResponseWriter, r *http.Request) {
		sets := ts.sets.Load()
		tok, ok := bearer(r)
		// Both sets are always compared in full (no short-circuit), so the
		// time taken does not tell an admin token from an API token.
		isAdmin, isAPI := sets.admin.has(tok), sets.api.has(tok)
		if ok && (isAdmin || (isAPI && !adminOnly)) {
			next(w, r)
			return
		}
		message := "a valid bearer token is required (Authorization: Bearer <token>)"
		if adminOnly {
			message = "an admin bearer token is required for this operation"
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="limiter"`)
		writeError(w, &apiError{status: http.StatusUnauthorized, code: codeUnauthorized, message: message, transaction: -1})
	}
}
