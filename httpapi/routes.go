package httpapi

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

// Label values for requests that match no route, and for methods outside
// the standard set. Metrics and the access log use them instead of the
// client's text, so a client cannot make new series or long log lines.
const (
	routeUnmatched = "unmatched"
	methodOther    = "other"
)

// standardMethods are the methods of RFC 9110 plus PATCH: the only method
// label values besides methodOther, and the methods an Allow header can name.
func standardMethods() [9]string {
	return [...]string{
		http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodPatch, http.MethodOptions, http.MethodConnect, http.MethodTrace,
	}
}

// methodLabel is the method as metrics and logs show it: one of
// standardMethods, or methodOther for any other name a client sent.
func methodLabel(method string) string {
	for _, m := range standardMethods() {
		if method == m {
			return m
		}
	}
	return methodOther
}

// routeSet holds the patterns registered on the router, as route labels
// show them (without the trailing "/*" of a wildcard).
type routeSet map[string]struct{}

// registeredRoutes walks the router once its routes are all registered.
func registeredRoutes(routes chi.Routes) routeSet {
	set := routeSet{}
	_ = chi.Walk(routes, func(_ string, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		set[strings.TrimSuffix(pattern, "/*")] = struct{}{}
		return nil
	})
	return set
}

// label is the route label of a request: the registered pattern it
// matched, never the raw path (which would carry ids), or routeUnmatched.
// Only patterns in the set are returned, so whatever the router reports
// for a path it could not route, the label comes from a fixed list.
func (s routeSet) label(r *http.Request) string {
	rc := chi.RouteContext(r.Context())
	if rc == nil {
		return routeUnmatched
	}
	p := strings.TrimSuffix(rc.RoutePattern(), "/*")
	if _, ok := s[p]; ok {
		return p
	}
	return routeUnmatched
}

// routingPath is the path the router matched r on, as chi computes it.
func routingPath(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePath != "" {
		return rc.RoutePath
	}
	if r.URL.RawPath != "" {
		return r.URL.RawPath
	}
	if r.URL.Path == "" {
		return "/"
	}
	return r.URL.Path
}

// allowedMethods lists the standard methods routes serves on path, in
// standardMethods() order; none when no route has that path.
func allowedMethods(routes chi.Routes, path string) []string {
	var allowed []string
	for _, m := range standardMethods() {
		if routes.Match(chi.NewRouteContext(), m, path) {
			allowed = append(allowed, m)
		}
	}
	return allowed
}

// notFound answers a path no route has.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, &apiError{status: http.StatusNotFound, code: codeNotFound, message: cutMessage("no such path: " + r.URL.Path), transaction: -1})
}

// methodNotAllowed answers a path served by other methods with 405 and the
// Allow header RFC 9110 requires. The router also sends here every method
// it does not know, whatever the path: a path that no method serves is a
// 404, as it would be for a known method.
func methodNotAllowed(routes chi.Routes) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		allowed := allowedMethods(routes, routingPath(r))
		if len(allowed) == 0 {
			notFound(w, r)
			return
		}
		list := strings.Join(allowed, ", ")
		w.Header().Set("Allow", list)
		method := methodLabel(r.Method)
		if method == methodOther {
			method = "this method"
		}
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, code: codeMethod,
			message: method + " is not allowed on " + r.URL.Path + "; allowed: " + list, transaction: -1})
	}
}
