package test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/httpapi/wire"
)

// forwardAuth calls /v1/forward-auth/{rule} as a proxy would, with the
// given headers ("Name: value" each; a Host header sets the request's
// host) and, when token is not empty, the limiter's API token.
func forwardAuth(t *testing.T, p *limiterProc, method, rule, token string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, p.URL+"/v1/forward-auth/"+rule, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			t.Fatalf("header %q: want Name: value", h)
		}
		value = strings.TrimSpace(value)
		if strings.EqualFold(name, "Host") {
			req.Host = value
			continue
		}
		req.Header.Add(name, value)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return sendRequest(t, req)
}

// sendRequest sends req and reads the whole answer.
func sendRequest(t *testing.T, req *http.Request) response {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// checkRemaining reads one bucket with a cost-0 check, which spends
// nothing, presenting token when it is not empty.
func checkRemaining(t *testing.T, p *limiterProc, token, limit, id string) int64 {
	t.Helper()
	body, err := json.Marshal(map[string]any{"limit": limit, "id": id, "cost": 0})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("POST", p.URL+"/v1/check", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	r := sendRequest(t, req)
	var a wire.BatchResponse
	if r.Status != 200 || json.Unmarshal(r.Body, &a) != nil || len(a.Decisions) != 1 {
		t.Fatalf("check %s %q: %d %s", limit, id, r.Status, r.Body)
	}
	return a.Decisions[0].Remaining
}

// advanceWithToken moves p's fake clock, presenting token when it is not
// empty (a limiter with tokens asks for one on /debug/clock too).
func advanceWithToken(t *testing.T, p *limiterProc, token string, d time.Duration) {
	t.Helper()
	req, err := http.NewRequest("POST", p.URL+"/debug/clock", strings.NewReader(fmt.Sprintf(`{"advance":%q}`, d.String())))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if r := sendRequest(t, req); r.Status != 200 {
		t.Fatalf("advance the clock: %d %s", r.Status, r.Body)
	}
}
