package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/bearer"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/internal/vectors"
	"github.com/limiter-dev/limiter/ratelimits"
)

// erlConfig declares, in code: two rate counters of ip entries (PerIP:
// 10 per second over 10s, boxing for 2m; Burst: 20 per second over 1s),
// one of string entries (Names), a GCRA limit with a penalty of 15m
// (Lockout) and one without (Plain).
func erlConfig(t testing.TB) *ratelimits.Config {
	t.Helper()
	must := func(l ratelimits.Limit, err error) ratelimits.Limit {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	perIP := must(ratelimits.NewRateCounterLimit(10*time.Second, 10, 2*time.Minute))
	burst := must(ratelimits.NewRateCounterLimit(time.Second, 20, time.Minute))
	names := must(ratelimits.NewRateCounterLimit(time.Minute, 10, time.Minute))
	lockout := must(must(ratelimits.NewLimit(3, 3, time.Minute)).WithPenalty(15 * time.Minute))
	lockout.Capacity = 1000
	plain := must(ratelimits.NewLimit(5, 5, time.Second))
	cfg, err := ratelimits.NewConfig([]ratelimits.NameInfo{
		{Name: 130, Limit: "PerIP", Kind: ratelimits.KindIP},
		{Name: 131, Limit: "Burst", Kind: ratelimits.KindIP},
		{Name: 132, Limit: "Names", Kind: ratelimits.KindString},
		{Name: 133, Limit: "Lockout", Kind: ratelimits.KindString},
		{Name: 134, Limit: "Plain", Kind: ratelimits.KindString},
	}, map[string]ratelimits.Limit{"PerIP": perIP, "Burst": burst, "Names": names, "Lockout": lockout, "Plain": plain}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// newERLHandler serves erlConfig from src on a fake clock at start.
func newERLHandler(t testing.TB, src ratelimits.Source) http.Handler {
	t.Helper()
	clk := clock.NewFake()
	clk.Set(start)
	l, err := ratelimits.NewLimiter(erlConfig(t), src, clk)
	if err != nil {
		t.Fatal(err)
	}
	return httpapi.New(httpapi.Options{Limiter: l})
}

// newERLServer serves erlConfig from src on a fake clock at start, with
// /debug/clock, and tokens when given.
func newERLServer(t *testing.T, src ratelimits.Source, tokens *bearer.Tokens) *server {
	t.Helper()
	clk := clock.NewFake()
	clk.Set(start)
	l, err := ratelimits.NewLimiter(erlConfig(t), src, clk)
	if err != nil {
		t.Fatal(err)
	}
	if tokens == nil {
		tokens = bearer.NewTokens(nil, nil)
	}
	h := httpapi.WithDebugClock(httpapi.New(httpapi.Options{Limiter: l, Tokens: tokens}), clk, tokens)
	return &server{t: t, h: h, clock: clk}
}

// handlerDriver runs vector steps through a handler in this process.
type handlerDriver struct {
	h     http.Handler
	clock clock.FakeClock
}

func (d *handlerDriver) Advance(dur time.Duration) error {
	d.clock.Add(dur)
	return nil
}

func (d *handlerDriver) serve(method, path string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(string(body)))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	d.h.ServeHTTP(rec, req)
	return rec
}

func (d *handlerDriver) Do(op string, txns []vectors.Txn) (vectors.Result, error) {
	body, err := json.Marshal(map[string]any{"transactions": txns})
	if err != nil {
		return vectors.Result{}, err
	}
	rec := d.serve(http.MethodPost, "/v1/"+op, body)
	if rec.Code != 200 {
		if rec.Code >= 500 {
			return vectors.Result{}, fmt.Errorf("status %d: %s", rec.Code, rec.Body)
		}
		return vectors.Result{Status: rec.Code}, nil
	}
	var a wire.BatchResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		return vectors.Result{}, err
	}
	res := vectors.Result{Status: 200, Allowed: a.Allowed, Remaining: a.Remaining, RetryIn: a.RetryInMS, ResetIn: a.ResetInMS}
	for _, dd := range a.Decisions {
		res.Decisions = append(res.Decisions, vectors.ResultDecision{
			Limit: dd.Limit, ID: dd.ID, Allowed: dd.Allowed, Remaining: dd.Remaining, RetryIn: dd.RetryInMS, ResetIn: dd.ResetInMS,
			Algorithm: dd.Algorithm, HasPenalized: dd.Penalized != nil, Penalized: dd.Penalized != nil && *dd.Penalized,
		})
	}
	return res, nil
}

func (d *handlerDriver) ERL(step *vectors.ERLStep) (vectors.ERLResult, error) {
	method, path, body, err := step.HTTPRequest()
	if err != nil {
		return vectors.ERLResult{}, err
	}
	rec := d.serve(method, path, body)
	return vectors.ParseERLAnswer(rec.Code, rec.Body.Bytes())
}

// Every algorithms vector through the handler, on the model source:
// decisions to the millisecond with penalized exactly where a limit has a
// box, and every ERL call's answer.
func TestAlgorithmsVectorsOverHTTP(t *testing.T) {
	f, err := vectors.Algorithms()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	begin, err := f.StartTime(start)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(begin)
	l, err := ratelimits.NewLimiter(cfg, vectors.NewModelSource(), clk)
	if err != nil {
		t.Fatal(err)
	}
	vectors.Run(t, f, &handlerDriver{h: httpapi.New(httpapi.Options{Limiter: l}), clock: clk}, time.Millisecond)
}

// get sends a GET.
func (s *server) get(path string) *httptest.ResponseRecorder {
	return s.do(http.MethodGet, path, "", "")
}

// check_rate's answer: rate as a JSON number (hits / window, not rounded),
// penalized, and the time left in the box in whole milliseconds rounded
// up, 0 when not boxed. The entry is canonicalised: two spellings of one
// address are one entry, in a body and in a URL.
func TestCheckRateAnswer(t *testing.T) {
	s := newERLServer(t, vectors.NewModelSource(), nil)
	s.clock.Add(1500 * time.Millisecond) // the box expiry falls on a whole minute, not a whole ms from now
	body := func(entry string, delta int) string {
		return fmt.Sprintf(`{"entry":%q,"ratecounter":"PerIP","delta":%d,"window":10,"limit":10,"penaltybox":"PerIP","ttl":"2m"}`, entry, delta)
	}
	rec := s.post("/v1/erl/check_rate", body("2001:DB8::7", 97))
	if rec.Code != 200 || rec.Body.String() != `{"penalized":false,"rate":9.7,"penalty_expires_in_ms":0}`+"\n" {
		t.Fatalf("check_rate: %d %s", rec.Code, rec.Body)
	}
	rec = s.post("/v1/erl/check_rate", body("2001:db8::7", 4))
	got := decode[wire.CheckRateResponse](t, rec)
	// Boxed at 00:00:01.5 for 2m: out at the first whole minute at or after
	// 00:02:01.5, 00:03:00, 178.5s from now.
	if !got.Penalized || got.Rate != 10.1 || got.PenaltyExpiresInMS != 178500 {
		t.Fatalf("check_rate above the limit: %+v", got)
	}
	rec = s.get("/v1/erl/ratecounters/PerIP/2001:DB8:0::7")
	lookup := decode[wire.RateCounterResponse](t, rec)
	if lookup.Entry != "2001:db8::7" || lookup.Buckets.S10 != 101 || lookup.Rates.S10 != 10.1 || lookup.Rates.S1 != 101 {
		t.Errorf("lookup: %s", rec.Body)
	}
	rec = s.get("/v1/erl/penaltyboxes/PerIP/2001%3Adb8%3A%3A7")
	if has := decode[wire.BoxHasResponse](t, rec); !has.Has || has.PenaltyExpiresInMS != 178500 {
		t.Errorf("has: %s", rec.Body)
	}
	// A rate counter spent as a limit is the same counter and box.
	rec = s.post("/v1/spend", `{"limit":"PerIP","id":"2001:db8::7","cost":0}`)
	if d := decode[wire.BatchResponse](t, rec); d.Allowed || d.Decisions[0].Penalized == nil || !*d.Decisions[0].Penalized || d.RetryInMS != 178500 {
		t.Errorf("spend of a boxed entry: %s", rec.Body)
	}
}

// check_rates answers each check's rate and whether it went above, in
// request order; the entry is boxed once. A 1m TTL from a whole minute
// ends a minute later.
func TestCheckRatesAnswer(t *testing.T) {
	s := newERLServer(t, vectors.NewModelSource(), nil)
	rec := s.post("/v1/erl/check_rates", `{"entry":"192.0.2.1","penaltybox":"Burst","ttl":"1m","checks":[
		{"ratecounter":"Burst","delta":21,"window":1,"limit":20},{"ratecounter":"PerIP","delta":21,"window":60,"limit":10}]}`)
	want := `{"penalized":true,"rates":[21,0.35],"exceeded":[true,false],"penalty_expires_in_ms":60000}` + "\n"
	if rec.Code != 200 || rec.Body.String() != want {
		t.Fatalf("check_rates: %d %s, want %s", rec.Code, rec.Body, want)
	}
	if rec := s.get("/v1/erl/penaltyboxes/PerIP/192.0.2.1"); !strings.Contains(rec.Body.String(), `"has":false`) {
		t.Errorf("the other box: %s", rec.Body)
	}
}

// increment answers bucket.60s; add, has and remove work on any limit
// that has a box, the GCRA one with a penalty included.
func TestIncrementAndBoxCalls(t *testing.T) {
	s := newERLServer(t, vectors.NewModelSource(), nil)
	for i, want := range []string{`{"bucket_60s":7}`, `{"bucket_60s":1007}`, `{"bucket_60s":1007}`} {
		delta := []int{7, 1000, 0}[i]
		rec := s.post("/v1/erl/ratecounters/Names/increment", fmt.Sprintf(`{"entry":"alice","delta":%d}`, delta))
		if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != want {
			t.Fatalf("increment %d: %d %s, want %s", delta, rec.Code, rec.Body, want)
		}
	}
	// An entry named like a route's last segment is an entry in a GET.
	rec := s.get("/v1/erl/ratecounters/Names/increment")
	if got := decode[wire.RateCounterResponse](t, rec); got.Entry != "increment" || got.Buckets.S60 != 0 {
		t.Errorf("GET .../increment: %s", rec.Body)
	}
	rec = s.post("/v1/erl/penaltyboxes/Lockout/add", `{"entry":"bob","ttl":"1h"}`)
	if got := decode[wire.BoxAddResponse](t, rec); got.PenaltyExpiresInMS != 3600000 {
		t.Errorf("add: %s", rec.Body)
	}
	rec = s.post("/v1/spend", `{"limit":"Lockout","id":"bob"}`)
	if got := decode[wire.BatchResponse](t, rec); got.Allowed || got.RetryInMS != 3600000 || *got.Decisions[0].Penalized != true {
		t.Errorf("a spend of a boxed id: %s", rec.Body)
	}
	for i, want := range []string{`{"removed":true}`, `{"removed":false}`} {
		rec = s.post("/v1/erl/penaltyboxes/Lockout/remove", `{"entry":"bob"}`)
		if strings.TrimSpace(rec.Body.String()) != want {
			t.Errorf("remove %d: %s, want %s", i, rec.Body, want)
		}
	}
	rec = s.get("/v1/erl/penaltyboxes/Lockout/bob")
	if strings.TrimSpace(rec.Body.String()) != `{"has":false,"penalty_expires_in_ms":0}` {
		t.Errorf("has after remove: %s", rec.Body)
	}
	// A never-counted entry reads as zeros, a never-boxed one as not there.
	rec = s.get("/v1/erl/ratecounters/PerIP/198.51.100.1")
	want := `{"entry":"198.51.100.1","buckets":{"10s":0,"20s":0,"30s":0,"40s":0,"50s":0,"60s":0},"rates":{"1s":0,"10s":0,"60s":0}}` + "\n"
	if rec.Code != 200 || rec.Body.String() != want {
		t.Errorf("lookup of a new entry: %d %s", rec.Code, rec.Body)
	}
}

// erlBad is a request the API must refuse with status and code, whose
// message contains says.
type erlBad struct {
	method, path, body string
	status             int
	code, says         string
}

// checkRateBody is a valid check_rate body of 5 hits for 192.0.2.99 with
// the replacements made.
func checkRateBody(pairs ...string) string {
	return strings.NewReplacer(pairs...).Replace(`{"entry":"192.0.2.99","ratecounter":"PerIP","delta":5,"window":10,"limit":10,"penaltybox":"PerIP","ttl":"2m"}`)
}

func checkRatesBody(pairs ...string) string {
	return strings.NewReplacer(pairs...).Replace(`{"entry":"192.0.2.99","penaltybox":"PerIP","ttl":"2m","checks":[{"ratecounter":"PerIP","delta":5,"window":10,"limit":10},{"ratecounter":"Burst","delta":5,"window":1,"limit":10}]}`)
}

// Every bad input is a 400 (or 415) with a clear code, and changes
// nothing: each request below would add hits, or box the entry, if it
// were taken.
func TestERLBadInput(t *testing.T) {
	s := newERLServer(t, vectors.NewModelSource(), nil)
	long := strings.Repeat("a", 257)
	const cr, crs = "/v1/erl/check_rate", "/v1/erl/check_rates"
	const inc, add, remove = "/v1/erl/ratecounters/PerIP/increment", "/v1/erl/penaltyboxes/PerIP/add", "/v1/erl/penaltyboxes/PerIP/remove"
	for _, c := range []erlBad{
		{"POST", cr, checkRateBody(`"delta":5`, `"delta":5,"extra":1`), 400, "unknown_field", `"extra"`},
		{"POST", cr, checkRateBody(`"entry"`, `"ENTRY"`), 400, "unknown_field", `"ENTRY"`},
		{"POST", cr, checkRateBody(`"delta":5`, `"delta":5,"delta":5`), 400, "invalid_request", "twice"},
		{"POST", cr, checkRateBody(`}`, ``), 400, "malformed_json", "not valid JSON"},
		{"POST", cr, checkRateBody() + "{}", 400, "malformed_json", "after the JSON object"},
		{"POST", cr, `[]`, 400, "invalid_request", "object"},
		{"POST", cr, `null`, 400, "invalid_request", "null"},
		{"POST", cr, ``, 400, "malformed_json", "empty"},
		{"POST", cr, checkRateBody(`"ttl":"2m"`, `"ttl":null`), 400, "invalid_argument", "ttl"},
		{"POST", cr, checkRateBody(`"entry":"192.0.2.99"`, `"entry":null`), 400, "invalid_request", "entry"},
		{"POST", cr, checkRateBody(`,"ttl":"2m"`, ``), 400, "invalid_request", `"ttl" is required`},
		{"POST", cr, checkRateBody(`"delta":5,`, ``), 400, "invalid_request", `"delta" is required`},
		{"POST", cr, checkRateBody(`"window":10`, `"window":5`), 400, "invalid_argument", "window"},
		{"POST", cr, checkRateBody(`"window":10`, `"window":0`), 400, "invalid_argument", "window"},
		{"POST", cr, checkRateBody(`"window":10`, `"window":"10"`), 400, "invalid_argument", "window"},
		{"POST", cr, checkRateBody(`"window":10`, `"window":"10s"`), 400, "invalid_argument", "window"},
		{"POST", cr, checkRateBody(`"window":10`, `"window":10.5`), 400, "invalid_argument", "window"},
		{"POST", cr, checkRateBody(`"limit":10`, `"limit":9`), 400, "invalid_argument", "limit"},
		{"POST", cr, checkRateBody(`"limit":10`, `"limit":70000001`), 400, "invalid_argument", "limit"},
		{"POST", cr, checkRateBody(`"limit":10`, `"limit":1e30`), 400, "invalid_argument", "limit"},
		{"POST", cr, checkRateBody(`"delta":5`, `"delta":-1`), 400, "invalid_argument", "delta"},
		{"POST", cr, checkRateBody(`"delta":5`, `"delta":100001`), 400, "invalid_argument", "delta"},
		{"POST", cr, checkRateBody(`"delta":5`, `"delta":99999999999999999999`), 400, "invalid_argument", "delta"},
		{"POST", cr, checkRateBody(`"ttl":"2m"`, `"ttl":"59s"`), 400, "invalid_argument", "ttl"},
		{"POST", cr, checkRateBody(`"ttl":"2m"`, `"ttl":"61m"`), 400, "invalid_argument", "ttl"},
		{"POST", cr, checkRateBody(`"ttl":"2m"`, `"ttl":"120"`), 400, "invalid_argument", "ttl"},
		{"POST", cr, checkRateBody(`"ttl":"2m"`, `"ttl":120`), 400, "invalid_argument", "ttl"},
		{"POST", cr, checkRateBody(`"ratecounter":"PerIP"`, `"ratecounter":"Nope"`), 400, "unknown_limit", "Nope"},
		{"POST", cr, checkRateBody(`"ratecounter":"PerIP"`, `"ratecounter":"Plain"`), 400, "invalid_argument", "not a rate counter"},
		{"POST", cr, checkRateBody(`"penaltybox":"PerIP"`, `"penaltybox":"Plain"`), 400, "invalid_argument", "no penalty box"},
		{"POST", cr, checkRateBody(`"penaltybox":"PerIP"`, `"penaltybox":"Nope"`), 400, "unknown_limit", "Nope"},
		{"POST", cr, checkRateBody(`"192.0.2.99"`, `"not-an-ip"`), 400, "invalid_id", "invalid id"},
		{"POST", cr, checkRateBody(`"192.0.2.99"`, `"192.0.2.99`+long+`"`), 400, "invalid_id", "invalid id"},
		{"POST", crs, checkRatesBody(`,{"ratecounter":"Burst","delta":5,"window":1,"limit":10}`, ``), 400, "invalid_argument", "exactly two"},
		{"POST", crs, checkRatesBody(`{"ratecounter":"Burst","delta":5,"window":1,"limit":10}`,
			`{"ratecounter":"Burst","delta":5,"window":1,"limit":10},{"ratecounter":"Names","delta":5,"window":1,"limit":10}`), 400, "invalid_argument", "exactly two"},
		{"POST", crs, checkRatesBody(`"Burst"`, `"PerIP"`), 400, "invalid_argument", "same counter"},
		{"POST", crs, checkRatesBody(`"window":1,`, `"window":1,"x":2,`), 400, "unknown_field", `"x" in checks[1]`},
		{"POST", crs, checkRatesBody(`{"ratecounter":"Burst","delta":5,`, `{"ratecounter":"Burst",`), 400, "invalid_request", `"delta" in checks[1] is required`},
		{"POST", crs, checkRatesBody(`"window":1`, `"window":30`), 400, "invalid_argument", "window"},
		{"POST", crs, checkRatesBody(`"Burst"`, `"Lockout"`), 400, "invalid_argument", "not a rate counter"},
		{"POST", crs, checkRatesBody(`{"ratecounter":"Burst","delta":5,"window":1,"limit":10}`, `null`), 400, "invalid_request", "checks[1]"},
		{"POST", crs, `{"entry":"192.0.2.99","penaltybox":"PerIP","ttl":"2m","checks":null}`, 400, "invalid_request", "checks"},
		{"POST", crs, `{"entry":"192.0.2.99","penaltybox":"PerIP","ttl":"2m","checks":{}}`, 400, "invalid_request", "checks"},
		{"POST", inc, `{"entry":"192.0.2.99","delta":1001}`, 400, "invalid_argument", "delta"},
		{"POST", inc, `{"entry":"192.0.2.99"}`, 400, "invalid_request", `"delta" is required`},
		{"POST", inc, `{"entry":"192.0.2.99","delta":5,"ttl":"1m"}`, 400, "unknown_field", `"ttl"`},
		{"POST", "/v1/erl/ratecounters/Nope/increment", `{"entry":"192.0.2.99","delta":5}`, 400, "unknown_limit", "Nope"},
		{"POST", "/v1/erl/ratecounters/Lockout/increment", `{"entry":"192.0.2.99","delta":5}`, 400, "invalid_argument", "not a rate counter"},
		{"POST", inc, `{"entry":"` + long + `","delta":5}`, 400, "invalid_id", "invalid id"},
		{"POST", add, `{"entry":"192.0.2.99","ttl":"2h"}`, 400, "invalid_argument", "ttl"},
		{"POST", add, `{"entry":"192.0.2.99","ttl":"30s"}`, 400, "invalid_argument", "ttl"},
		{"POST", add, `{"entry":"192.0.2.99"}`, 400, "invalid_request", `"ttl" is required`},
		{"POST", "/v1/erl/penaltyboxes/Plain/add", `{"entry":"192.0.2.99","ttl":"2m"}`, 400, "invalid_argument", "no penalty box"},
		{"POST", "/v1/erl/penaltyboxes/Nope/add", `{"entry":"192.0.2.99","ttl":"2m"}`, 400, "unknown_limit", "Nope"},
		{"POST", add, `{"entry":"192.0.2.999","ttl":"2m"}`, 400, "invalid_id", "invalid id"},
		{"POST", remove, `{}`, 400, "invalid_request", `"entry" is required`},
		{"POST", remove, `{"entry":"x"}`, 400, "invalid_id", "invalid id"},
		{"POST", "/v1/erl/penaltyboxes/Plain/remove", `{"entry":"x"}`, 400, "invalid_argument", "no penalty box"},
		{"GET", "/v1/erl/ratecounters/PerIP/not-an-ip", "", 400, "invalid_id", "invalid id"},
		{"GET", "/v1/erl/ratecounters/PerIP/" + long, "", 400, "invalid_id", "invalid id"},
		{"GET", "/v1/erl/ratecounters/Plain/x", "", 400, "invalid_argument", "not a rate counter"},
		{"GET", "/v1/erl/ratecounters/Nope/x", "", 400, "unknown_limit", "Nope"},
		{"GET", "/v1/erl/penaltyboxes/Plain/x", "", 400, "invalid_argument", "no penalty box"},
		{"POST", cr, "{\"entry\":\"\xff\"}", 400, "malformed_json", "UTF-8"},
		{"POST", cr, `{"entry":"\ud800"}`, 400, "malformed_json", "surrogate"},
	} {
		rec := s.do(c.method, c.path, "application/json", c.body)
		e := decode[wire.ErrorResponse](t, rec)
		if rec.Code != c.status || e.Error.Code != c.code || !strings.Contains(e.Error.Message, c.says) || e.Error.Transaction != nil {
			t.Errorf("%s %s %.120s:\n  %d %+v\n  want %d %s saying %q", c.method, c.path, c.body, rec.Code, e.Error, c.status, c.code, c.says)
		}
	}
	// check_rate has one check and no checks array: its refusal names no
	// check; check_rates' names the one at fault.
	for _, c := range []struct{ path, body, says, not string }{
		{cr, checkRateBody(`"limit":10`, `"limit":9`), "invalid argument: limit must be", "check 0"},
		{crs, checkRatesBody(`"window":1,`, `"window":30,`), "check 1: invalid argument: window", ""},
	} {
		e := decode[wire.ErrorResponse](t, s.do("POST", c.path, "application/json", c.body))
		if !strings.HasPrefix(e.Error.Message, c.says) || (c.not != "" && strings.Contains(e.Error.Message, c.not)) {
			t.Errorf("%s: %q, want it to begin %q", c.path, e.Error.Message, c.says)
		}
	}
	// Other refusals: of the content type, of an Idempotency-Key on a
	// call that adds hits each time.
	if rec := s.do("POST", cr, "text/plain", checkRateBody()); rec.Code != 415 {
		t.Errorf("text/plain: %d %s", rec.Code, rec.Body)
	}
	for _, path := range []string{cr, crs, inc} {
		body := map[string]string{cr: checkRateBody(), crs: checkRatesBody(), inc: `{"entry":"192.0.2.99","delta":5}`}[path]
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Idempotency-Key", "k1")
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		if e := decode[wire.ErrorResponse](t, rec); rec.Code != 400 || e.Error.Code != "invalid_idempotency_key" {
			t.Errorf("%s with an Idempotency-Key: %d %s", path, rec.Code, rec.Body)
		}
	}
	// Nothing was counted or boxed.
	zero := `{"entry":"192.0.2.99","buckets":{"10s":0,"20s":0,"30s":0,"40s":0,"50s":0,"60s":0},"rates":{"1s":0,"10s":0,"60s":0}}` + "\n"
	for _, counter := range []string{"PerIP", "Burst"} {
		if rec := s.get("/v1/erl/ratecounters/" + counter + "/192.0.2.99"); rec.Body.String() != zero {
			t.Errorf("%s after the refusals: %s", counter, rec.Body)
		}
		if rec := s.get("/v1/erl/penaltyboxes/" + counter + "/192.0.2.99"); !strings.Contains(rec.Body.String(), `"has":false`) {
			t.Errorf("the %s box after the refusals: %s", counter, rec.Body)
		}
	}
	// The same requests made valid are taken, so the test can fail.
	if rec := s.post(cr, checkRateBody()); rec.Code != 200 {
		t.Fatalf("the valid check_rate: %d %s", rec.Code, rec.Body)
	}
	if rec := s.get("/v1/erl/ratecounters/PerIP/192.0.2.99"); !strings.Contains(rec.Body.String(), `"10s":5`) {
		t.Errorf("after a valid check_rate: %s", rec.Body)
	}
}

// remove takes an admin token when admin tokens are set, as reset does;
// every other ERL call an API token.
func TestERLTokens(t *testing.T) {
	s := newERLServer(t, vectors.NewModelSource(), bearer.NewTokens([][]byte{[]byte("api")}, [][]byte{[]byte("boss")}))
	for _, c := range []struct {
		method, path, body, token string
		want                      int
	}{
		{"POST", "/v1/erl/check_rate", checkRateBody(), "", 401},
		{"POST", "/v1/erl/check_rate", checkRateBody(), "api", 200},
		{"POST", "/v1/erl/check_rates", checkRatesBody(), "api", 200},
		{"POST", "/v1/erl/ratecounters/PerIP/increment", `{"entry":"192.0.2.1","delta":1}`, "api", 200},
		{"GET", "/v1/erl/ratecounters/PerIP/192.0.2.1", "", "", 401},
		{"GET", "/v1/erl/ratecounters/PerIP/192.0.2.1", "", "api", 200},
		{"POST", "/v1/erl/penaltyboxes/PerIP/add", `{"entry":"192.0.2.1","ttl":"1m"}`, "api", 200},
		{"GET", "/v1/erl/penaltyboxes/PerIP/192.0.2.1", "", "api", 200},
		{"POST", "/v1/erl/penaltyboxes/PerIP/remove", `{"entry":"192.0.2.1"}`, "api", 401},
		{"POST", "/v1/erl/penaltyboxes/PerIP/remove", `{"entry":"192.0.2.1"}`, "", 401},
		{"POST", "/v1/erl/penaltyboxes/PerIP/remove", `{"entry":"192.0.2.1"}`, "boss", 200},
	} {
		rec := call(s.h, c.method, c.path, c.token, c.body)
		if rec.Code != c.want {
			t.Errorf("%s %s with %q: %d %s, want %d", c.method, c.path, c.token, rec.Code, rec.Body, c.want)
		}
	}
}

// A source failure is a 503 and is counted; a call that writes nothing
// (a lookup, a has) says nothing changed.
func TestERLSourceFailure(t *testing.T) {
	for _, c := range []struct {
		source             failingSource
		method, path, body string
		code               string
	}{
		{failingSource{}, "POST", "/v1/erl/check_rate", checkRateBody(), "source_outcome_unknown"},
		{failingSource{}, "POST", "/v1/erl/check_rates", checkRatesBody(), "source_outcome_unknown"},
		{failingSource{}, "POST", "/v1/erl/ratecounters/PerIP/increment", `{"entry":"192.0.2.1","delta":1}`, "source_outcome_unknown"},
		{failingSource{}, "POST", "/v1/erl/penaltyboxes/PerIP/add", `{"entry":"192.0.2.1","ttl":"1m"}`, "source_outcome_unknown"},
		{failingSource{}, "POST", "/v1/erl/penaltyboxes/PerIP/remove", `{"entry":"192.0.2.1"}`, "source_outcome_unknown"},
		{failingSource{}, "GET", "/v1/erl/ratecounters/PerIP/192.0.2.1", "", "source_unavailable"},
		{failingSource{}, "GET", "/v1/erl/penaltyboxes/PerIP/192.0.2.1", "", "source_unavailable"},
		{failingSource{refused: true}, "POST", "/v1/erl/check_rate", checkRateBody(), "source_unavailable"},
	} {
		s := newERLServer(t, c.source, nil)
		rec := s.do(c.method, c.path, "application/json", c.body)
		if e := decode[wire.ErrorResponse](t, rec); rec.Code != 503 || e.Error.Code != c.code {
			t.Errorf("%s %s: %d %+v, want 503 %s", c.method, c.path, rec.Code, e.Error, c.code)
		}
		if m := s.get("/metrics").Body.String(); !strings.Contains(m, "limiter_source_errors_total 1") {
			t.Errorf("%s %s: the failure is not counted", c.method, c.path)
		}
	}
}

// The ERL routes answer 405 with what they serve, GETs answer HEAD, and
// their metrics carry route patterns, never a counter, box or entry.
func TestERLRoutes(t *testing.T) {
	s := newERLServer(t, vectors.NewModelSource(), nil)
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/v1/erl/check_rate", "POST"},
		{"PUT", "/v1/erl/check_rates", "POST"},
		{"POST", "/v1/erl/ratecounters/PerIP/192.0.2.1", "GET, HEAD"},
		{"DELETE", "/v1/erl/penaltyboxes/PerIP/192.0.2.1", "GET, HEAD"},
		{"PUT", "/v1/erl/penaltyboxes/PerIP/remove", "GET, HEAD, POST"},
	} {
		rec := s.do(c.method, c.path, "", "")
		if rec.Code != 405 || rec.Header().Get("Allow") != c.allow {
			t.Errorf("%s %s: %d Allow %q, want 405 %q", c.method, c.path, rec.Code, rec.Header().Get("Allow"), c.allow)
		}
	}
	if rec := s.do("HEAD", "/v1/erl/penaltyboxes/PerIP/192.0.2.7", "", ""); rec.Code != 200 {
		t.Errorf("HEAD of has: %d", rec.Code)
	}
	s.post("/v1/erl/check_rate", checkRateBody(`192.0.2.99`, `192.0.2.77`))
	s.post("/v1/erl/ratecounters/Names/increment", `{"entry":"secret-entry","delta":1}`)
	s.get("/v1/erl/ratecounters/Names/secret-entry")
	s.get("/v1/erl/penaltyboxes/Lockout/secret-entry")
	m := s.get("/metrics").Body.String()
	for _, route := range []string{`route="/v1/erl/check_rate"`, `route="/v1/erl/ratecounters/{ratecounter}/increment"`,
		`route="/v1/erl/ratecounters/{ratecounter}"`, `route="/v1/erl/penaltyboxes/{penaltybox}"`} {
		if !strings.Contains(m, route) {
			t.Errorf("/metrics lacks %s", route)
		}
	}
	for _, leak := range []string{"secret-entry", "192.0.2.77", "Names", "Lockout"} {
		if strings.Contains(m, leak) {
			t.Errorf("/metrics names %q", leak)
		}
	}
}

