// Package spendjson is the HTTP side the benchmark's reference servers
// share (bench/bare, and the peers in bench/peers): POST /v1/spend of one
// transaction decoded, and a response of the limiter's shape encoded, with
// encoding/json, around a decide function that is all they differ in.
package spendjson

import (
	"context"
	"encoding/json"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/limiter-dev/limiter/httpapi/wire"
)

// Decide answers one spend of the request's limit and id: whether it is
// allowed and what remains. An error is answered 503.
type Decide func(ctx context.Context, limit, id string) (allowed bool, remaining int64, err error)

// Handler decodes a spend request, asks decide, and encodes the answer,
// as a limit of 100 per second would be described.
func Handler(decide Decide) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req wire.TransactionRequest
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			http.Error(w, `{"error":{"code":"malformed_json"}}`, http.StatusBadRequest)
			return
		}
		allowed, remaining, err := decide(r.Context(), req.Limit, req.ID)
		if err != nil {
			http.Error(w, `{"error":{"code":"unavailable"}}`, http.StatusServiceUnavailable)
			return
		}
		d := wire.DecisionResponse{Limit: req.Limit, ID: req.ID, Allowed: allowed, Remaining: remaining, ResetInMS: 10, Burst: 100, Count: 100, Period: "1s"}
		w.Header().Set("Content-Type", "application/json")
		// Unescaped for HTML, as the limiter writes its answers, so
		// that both write the same bytes for the same answer.
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(wire.BatchResponse{Allowed: allowed, Remaining: remaining, ResetInMS: 10, Decisions: []wire.DecisionResponse{d}})
	}
}

// Serve listens on listen (port 0 picks one), logs the bound address in
// the line the harness reads ("msg=listening addr=…"), and serves
// POST /v1/spend with h until the process ends.
func Serve(listen string, h http.HandlerFunc) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		log.Fatal(err)
	}
	log.SetOutput(os.Stderr)
	log.Printf("msg=listening addr=%s", ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/spend", h)
	log.Fatal(http.Serve(ln, mux))
}
