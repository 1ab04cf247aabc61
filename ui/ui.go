// Package ui is the operator's page, served at /ui/ by the binary: one
// HTML file with its CSS and script inline, embedded, so that it works
// offline and needs nothing but the service. The page reads only the API
// (limits, top denied ids, penalty boxes, a cost-0 check, the last
// reload, readiness) with the token the operator types, kept in the tab's
// sessionStorage and sent as a bearer header, never in a URL.
package ui

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"strconv"
)

//go:embed index.html
var page []byte

// Handler serves the page. Its Content-Security-Policy allows exactly the
// page's own inline style and script (by their SHA-256) and requests to
// the page's own origin, so that nothing a client put in an id or a
// message can run as script, even if a bug let it into the page's HTML.
func Handler() http.Handler {
	csp := "default-src 'none'; connect-src 'self'; img-src 'self'; " +
		"style-src " + inlineHash(page, "<style>", "</style>") + "; " +
		"script-src " + inlineHash(page, "<script>", "</script>") + "; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	length := strconv.Itoa(len(page))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Length", length)
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(page)
		}
	})
}

// inlineHash returns the CSP source of the text between the first open
// and the close after it: 'sha256-<base64>' as browsers hash an inline
// element's content.
func inlineHash(doc []byte, open, close string) string {
	i := bytes.Index(doc, []byte(open))
	j := bytes.Index(doc[i+len(open):], []byte(close))
	sum := sha256.Sum256(doc[i+len(open) : i+len(open)+j])
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}
