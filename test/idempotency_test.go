package test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	apiclient "github.com/limiter-dev/limiter/client"
	"github.com/limiter-dev/limiter/internal/redistest"
)

// idempotentSpend spends txn with an Idempotency-Key (none when key is
// empty), once; it never fails the test, so it can run while Redis is
// paused. A call that got no answer is status 0 with its error as code.
func idempotentSpend(p *limiterProc, key string, txn apiclient.Transaction) (status int, code string, replayed bool, answer string) {
	opt := apiclient.WithoutIdempotencyKey()
	if key != "" {
		opt = apiclient.WithIdempotencyKey(key)
	}
	d, err := p.api().Spend(context.Background(), txn, opt)
	var e *apiclient.Error
	switch {
	case err == nil:
		return http.StatusOK, "", d.Replayed, fmt.Sprintf("%+v", *d)
	case errors.As(err, &e):
		return e.StatusCode, e.Code, false, err.Error()
	}
	return 0, err.Error(), false, ""
}

// remainingOf reads a bucket over HTTP.
func remainingOf(p *limiterProc, limit, id string) int64 {
	p.t.Helper()
	d, err := p.api().Subscriber(context.Background(), limit, id)
	if err != nil {
		p.t.Fatalf("GET %s/%s: %v", limit, id, err)
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
				"LIMITER_OVERRIDES": writeFile(t, dir, "none.yaml", "[]\n"),
				"LIMITER_SOURCE":    url,
			}, Args: []string{"--source-timeout=100ms"}})
			// Connections and the script are warm before the pause.
			for _, id := range []string{"nokey", "withkey"} {
				if s, _, _, raw := idempotentSpend(p, "", apiclient.Transaction{Limit: "PauseTest", ID: id}.WithCost(0)); s != 200 {
					t.Fatalf("warm-up: %d %s", s, raw)
				}
			}
			withKey := apiclient.Transaction{Limit: "PauseTest", ID: "withkey"}
			for _, s := range servers {
				s.Pause(t)
			}
			var codes []string
			for range 3 {
				status, code, _, _ := idempotentSpend(p, "", apiclient.Transaction{Limit: "PauseTest", ID: "nokey"})
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
				s, _, _, _ := idempotentSpend(p, "", apiclient.Transaction{Limit: "PauseTest", ID: "probe"}.WithCost(0))
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
			if status, code, _, _ := idempotentSpend(p, "pause-retry-1", apiclient.Transaction{Limit: "PauseTest", ID: "other"}); status != 422 || code != "idempotency_key_reused" {
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
	c, ctx := p.api(), context.Background()
	alice := apiclient.Transaction{Limit: "LoginAttemptsPerUser", ID: "alice"}
	for _, call := range []struct {
		path string
		do   func() error
	}{
		{"/v1/spend", func() error { _, err := c.Spend(ctx, alice, apiclient.WithIdempotencyKey("k-spend")); return err }},
		{"/v1/refund", func() error { _, err := c.Refund(ctx, alice, apiclient.WithIdempotencyKey("k-refund")); return err }},
		{"/v1/check", func() error { _, err := c.Check(ctx, alice); return err }},
		{"/v1/reset", func() error { _, err := c.Reset(ctx, alice); return err }},
	} {
		err := call.do()
		var e *apiclient.Error
		if !errors.As(err, &e) || e.StatusCode != http.StatusServiceUnavailable || e.Code != "source_unavailable" {
			t.Errorf("%s with Redis refusing connections: %v, want 503 source_unavailable", call.path, err)
		}
	}
}
