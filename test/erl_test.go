package test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiclient "github.com/limiter-dev/limiter/client"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/internal/vectors"
)

// algorithmsVectorsConfig is vectorsConfig for the whole algorithms file:
// windows, penalties, rate counters and ERL calls, on one clock from the
// file's start.
func algorithmsVectorsConfig(t *testing.T) (*vectors.File, map[string]string) {
	t.Helper()
	return configOf(t, vectors.Algorithms)
}

// Every algorithms vector through the binary on the memory source.
func TestAlgorithmsVectorsOverHTTPMemory(t *testing.T) {
	f, env := algorithmsVectorsConfig(t)
	p := startLimiter(t, procOptions{Env: env})
	runVectorsOverHTTP(t, f, p)
}

// Every algorithms vector through three processes sharing one Redis (or
// the cluster), round-robin, in both key formats: rate counters, boxes
// and ERL calls kept in Redis, on the fake clock.
func TestRedisAlgorithmsVectorsOverHTTP(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	runRedisVectorsOverHTTP(t, algorithmsVectorsConfig)
}

// erlDefaults declares the limits of the ERL load tests: a rate counter
// of ip entries (Hits), a GCRA limit of 100 an hour that boxes for 10m
// (Lockout), and one without a box (Plain).
const erlDefaults = `
Hits:
  enum: 340
  id: ip
  algorithm: rate-counter
  window: 60s
  rate: 10
  penalty: 5m
Lockout:
  enum: 341
  id: string
  burst: 100
  count: 100
  period: 1h
  penalty: 10m
Plain:
  enum: 342
  id: string
  burst: 5
  count: 5
  period: 1s
`

// startERLProcs starts n processes on url (memory, or a Redis source)
// with erlDefaults, on the fake clock.
func startERLProcs(t *testing.T, n int, url string) []*limiterProc {
	t.Helper()
	dir := t.TempDir()
	env := map[string]string{
		"LIMITER_DEFAULTS":  writeFile(t, dir, "defaults.yaml", erlDefaults),
		"LIMITER_OVERRIDES": writeFile(t, dir, "none.yaml", "[]\n"),
		"LIMITER_SOURCE":    url,
		"LIMITER_FAKECLOCK": fakeClockStart,
	}
	if url == "memory" {
		return startRedisShared(t, n, env)
	}
	return startRedisShared(t, n, env, redisPatientArgs...)
}

// rateCounter reads entry's counter of the rate counter counter on p.
func rateCounter(t *testing.T, p *limiterProc, counter, entry string) *apiclient.RateCounterReading {
	t.Helper()
	rc, err := p.api().RateCounter(context.Background(), counter, entry)
	if err != nil {
		t.Fatalf("GET /v1/erl/ratecounters/%s/%s: %v", counter, entry, err)
	}
	return rc
}

// boxHas reads whether entry is in box's penalty box on p, and for how
// long more.
func boxHas(t *testing.T, p *limiterProc, box, entry string) (bool, time.Duration) {
	t.Helper()
	has, in, err := p.api().PenaltyBoxHas(context.Background(), box, entry)
	if err != nil {
		t.Fatalf("GET /v1/erl/penaltyboxes/%s/%s: %v", box, entry, err)
	}
	return has, in
}

// checkRateHit is one check_rate hit of entry on Hits, limited to 10 per
// second over 60s, boxing for 5m.
func checkRateHit(p *limiterProc, entry string) (apiclient.RateResult, error) {
	return p.api().CheckRate(context.Background(), entry, apiclient.RateCheck{RateCounter: "Hits", Delta: 1, Window: 60, Limit: 10}, "Hits", 5*time.Minute)
}

// Three processes on one Redis (or a 3-master cluster), 48 clients, 600
// concurrent check_rate hits on one entry with a limit of 10 per second
// over 60s: every hit is counted exactly once (the answers' rates are
// 1/60 to 600/60, each once), nobody is boxed, and the counter reads 600.
// The 601st hit boxes the entry, and every process sees it in the box.
func TestRedisCheckRateExactOverHTTP(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	for _, b := range redisBackends {
		t.Run(b.name, func(t *testing.T) {
			url, _ := b.start(t)
			checkRateExact(t, startERLProcs(t, 3, url))
		})
	}
}

