package httpapi_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/source/memory"
)

// FuzzHandler sends arbitrary bodies to every decision endpoint: the
// answer is always 200 or a 4xx with the JSON error shape, never a 5xx,
// and the process never panics.
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
	} {
		for _, path := range []uint8{0, 1, 2, 3} {
			f.Add(path, seed)
		}
	}
	l, _ := newLimiter(f, memory.New(10_000))
	h := httpapi.New(httpapi.Options{Limiter: l})
	paths := []string{"/v1/spend", "/v1/check", "/v1/refund", "/v1/reset"}
	f.Fuzz(func(t *testing.T, path uint8, body string) {
		req := httptest.NewRequest("POST", paths[int(path)%len(paths)], strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case rec.Code == 200:
			if !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("200 with invalid JSON: %q", rec.Body)
			}
		case rec.Code >= 400 && rec.Code < 500:
			var e wire.ErrorResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("%d without the JSON error shape: %q", rec.Code, rec.Body)
			}
		default:
			t.Fatalf("status %d for body %q: %s", rec.Code, body, rec.Body)
		}
	})
}
