package main

import (
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// The answer headers of an allowed forward-auth call, as the limiter
// writes them for the harness's rule (one limit of a million a second):
// written as constants, since the reference decides nothing.
const (
	bareRateLimit       = `"BenchForwardAuth";r=999999;t=1`
	bareRateLimitPolicy = `"BenchForwardAuth";q=1000000;w=1`
)

// forwardAuthHandler answers GET and HEAD /v1/forward-auth/{rule} as the
// limiter answers an allowed call, with 403 (the harness rule's deny
// status) when the request lacks the id header, as the rule's missing:
// deny does: everything a forward-auth service must do on net/http
// except deciding, so that the limiter's rate over this one's, behind the
// same proxy, is the price of the decision and of the limiter's own
// handling.
func forwardAuthHandler(idHeader string) http.Handler {
	mux := http.NewServeMux()
	answer := func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(idHeader) == "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error":{"code":"missing_id"}}`))
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("RateLimit", bareRateLimit)
		h.Set("RateLimit-Policy", bareRateLimitPolicy)
		if r.Method == http.MethodHead {
			// No body to send, so none is written (nginx asks with HEAD).
			w.WriteHeader(http.StatusOK)
			return
		}
		_, _ = w.Write([]byte(`{"allowed":true}`))
	}
	mux.HandleFunc("GET /v1/forward-auth/{rule}", answer) // GET patterns match HEAD too
	return mux
}

// serveForwardAuth listens on listen (a host:port, or unix:PATH for a
// Unix socket), logs the bound address in the line the harness reads,
// and serves forward-auth calls until the process ends, with the
// limiter's server settings: the same timeouts and header limit, so that
// the per-request deadlines they cost net/http are paid by both.
func serveForwardAuth(listen, idHeader string) {
	network, addr := "tcp", listen
	if path, ok := strings.CutPrefix(listen, "unix:"); ok {
		network, addr = "unix", path
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		log.Fatal(err)
	}
	bound := ln.Addr().String()
	if network == "unix" {
		bound = "unix:" + bound
	}
	log.SetOutput(os.Stderr)
	log.Printf("msg=listening addr=%s", bound)
	srv := &http.Server{
		Handler:           forwardAuthHandler(idHeader),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	log.Fatal(srv.Serve(ln))
}