// checkRateExact is TestRedisCheckRateExactOverHTTP on procs, which share
// one source.
func checkRateExact(t *testing.T, procs []*limiterProc) {
	const entry, clients, total = "198.51.100.7", 48, 600
	rates := make(chan float64, total)
	errs := make(chan string, total)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			p := procs[c%len(procs)]
			for i := c; i < total; i += clients {
				a, err := checkRateHit(p, entry)
				if err != nil {
					errs <- fmt.Sprintf("check_rate: %v", err)
					return
				}
				if a.Penalized || a.PenaltyExpiresIn != 0 {
					errs <- fmt.Sprintf("hit %+v boxed the entry", a)
				}
				rates <- a.Rate
			}
		})
	}
	wg.Wait()
	close(errs)
	close(rates)
	for e := range errs {
		t.Fatal(e)
	}
	var got []float64
	for r := range rates {
		got = append(got, r)
	}
	slices.Sort(got)
	for i, r := range got {
		if want := float64(i+1) / 60; r != want {
			t.Fatalf("the %d-th smallest rate is %v, want %v: a hit was lost or counted twice", i+1, r, want)
		}
	}
	if len(got) != total {
		t.Fatalf("%d answers, want %d", len(got), total)
	}
	for i, p := range procs {
		rc := rateCounter(t, p, "Hits", entry)
		if rc.Buckets[5] != total || rc.Rate60s != 10 || rc.Rate1s != total || rc.Entry != entry {
			t.Errorf("process %d reads %+v; want 600 hits in the last second", i, rc)
		}
		if has, _ := boxHas(t, p, "Hits", entry); has {
			t.Errorf("process %d: the entry is boxed after 600 hits", i)
		}
	}
	a, err := checkRateHit(procs[0], entry)
	if err != nil || !a.Penalized || a.Rate != 601.0/60 || a.PenaltyExpiresIn != 5*time.Minute {
		t.Fatalf("the 601st hit: %+v %v; want penalized for 5m", a, err)
	}
	for i, p := range procs {
		if has, in := boxHas(t, p, "Hits", entry); !has || in != 5*time.Minute {
			t.Errorf("process %d: has %v for %v after the 601st hit; want boxed for 5m", i, has, in)
		}
	}
}

// A GCRA limit of 100 with a penalty, hammered by three processes with 48
// clients each: exactly 100 spends are allowed, every denial answers
// penalized, and while the id is boxed nothing is allowed on any process,
// even once the bucket has refilled some; when the box expires the id
// spends again.
func TestRedisPenaltyLockoutOverHTTP(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	for _, b := range redisBackends {
		t.Run(b.name, func(t *testing.T) {
			url, _ := b.start(t)
			penaltyLockout(t, startERLProcs(t, 3, url))
		})
	}
}