// Decisions of limits with a box carry penalized, others do not; a rate
// counter's policy header is its rate × window per window; its cost may go
// up to 100,000 whatever that is; and an Idempotency-Key is refused for a
// batch with a box, naming the transaction.
func TestERLDecisions(t *testing.T) {
	s := newERLServer(t, vectors.NewModelSource(), nil)
	rec := s.post("/v1/spend", `{"transactions":[{"limit":"PerIP","id":"192.0.2.5","cost":30},{"limit":"Plain","id":"a"},{"limit":"Lockout","id":"a"}]}`)
	var raw struct{ Decisions []map[string]json.RawMessage }
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil || len(raw.Decisions) != 3 {
		t.Fatalf("spend: %d %s", rec.Code, rec.Body)
	}
	for i, want := range []string{"false", "", "false"} {
		if got := string(raw.Decisions[i]["penalized"]); got != want {
			t.Errorf("decision %d: penalized %q, want %q", i, got, want)
		}
	}
	if got := rec.Header().Get("RateLimit-Policy"); got != `"Lockout";q=3;w=60` {
		t.Errorf("RateLimit-Policy %q of the deciding transaction", got)
	}
	rec2 := s.post("/v1/spend", `{"limit":"PerIP","id":"192.0.2.5","cost":5}`)
	for name, want := range map[string]string{"RateLimit-Policy": `"PerIP";q=100;w=10`, "RateLimit": `"PerIP";r=65;t=10`} {
		if got := rec2.Header().Get(name); got != want {
			t.Errorf("%s %q, want %q", name, got, want)
		}
	}
	if got := string(raw.Decisions[0]["algorithm"]) + string(raw.Decisions[0]["burst"]) + string(raw.Decisions[0]["period"]); got != `"rate-counter"100"10s"` {
		t.Errorf("the rate counter's decision: %s", rec.Body)
	}
	for _, c := range []struct {
		cost int
		want int
	}{{100000, 200}, {100001, 400}} {
		rec := s.post("/v1/check", fmt.Sprintf(`{"limit":"PerIP","id":"192.0.2.6","cost":%d}`, c.cost))
		if rec.Code != c.want {
			t.Errorf("check of cost %d: %d %s", c.cost, rec.Code, rec.Body)
		}
	}
	for _, path := range []string{"/v1/check", "/v1/refund"} {
		if body := s.post(path, `{"limit":"Lockout","id":"a"}`).Body.String(); !strings.Contains(body, `"penalized":false`) {
			t.Errorf("%s: %s", path, body)
		}
	}
	rec = s.get("/v1/limits/PerIP/192.0.2.5")
	if body := rec.Body.String(); !strings.Contains(body, `"penalized":false`) || !strings.Contains(body, `"sync_rate":0`) || !strings.Contains(body, `"remaining":65`) {
		t.Errorf("the subscriber view: %s", body)
	}
	req := httptest.NewRequest("POST", "/v1/spend", strings.NewReader(`{"transactions":[{"limit":"Plain","id":"k"},{"limit":"Lockout","id":"k"}]}`))
	req.Header.Set("Idempotency-Key", "k1")
	rec = httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	if e := decode[wire.ErrorResponse](t, rec); rec.Code != 400 || e.Error.Code != "invalid_idempotency_key" || e.Error.Transaction == nil || *e.Error.Transaction != 1 {
		t.Errorf("a keyed spend with a box: %d %s", rec.Code, rec.Body)
	}
}

