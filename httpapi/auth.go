package httpapi

import (
	"crypto/subtle"
	"net/http"
	"strings"
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

// authorize wraps a /v1/ handler with the token check its access needs.
// With no token files configured every call is allowed, as before tokens
// existed. A refusal is a 401 JSON error and nothing runs.
func (h *handler) authorize(need access, next http.HandlerFunc) http.HandlerFunc {
	allowed := h.apiTokens
	if need == accessAdmin && len(h.adminTokens) > 0 {
		allowed = nil // an API token is not enough
	}
	if len(allowed) == 0 && len(h.adminTokens) == 0 {
		return next
	}
	required := len(allowed) > 0 || need == accessAdmin
	if !required {
		return next // API routes with only admin tokens configured stay open
	}
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r)
		// Both sets are always compared in full (no short-circuit), so the
		// time taken does not tell an admin token from an API token.
		isAdmin, isAllowed := h.adminTokens.has(tok), allowed.has(tok)
		if ok && (isAdmin || isAllowed) {
			next(w, r)
			return
		}
		message := "a valid bearer token is required (Authorization: Bearer <token>)"
		if need == accessAdmin && len(h.adminTokens) > 0 {
			message = "an admin bearer token is required for this operation"
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="limiter"`)
		writeError(w, &apiError{status: http.StatusUnauthorized, code: codeUnauthorized, message: message, transaction: -1})
	}
}