// penaltyLockout is TestRedisPenaltyLockoutOverHTTP on procs, which share
// one source.
func penaltyLockout(t *testing.T, procs []*limiterProc) {
	mallory := apiclient.Transaction{Limit: "Lockout", ID: "mallory"}
	ctx := context.Background()
	const perProc, each = 48, 3
	var mu sync.Mutex
	allowed, denied := 0, 0
	errs := make(chan string, perProc*len(procs))
	var wg sync.WaitGroup
	for _, p := range procs {
		for range perProc {
			wg.Go(func() {
				for range each {
					a, err := p.api().Spend(ctx, mallory)
					if err != nil || len(a.Decisions) != 1 || !a.Decisions[0].HasPenaltyBox {
						errs <- fmt.Sprintf("spend: %+v %v", a, err)
						return
					}
					pen := a.Decisions[0].Penalized
					mu.Lock()
					if a.Allowed {
						allowed++
					} else {
						denied++
					}
					mu.Unlock()
					if a.Allowed == pen || (!a.Allowed && a.RetryIn != 10*time.Minute) {
						errs <- fmt.Sprintf("an answer neither allowed nor boxed for 10m: %+v", a)
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if allowed != 100 || denied != perProc*len(procs)*each-100 {
		t.Fatalf("allowed %d, denied %d; want exactly 100", allowed, denied)
	}
	// 5 minutes on: the bucket has 8 tokens back, but the id is boxed.
	for _, p := range procs {
		if err := p.advance(5 * time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range procs {
		a, err := p.api().Spend(ctx, mallory)
		if err != nil || a.Allowed || !a.Decisions[0].HasPenaltyBox || !a.Decisions[0].Penalized || a.RetryIn != 5*time.Minute {
			t.Errorf("process %d, 5m on: %+v %v; want boxed for 5m more", i, a, err)
		}
		if has, in := boxHas(t, p, "Lockout", "mallory"); !has || in != 5*time.Minute {
			t.Errorf("process %d: has %v for %v", i, has, in)
		}
	}
	for _, p := range procs {
		if err := p.advance(5 * time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	a, err := procs[1].api().Spend(ctx, mallory)
	if err != nil || !a.Allowed || !a.Decisions[0].HasPenaltyBox || a.Decisions[0].Penalized {
		t.Errorf("once the box expired: %+v %v; want allowed", a, err)
	}
}

// erlBadRequests are refused with 400 and a code, on every backend; each
// would count hits or box 192.0.2.99 if it were taken.
var erlBadRequests = []struct {
	method, path, body, code string
}{
	{"POST", "/v1/erl/check_rate", checkRateBad(`"192.0.2.99"`, `"`+strings.Repeat("9", 300)+`"`), "invalid_id"},
	{"POST", "/v1/erl/check_rate", checkRateBad(`"window":60`, `"window":30`), "invalid_argument"},
	{"POST", "/v1/erl/check_rate", checkRateBad(`"window":60`, `"window":"60s"`), "invalid_argument"},
	{"POST", "/v1/erl/check_rate", checkRateBad(`"limit":10`, `"limit":9`), "invalid_argument"},
	{"POST", "/v1/erl/check_rate", checkRateBad(`"limit":10`, `"limit":70000001`), "invalid_argument"},
	{"POST", "/v1/erl/check_rate", checkRateBad(`"delta":5`, `"delta":100001`), "invalid_argument"},
	{"POST", "/v1/erl/check_rate", checkRateBad(`"delta":5`, `"delta":-1`), "invalid_argument"},
	{"POST", "/v1/erl/check_rate", checkRateBad(`"ttl":"5m"`, `"ttl":"59s"`), "invalid_argument"},
	{"POST", "/v1/erl/check_rate", checkRateBad(`"ttl":"5m"`, `"ttl":"2h"`), "invalid_argument"},
	{"POST", "/v1/erl/check_rate", checkRateBad(`"ratecounter":"Hits"`, `"ratecounter":"Nope"`), "unknown_limit"},
	{"POST", "/v1/erl/check_rate", checkRateBad(`"ratecounter":"Hits"`, `"ratecounter":"Plain"`), "invalid_argument"},
	{"POST", "/v1/erl/check_rate", checkRateBad(`"penaltybox":"Hits"`, `"penaltybox":"Plain"`), "invalid_argument"},
	{"POST", "/v1/erl/check_rate", checkRateBad(`"penaltybox":"Hits"`, `"penaltybox":"Nope"`), "unknown_limit"},
	{"POST", "/v1/erl/check_rate", checkRateBad(`"delta":5`, `"delta":5,"extra":true`), "unknown_field"},
	{"POST", "/v1/erl/check_rates", `{"entry":"192.0.2.99","penaltybox":"Hits","ttl":"5m","checks":[{"ratecounter":"Hits","delta":5,"window":60,"limit":10}]}`, "invalid_argument"},
	{"POST", "/v1/erl/check_rates", `{"entry":"192.0.2.99","penaltybox":"Hits","ttl":"5m","checks":[{"ratecounter":"Hits","delta":5,"window":60,"limit":10},{"ratecounter":"Hits","delta":5,"window":1,"limit":10}]}`, "invalid_argument"},
	{"POST", "/v1/erl/ratecounters/Hits/increment", `{"entry":"192.0.2.99","delta":1001}`, "invalid_argument"},
	{"POST", "/v1/erl/ratecounters/Nope/increment", `{"entry":"192.0.2.99","delta":5}`, "unknown_limit"},
	{"POST", "/v1/erl/ratecounters/Plain/increment", `{"entry":"192.0.2.99","delta":5}`, "invalid_argument"},
	{"POST", "/v1/erl/penaltyboxes/Hits/add", `{"entry":"192.0.2.99","ttl":"61m"}`, "invalid_argument"},
	{"POST", "/v1/erl/penaltyboxes/Plain/add", `{"entry":"192.0.2.99","ttl":"5m"}`, "invalid_argument"},
	{"POST", "/v1/erl/penaltyboxes/Nope/add", `{"entry":"192.0.2.99","ttl":"5m"}`, "unknown_limit"},
	{"POST", "/v1/erl/penaltyboxes/Hits/add", `{"entry":"` + strings.Repeat("a", 257) + `","ttl":"5m"}`, "invalid_id"},
	{"GET", "/v1/erl/ratecounters/Hits/" + strings.Repeat("1", 257), "", "invalid_id"},
	{"GET", "/v1/erl/penaltyboxes/Plain/192.0.2.99", "", "invalid_argument"},
	{"POST", "/v1/spend", `{"limit":"Hits","id":"192.0.2.99","cost":100001}`, "invalid_cost"},
}

// checkRateBad is a valid check_rate body of 5 hits on 192.0.2.99 with
// the replacements made.
func checkRateBad(pairs ...string) string {
	return strings.NewReplacer(pairs...).Replace(`{"entry":"192.0.2.99","ratecounter":"Hits","delta":5,"window":60,"limit":10,"penaltybox":"Hits","ttl":"5m"}`)
}

// Bad input to the ERL endpoints, through the binary on each backend:
// 400 with its code, and nothing counted or boxed, as a lookup and a has
// show afterwards.
func TestERLBadInputOverHTTP(t *testing.T) {
	t.Parallel() // its own limiter and redis-server: independent of every other test
	backends := append([]redisBackend{{"Memory", func(*testing.T) (string, func()) { return "memory", func() {} }}}, redisBackends...)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			url, _ := b.start(t)
			procs := startERLProcs(t, 1, url)
			p := procs[0]
			for _, c := range erlBadRequests {
				r := p.do(c.method, c.path, c.body)
				var e wire.ErrorResponse
				if err := json.Unmarshal(r.Body, &e); err != nil || r.Status != 400 || e.Error.Code != c.code || e.Error.Message == "" {
					t.Errorf("%s %s %.100s: %d %s; want 400 %s", c.method, c.path, c.body, r.Status, r.Body, c.code)
				}
			}
			rc := rateCounter(t, p, "Hits", "192.0.2.99")
			if rc.Buckets != ([6]int64{}) || rc.Rate1s != 0 || rc.Rate10s != 0 || rc.Rate60s != 0 {
				t.Errorf("counted after the refusals: %+v", rc)
			}
			if has, in := boxHas(t, p, "Hits", "192.0.2.99"); has {
				t.Errorf("boxed after the refusals: for %v", in)
			}
			// A valid call (checkRateBad with nothing replaced) is counted,
			// so the checks above can fail.
			if r := p.post("/v1/erl/check_rate", checkRateBad()); r.Status != 200 {
				t.Fatalf("a valid check_rate: %d %s", r.Status, r.Body)
			}
			if rc := rateCounter(t, p, "Hits", "192.0.2.99"); rc.Buckets[5] != 5 {
				t.Errorf("after a valid check_rate: %+v", rc)
			}
		})
	}
}
