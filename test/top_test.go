package test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/internal/redistest"
)

// topAnswer is GET /v1/admin/top's body.
type topAnswer struct {
	Limit   string `json:"limit"`
	WindowS int    `json:"window_s"`
	IDs     []struct {
		Limit  string `json:"limit"`
		ID     string `json:"id"`
		Denied uint64 `json:"denied"`
		Error  uint64 `json:"error"`
	} `json:"ids"`
}

func topOf(t *testing.T, p *limiterProc, query string) topAnswer {
	t.Helper()
	r := p.do(http.MethodGet, "/v1/admin/top"+query, "")
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/admin/top%s: %d %s", query, r.Status, r.Body)
	}
	var a topAnswer
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// spendLogins spends n logins of id; LoginAttemptsPerUser allows 5.
func spendLogins(t *testing.T, p *limiterProc, id string, n int) {
	t.Helper()
	for range n {
		if r := p.post("/v1/spend", `{"limit":"LoginAttemptsPerUser","id":"`+id+`"}`); r.Status != 200 {
			t.Fatalf("spend: %d %s", r.Status, r.Body)
		}
	}
}

// Denials over HTTP show in the process's top list, by limit and window.
func TestTopDeniedOverHTTP(t *testing.T) {
	p := startLimiter(t, procOptions{Env: map[string]string{"LIMITER_FAKECLOCK": fakeClockStart}})
	spendLogins(t, p, "mallory", 9)
	spendLogins(t, p, "alice", 6)
	a := topOf(t, p, "?limit=LoginAttemptsPerUser&window=5m")
	if a.Limit != "LoginAttemptsPerUser" || a.WindowS != 300 || len(a.IDs) != 2 ||
		a.IDs[0].ID != "mallory" || a.IDs[0].Denied != 4 || a.IDs[1].ID != "alice" || a.IDs[1].Denied != 1 {
		t.Fatalf("top = %+v", a)
	}
	if err := p.advance(10 * time.Minute); err != nil {
		t.Fatal(err)
	}
	if a := topOf(t, p, "?window=5m"); len(a.IDs) != 0 {
		t.Fatalf("5m top 10 minutes on = %+v, want none", a)
	}
	if a := topOf(t, p, "?window=1h"); len(a.IDs) != 2 || a.IDs[0].Limit != "LoginAttemptsPerUser" {
		t.Fatalf("1h top 10 minutes on = %+v", a)
	}
	if r := p.do(http.MethodGet, "/v1/admin/top?window=2h", ""); r.Status != 400 {
		t.Fatalf("window=2h: %d %s", r.Status, r.Body)
	}
}

// Two processes on one Redis: each answers the fleet's list, its own
// denials counted now and the other's as of its last push (made when its
// clock passes --redis-top-push-interval).
func TestTopDeniedAcrossProcesses(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	url := redistest.NewStandalone(t).URL()
	env := map[string]string{"LIMITER_SOURCE": url, "LIMITER_FAKECLOCK": fakeClockStart}
	procs := startRedisShared(t, 2, env, append(redisPatientArgs, "--redis-top-push-interval=10s")...)
	a, b := procs[0], procs[1]
	spendLogins(t, a, "mallory", 7) // 2 denied in a
	spendLogins(t, b, "mallory", 3) // the bucket is shared: 3 more denied in b
	if err := b.advance(11 * time.Second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := topOf(t, a, "?limit=LoginAttemptsPerUser")
		if len(got.IDs) == 1 && got.IDs[0].Denied == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's top never showed b's push: %+v\n%s", got, b.logs())
		}
		time.Sleep(50 * time.Millisecond) // b pushes on its own goroutine once its clock moved
	}
}
