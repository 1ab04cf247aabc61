// Package forwardauth turns a reverse proxy's question — may this request
// pass? — into a batch of transactions. nginx (auth_request), Traefik
// (ForwardAuth) and Caddy (forward_auth) send the limiter a request that
// describes the one they are holding; a named Rule says which limits count
// it and where each limit's subscriber id comes from (the client's address,
// a header, a cookie, the method, path or host, or a constant).
//
// The package is the rules and the reading of the forwarded request; it
// decides nothing and stores nothing. The configuration loader builds Rules
// from the rules file, and the HTTP API serves /v1/forward-auth/{rule} with
// them.
//
// What the proxy says about the original request (X-Forwarded-For,
// X-Forwarded-Method, X-Original-URI, ...) is believed only when the
// connection comes from one of the trusted proxies: anyone else could
// write those headers to pick the id they are counted under.
package forwardauth
