package httpapi

import (
	"net/http"

	"github.com/limiter-dev/limiter/bearer"
)

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header.
func bearerToken(r *http.Request) ([]byte, bool) {
	return bearer.FromAuthorization(r.Header.Get("Authorization"))
}

// access says who may call a route.
type access = bearer.Access

const (
	// accessAPI: any API token, or an admin token, when API tokens are set.
	accessAPI = bearer.API
	// accessAdmin: an admin token when admin tokens are set; otherwise the
	// same as accessAPI.
	accessAdmin = bearer.Admin
)

// authorize wraps a route with the token check its access needs.
func (h *handler) authorize(need access, next http.HandlerFunc) http.HandlerFunc {
	return authorize(h.tokens, need, next)
}

// authorize wraps next with the check of ts that access need requires.
// With no tokens configured every call is allowed. A refusal is a 401 JSON
// error and nothing runs.
func authorize(ts *bearer.Tokens, need access, next http.HandlerFunc) http.HandlerFunc {
	if !ts.Required(need) {
		// Which sets are empty cannot change (bearer.Tokens.Replace).
		return next
	}
	adminOnly := ts.AdminOnly(need)
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearerToken(r)
		if ok && ts.Allows(need, tok) {
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
