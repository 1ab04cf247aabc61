// Command bare is the benchmark's ceiling: a plain net/http server that
// decodes the same spend request and encodes a response of the same shape
// as limiter's, with encoding/json, and decides nothing. Whatever limiter
// costs beyond it is the price of rate limiting.
//
// With -redis it also makes one Redis round trip per request, an INCR of a
// key named after the request's id with go-redis's default client: the
// least any service that keeps its counters in Redis must do, one command
// per request (a counter that never resets: a cost, not a working
// limiter). It is the ceiling for the limiter's Redis source, which adds
// exact GCRA in a script and atomic batches on top.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"net"
	"net/http"
	"os"

	goredis "github.com/redis/go-redis/v9"
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

// server answers spends, counting them in Redis when rdb is set.
type server struct {
	rdb *goredis.Client
}

func (s *server) spend(w http.ResponseWriter, r *http.Request) {
	var req request
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, `{"error":{"code":"malformed_json"}}`, http.StatusBadRequest)
		return
	}
	remaining := int64(99)
	if s.rdb != nil {
		n, err := s.rdb.Incr(r.Context(), "bare:"+req.Limit+":"+req.ID).Result()
		if err != nil {
			http.Error(w, `{"error":{"code":"unavailable"}}`, http.StatusServiceUnavailable)
			return
		}
		remaining = max(100-n, 0)
	}
	d := decision{Limit: req.Limit, ID: req.ID, Allowed: true, Remaining: remaining, ResetInMS: 10, Burst: 100, Count: 100, Period: "1s"}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(response{Allowed: true, Remaining: remaining, ResetInMS: 10, Decisions: []decision{d}})
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	redisAddr := flag.String("redis", "", "also INCR a Redis key per request, on this host:port")
	flag.Parse()
	var s server
	if *redisAddr != "" {
		s.rdb = goredis.NewClient(&goredis.Options{Addr: *redisAddr})
		if err := s.rdb.Ping(context.Background()).Err(); err != nil {
			log.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	// The harness reads the bound address from this line.
	log.SetOutput(os.Stderr)
	log.Printf("msg=listening addr=%s", ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/spend", s.spend)
	log.Fatal(http.Serve(ln, mux))
}
