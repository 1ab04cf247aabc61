// Command bare is the benchmark's ceiling: a plain net/http server that
// decodes the same spend request and encodes a response of the same shape
// as limiter's, with encoding/json, and decides nothing. Whatever limiter
// costs beyond it is the price of rate limiting.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net"
	"net/http"
	"os"
)

type request struct {
	Limit string `json:"limit"`
	ID    string `json:"id"`
	Cost  *int64 `json:"cost"`
	Mode  string `json:"mode"`
}

type decision struct {
	Limit     string `json:"limit"`
	ID        string `json:"id"`
	Allowed   bool   `json:"allowed"`
	Remaining int64  `json:"remaining"`
	RetryInMS int64  `json:"retry_in_ms"`
	ResetInMS int64  `json:"reset_in_ms"`
	Unlimited bool   `json:"unlimited"`
	Burst     int64  `json:"burst"`
	Count     int64  `json:"count"`
	Period    string `json:"period"`
	Override  bool   `json:"override"`
}

type response struct {
	Allowed   bool       `json:"allowed"`
	Remaining int64      `json:"remaining"`
	RetryInMS int64      `json:"retry_in_ms"`
	ResetInMS int64      `json:"reset_in_ms"`
	Decisions []decision `json:"decisions"`
}

func spend(w http.ResponseWriter, r *http.Request) {
	var req request
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, `{"error":{"code":"malformed_json"}}`, http.StatusBadRequest)
		return
	}
	d := decision{Limit: req.Limit, ID: req.ID, Allowed: true, Remaining: 99, ResetInMS: 10, Burst: 100, Count: 100, Period: "1s"}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(response{Allowed: true, Remaining: 99, ResetInMS: 10, Decisions: []decision{d}})
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	// The harness reads the bound address from this line.
	log.SetOutput(os.Stderr)
	log.Printf("msg=listening addr=%s", ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/spend", spend)
	log.Fatal(http.Serve(ln, mux))
}
