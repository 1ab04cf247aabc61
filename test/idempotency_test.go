package test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/internal/redistest"
)

// idempotentSpend posts body to /v1/spend with an Idempotency-Key (none
// when key is empty); it never fails the test, so it can run while Redis
// is paused.
func idempotentSpend(p *limiterProc, key, body string) (status int, code string, replayed bool, raw []byte) {
	req := mustRequestBody(p.t, "POST", p.URL+"/v1/spend", body)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error(), false, nil
	}
	defer resp.Body.Close()
	raw, _ = io.ReadAll(resp.Body)
	if m := regexp.MustCompile(`"code":"([a-z_]+)"`).FindSubmatch(raw); m != nil {
		code = string(m[1])
	}
	return resp.StatusCode, code, resp.Header.Get("Idempotent-Replayed") == "true", raw
}

// remainingOf reads a bucket over HTTP.
func remainingOf(p *limiterProc, limit, id string) int64 {
	p.t.Helper()
	r := p.do("GET", "/v1/limits/"+limit+"/"+id, "")
	var d wire.DecisionResponse
	if r.Status != 200 || json.Unmarshal(r.Body, &d) != nil {
		p.t.Fatalf("GET %s/%s: %d %s", limit, id, r.Status, r.Body)
	}
	return d.Remaining
}

// With Redis paused, a spend times out after it was sent, and Redis may
// still apply it once it resumes: the 503 says the outcome is unknown. A
// retry with the same Idempotency-Key after Redis is back is answered
// exactly: the spend happened once, whether the first try was applied or
// not. On one Redis and on a cluster.
func TestIdempotentRetryAcrossARedisPause(t *testing.T) {
	for _, b := range []struct {
		name  string
		start func(t *testing.T) (url string, servers []*redistest.Server)
	}{
		{"Standalone", func(t *testing.T) (string, []*redistest.Server) {
			s := redistest.NewStandalone(t)
			return s.URL(), []*redistest.Server{s}
		}},
		{"Cluster", func(t *testing.T) (string, []*redistest.Server) {
			c := redistest.NewCluster(t)
			return c.URL(), c.Servers
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			url, servers := b.start(t)
			dir := t.TempDir()
			p := startLimiter(t, procOptions{Env: map[string]string{
				"LIMITER_DEFAULTS":  writeFile(t, dir, "defaults.yaml", "PauseTest:\n  enum: 320\n  id: string\n  burst: 100\n  count: 100\n  period: 1h\n"),
				"LIMITER_OVERRIDES": dir + "/none.yaml",
				"LIMITER_SOURCE":    url,
			}, Args: []string{"--source-timeout=100ms"}})
			// Connections and the script are warm before the pause.
			for _, id := range []string{"nokey", "withkey"} {
				if s, _, _, raw := idempotentSpend(p, "", `{"limit":"PauseTest","id":"`+id+`","cost":0}`); s != 200 {
					t.Fatalf("warm-up: %d %s", s, raw)
				}
			}
			withKey := `{"limit":"PauseTest","id":"withkey"}`
			for _, s := range servers {
				s.Pause(t)
			}
			var codes []string
			for range 3 {
				status, code, _, _ := idempotentSpend(p, "", `{"limit":"PauseTest","id":"nokey"}`)
				if status != 503 {
					t.Errorf("spend while Redis is paused: %d, want 503", status)
				}
				codes = append(codes, code)
			}
			status, code, _, raw := idempotentSpend(p, "pause-retry-1", withKey)
			for _, s := range servers {
				s.Resume(t)
			}
			if status != 503 || code != "source_outcome_unknown" {
				t.Fatalf("keyed spend while Redis is paused: %d %s, want 503 source_outcome_unknown", status, raw)
			}
			for _, c := range codes {
				if c != "source_outcome_unknown" && c != "source_unavailable" {
					t.Errorf("a spend while paused answered code %q", c)
				}
			}
			// The sent calls run once Redis reads them: the spends without a
			// key land or not, and a source_unavailable one must not land.
			var applied int64
			pollUntil(t, 3*time.Second, "Redis answers again", func() bool {
				s, _, _, _ := idempotentSpend(p, "", `{"limit":"PauseTest","id":"probe","cost":0}`)
				return s == 200
			})
			applied = 100 - remainingOf(p, "PauseTest", "nokey")
			unknown := int64(0)
			for _, c := range codes {
				if c == "source_outcome_unknown" {
					unknown++
				}
			}
			if applied > unknown {
				t.Errorf("%d of 3 unkeyed spends were applied, but only %d answered that they might have been (%v)", applied, unknown, codes)
			}
			t.Logf("%s: %d of 3 spends sent while Redis was paused were applied (%v)", b.name, applied, codes)

			// The retry: exactly one token spent, however the first try ended.
			for i := range 3 {
				status, code, replayed, raw := idempotentSpend(p, "pause-retry-1", withKey)
				if status != 200 {
					t.Fatalf("retry %d: %d %s %s", i, status, code, raw)
				}
				if i > 0 && !replayed {
					t.Errorf("retry %d was decided again, want replayed", i)
				}
			}
			if r := remainingOf(p, "PauseTest", "withkey"); r != 99 {
				t.Fatalf("after a spend that timed out and three retries: %d remaining, want 99 (spent once)", r)
			}
			if status, code, _, _ := idempotentSpend(p, "pause-retry-1", `{"limit":"PauseTest","id":"other"}`); status != 422 || code != "idempotency_key_reused" {
				t.Errorf("the key with another body: %d %s, want 422 idempotency_key_reused", status, code)
			}
		})
	}
}

// A Redis that refuses connections answered nothing: the 503 says so, and
// that a retry is safe.
func TestRefusedConnectionIsNotApplied(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := startLimiter(t, procOptions{Env: map[string]string{"LIMITER_SOURCE": "redis://" + addr}})
	for _, path := range []string{"/v1/spend", "/v1/refund", "/v1/check", "/v1/reset"} {
		req := mustRequestBody(t, "POST", p.URL+path, `{"limit":"LoginAttemptsPerUser","id":"alice"}`)
		req.Header.Set("Idempotency-Key", "k-"+path)
		r := p.send(req)
		if r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), `"code":"source_unavailable"`) {
			t.Errorf("%s with Redis refusing connections: %d %s, want 503 source_unavailable", path, r.Status, r.Body)
		}
	}
}
