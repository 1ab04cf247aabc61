package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/internal/vectors"
	"github.com/limiter-dev/limiter/source/memory"
)

// fuzzRoute is a route FuzzHandler sends bodies to: a POST with the body,
// or a GET whose last path segment is the body (escaped).
type fuzzRoute struct {
	method, path string
	erl          bool // served by the handler of the ERL configuration
}

var fuzzRoutes = []fuzzRoute{
	{"POST", "/v1/spend", false}, {"POST", "/v1/check", false}, {"POST", "/v1/refund", false}, {"POST", "/v1/reset", false},
	{"POST", "/v1/erl/check_rate", true}, {"POST", "/v1/erl/check_rates", true},
	{"POST", "/v1/erl/ratecounters/PerIP/increment", true}, {"POST", "/v1/erl/ratecounters/Names/increment", true},
	{"POST", "/v1/erl/penaltyboxes/PerIP/add", true}, {"POST", "/v1/erl/penaltyboxes/Lockout/remove", true},
	{"GET", "/v1/erl/ratecounters/PerIP/", true}, {"GET", "/v1/erl/penaltyboxes/Lockout/", true},
	{"GET", "/v1/limits/Logins/", false},
}

// FuzzHandler sends arbitrary bodies to every decision endpoint and every
// ERL endpoint (and arbitrary entries to the ERL GETs): the answer is
// always 200 or a 4xx with the JSON error shape, never a 5xx, and the
// process never panics.
func FuzzHandler(f *testing.F) {
	for _, seed := range []string{
		`{"limit":"Logins","id":"a"}`,
		`{"limit":"Logins","id":"a","cost":2,"mode":"check-only"}`,
		`{"transactions":[{"limit":"Fast","id":"b","cost":0},{"limit":"Ranges","id":"2001:db8:abcd::/48","mode":"spend-only"}]}`,
		`{"transactions":[]}`, `{"limit":"Logins","id":"a","cost":1e3}`, `[]`, `null`, `{"limit":"Logins","id":"\u0000"}`,
		`{"limit":"Logins","id":"a"} {}`, `{"transactions":[{"limit":"Logins","id":"a"},{"limit":"Logins","id":"a"}]}`,
		`{"limit":"Logins","id":"\ud800"}`, `{"limit":"Logins","id":"\udc00x"}`, `{"limit":"Logins","id":"\ud83d\ude00"}`,
		`{"limit":"Logins","id":"a","cost":null}`, `{"limit":"Logins","id":"a","mode":null}`, `{"transactions":[null]}`,
		"{\"limit\":\"Logins\",\"id\":\"\xed\xa0\x80\"}",
		checkRateBody(), checkRateBody(`"delta":5`, `"delta":1e2`), checkRateBody(`"ttl":"2m"`, `"ttl":"-5m"`),
		checkRatesBody(), checkRatesBody(`"checks":[`, `"checks":[null,`), `{"entry":"192.0.2.1","delta":1000}`,
		`{"entry":"alice","delta":0}`, `{"entry":"192.0.2.1","ttl":"1h"}`, `{"entry":"bob"}`, `192.0.2.1`, `2001:DB8::/48`, `a/b%2Fc`,
	} {
		for i := range fuzzRoutes {
			f.Add(uint8(i), seed)
		}
	}
	l, _ := newLimiter(f, memory.New(10_000))
	h := httpapi.New(httpapi.Options{Limiter: l})
	erl := newERLHandler(f, vectors.NewModelSource())
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		target, reqBody := rt.path, body
		if rt.method == http.MethodGet {
			target, reqBody = rt.path+url.PathEscape(body), ""
		}
		req := httptest.NewRequest(rt.method, target, strings.NewReader(reqBody))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		if rt.erl {
			erl.ServeHTTP(rec, req)
		} else {
			h.ServeHTTP(rec, req)
		}
		switch {
		case rec.Code == 200:
			if rt.method != http.MethodHead && !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("200 with invalid JSON: %q", rec.Body)
			}
		case rec.Code >= 400 && rec.Code < 500:
			var e wire.ErrorResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("%d without the JSON error shape: %q", rec.Code, rec.Body)
			}
		default:
			t.Fatalf("status %d for %s %s %q: %s", rec.Code, rt.method, target, reqBody, rec.Body)
		}
	})
}