// GET /v1/limits shows a rate counter's window, rate and penalty, a
// penalty on any other limit, and the capacity of every name with a box.
func TestERLLimitsListing(t *testing.T) {
	s := newERLServer(t, vectors.NewModelSource(), nil)
	var raw struct{ Limits []map[string]json.RawMessage }
	if err := json.Unmarshal(s.get("/v1/limits").Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string][4]string{ // algorithm, default, capacity, sync_rate
		"PerIP":   {`"rate-counter"`, `{"window":"10s","rate":10,"penalty":"2m0s"}`, "200000", "0"},
		"Burst":   {`"rate-counter"`, `{"window":"1s","rate":20,"penalty":"1m0s"}`, "200000", "0"},
		"Lockout": {`"gcra"`, `{"burst":3,"count":3,"period":"1m0s","penalty":"15m0s"}`, "1000", ""},
		"Plain":   {`"gcra"`, `{"burst":5,"count":5,"period":"1s"}`, "", ""},
	}
	seen := 0
	for _, l := range raw.Limits {
		var name string
		_ = json.Unmarshal(l["limit"], &name)
		w, ok := want[name]
		if !ok {
			continue
		}
		seen++
		got := [4]string{string(l["algorithm"]), string(l["default"]), string(l["capacity"]), string(l["sync_rate"])}
		if got != w {
			t.Errorf("%s: %v, want %v", name, got, w)
		}
	}
	if seen != len(want) {
		t.Errorf("%d of %d names listed", seen, len(want))
	}
}
