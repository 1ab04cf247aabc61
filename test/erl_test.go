package test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
		"LIMITER_OVERRIDES": dir + "/none.yaml",
		"LIMITER_SOURCE":    url,
		"LIMITER_FAKECLOCK": fakeClockStart,
	}
	if url == "memory" {
		return startRedisShared(t, n, env)
	}
	return startRedisShared(t, n, env, redisPatientArgs...)
}

// getJSON GETs path on p and decodes a 200's body into v.
func getJSON(t *testing.T, p *limiterProc, path string, v any) {
	t.Helper()
	r := p.do("GET", path, "")
	if r.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("GET %s: %s: %v", path, r.Body, err)
	}
}

// checkRateHits is the check_rate body of one hit of entry on Hits,
// limited to 10 per second over 60s.
func checkRateHits(entry string) string {
	return fmt.Sprintf(`{"entry":%q,"ratecounter":"Hits","delta":1,"window":60,"limit":10,"penaltybox":"Hits","ttl":"5m"}`, entry)
}

// Three processes on one Redis (or a 3-master cluster), 48 clients, 600
// concurrent check_rate hits on one entry with a limit of 10 per second
// over 60s: every hit is counted exactly once (the answers' rates are
// 1/60 to 600/60, each once), nobody is boxed, and the counter reads 600.
// The 601st hit boxes the entry, and every process sees it in the box.
func TestRedisCheckRateExactOverHTTP(t *testing.T) {
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
				status, body, _, err := redisPost(p.URL+"/v1/erl/check_rate", checkRateHits(entry))
				var a wire.CheckRateResponse
				if err != nil || status != 200 || json.Unmarshal(body, &a) != nil {
					errs <- fmt.Sprintf("check_rate: %d %s %v", status, body, err)
					return
				}
				if a.Penalized || a.PenaltyExpiresInMS != 0 {
					errs <- fmt.Sprintf("hit %s boxed the entry", body)
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
		var rc wire.RateCounterResponse
		getJSON(t, p, "/v1/erl/ratecounters/Hits/"+entry, &rc)
		if rc.Buckets.S60 != total || rc.Rates.S60 != 10 || rc.Rates.S1 != total || rc.Entry != entry {
			t.Errorf("process %d reads %+v; want 600 hits in the last second", i, rc)
		}
		var has wire.BoxHasResponse
		getJSON(t, p, "/v1/erl/penaltyboxes/Hits/"+entry, &has)
		if has.Has {
			t.Errorf("process %d: the entry is boxed after 600 hits", i)
		}
	}
	r := procs[0].post("/v1/erl/check_rate", checkRateHits(entry))
	var a wire.CheckRateResponse
	if err := json.Unmarshal(r.Body, &a); err != nil || r.Status != 200 || !a.Penalized || a.Rate != 601.0/60 || a.PenaltyExpiresInMS != 5*60_000 {
		t.Fatalf("the 601st hit: %d %s; want penalized for 5m", r.Status, r.Body)
	}
	for i, p := range procs {
		var has wire.BoxHasResponse
		getJSON(t, p, "/v1/erl/penaltyboxes/Hits/"+entry, &has)
		if !has.Has || has.PenaltyExpiresInMS != 5*60_000 {
			t.Errorf("process %d: has %+v after the 601st hit; want boxed for 5m", i, has)
		}
	}
}

// A GCRA limit of 100 with a penalty, hammered by three processes with 48
// clients each: exactly 100 spends are allowed, every denial answers
// penalized, and while the id is boxed nothing is allowed on any process,
// even once the bucket has refilled some; when the box expires the id
// spends again.
func TestRedisPenaltyLockoutOverHTTP(t *testing.T) {
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
	const body = `{"limit":"Lockout","id":"mallory"}`
	const perProc, each = 48, 3
	var mu sync.Mutex
	allowed, denied := 0, 0
	errs := make(chan string, perProc*len(procs))
	var wg sync.WaitGroup
	for _, p := range procs {
		for range perProc {
			wg.Go(func() {
				for range each {
					status, b, _, err := redisPost(p.URL+"/v1/spend", body)
					var a wire.BatchResponse
					if err != nil || status != 200 || json.Unmarshal(b, &a) != nil || len(a.Decisions) != 1 || a.Decisions[0].Penalized == nil {
						errs <- fmt.Sprintf("spend: %d %s %v", status, b, err)
						return
					}
					pen := *a.Decisions[0].Penalized
					mu.Lock()
					if a.Allowed {
						allowed++
					} else {
						denied++
					}
					mu.Unlock()
					if a.Allowed == pen || (!a.Allowed && a.RetryInMS != 10*60_000) {
						errs <- fmt.Sprintf("an answer neither allowed nor boxed for 10m: %s", b)
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
		r := p.post("/v1/spend", body)
		var a wire.BatchResponse
		if err := json.Unmarshal(r.Body, &a); err != nil || a.Allowed || *a.Decisions[0].Penalized != true || a.RetryInMS != 5*60_000 {
			t.Errorf("process %d, 5m on: %s; want boxed for 5m more", i, r.Body)
		}
		var has wire.BoxHasResponse
		getJSON(t, p, "/v1/erl/penaltyboxes/Lockout/mallory", &has)
		if !has.Has || has.PenaltyExpiresInMS != 5*60_000 {
			t.Errorf("process %d: has %+v", i, has)
		}
	}
	for _, p := range procs {
		if err := p.advance(5 * time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	r := procs[1].post("/v1/spend", body)
	var a wire.BatchResponse
	if err := json.Unmarshal(r.Body, &a); err != nil || !a.Allowed || *a.Decisions[0].Penalized {
		t.Errorf("once the box expired: %s; want allowed", r.Body)
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
			var rc wire.RateCounterResponse
			getJSON(t, p, "/v1/erl/ratecounters/Hits/192.0.2.99", &rc)
			if rc.Buckets != (wire.RateBuckets{}) || rc.Rates != (wire.Rates{}) {
				t.Errorf("counted after the refusals: %+v", rc)
			}
			var has wire.BoxHasResponse
			getJSON(t, p, "/v1/erl/penaltyboxes/Hits/192.0.2.99", &has)
			if has.Has {
				t.Errorf("boxed after the refusals: %+v", has)
			}
			// A valid call is counted, so the checks above can fail.
			if r := p.post("/v1/erl/check_rate", checkRateBad()); r.Status != 200 {
				t.Fatalf("a valid check_rate: %d %s", r.Status, r.Body)
			}
			getJSON(t, p, "/v1/erl/ratecounters/Hits/192.0.2.99", &rc)
			if rc.Buckets.S60 != 5 {
				t.Errorf("after a valid check_rate: %+v", rc)
			}
		})
	}
}
