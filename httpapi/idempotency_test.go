package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

// withKey sends a POST with an Idempotency-Key (and a bearer token when
// token is set) to h.
func withKey(h http.Handler, path, key, token, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// A retried spend with the same key and body is answered with the first
// decision, byte for byte, and spends nothing; the same key with another
// body is refused; a spend without a key is not remembered.
func TestIdempotentSpend(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	body := `{"limit":"Logins","id":"alice","cost":2}`
	first := withKey(s.h, "/v1/spend", "order-7", "", body)
	if first.Code != 200 || first.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("first spend: %d %q %s", first.Code, first.Header().Get("Idempotent-Replayed"), first.Body)
	}
	s.clock.Add(10 * time.Second)
	again := withKey(s.h, "/v1/spend", "order-7", "", body)
	if again.Code != 200 || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != first.Body.String() {
		t.Fatalf("retry: %d replayed=%q\n%s\nwant the first answer\n%s", again.Code, again.Header().Get("Idempotent-Replayed"), again.Body, first.Body)
	}
	for _, h := range []string{"Ratelimit", "Ratelimit-Policy"} {
		if again.Header().Get(h) != first.Header().Get(h) {
			t.Errorf("retry's %s = %q, first's %q", h, again.Header().Get(h), first.Header().Get(h))
		}
	}
	// One token is left: the retry took none.
	if got := decode[wire.BatchResponse](t, s.post("/v1/check", `{"limit":"Logins","id":"alice"}`)); !got.Allowed || got.Remaining != 0 {
		t.Fatalf("a check of one token after the retry: %+v, want allowed with 0 left", got)
	}
	for _, other := range []string{
		`{"limit":"Logins","id":"alice","cost":1}`,
		`{"limit":"Logins","id":"bob","cost":2}`,
		`{"transactions":[{"limit":"Logins","id":"alice","cost":2},{"limit":"Logins","id":"bob"}]}`,
	} {
		rec := withKey(s.h, "/v1/spend", "order-7", "", other)
		if e := decode[wire.ErrorResponse](t, rec); rec.Code != 422 || e.Error.Code != "idempotency_key_reused" {
			t.Errorf("same key, body %s: %d %+v, want 422 idempotency_key_reused", other, rec.Code, e)
		}
		if rec := withKey(s.h, "/v1/refund", "order-7", "", other); rec.Code != 422 {
			t.Errorf("a spend's key on a refund: %d, want 422", rec.Code)
		}
	}
	if got := decode[wire.BatchResponse](t, s.post("/v1/check", `{"limit":"Logins","id":"bob","cost":3}`)); !got.Allowed {
		t.Fatalf("bob after refused reuses: %+v, want untouched", got)
	}
	// A refund with its own key gives back once, however often it is sent.
	s.post("/v1/spend", `{"limit":"Logins","id":"gina","cost":3}`)
	for range 3 {
		if rec := withKey(s.h, "/v1/refund", "refund-7", "", `{"limit":"Logins","id":"gina","cost":1}`); rec.Code != 200 {
			t.Fatalf("refund: %d %s", rec.Code, rec.Body)
		}
	}
	if got := decode[wire.BatchResponse](t, s.post("/v1/check", `{"limit":"Logins","id":"gina","cost":0}`)); got.Remaining != 1 {
		t.Fatalf("after one refund of 1 sent three times: %d left, want 1", got.Remaining)
	}
}

// A batch whose transactions are all unlimited is recorded like any
// other: its repeat is a replay, and its key refuses another body.
func TestIdempotentSpendOfNoBucket(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	body := `{"limit":"NewOrdersPerAccount","id":"42"}`
	first := withKey(s.h, "/v1/spend", "unlimited-1", "", body)
	if first.Code != 200 || first.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("first spend: %d %q %s", first.Code, first.Header().Get("Idempotent-Replayed"), first.Body)
	}
	again := withKey(s.h, "/v1/spend", "unlimited-1", "", body)
	if again.Code != 200 || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != first.Body.String() {
		t.Fatalf("retry: %d replayed=%q %s", again.Code, again.Header().Get("Idempotent-Replayed"), again.Body)
	}
	rec := withKey(s.h, "/v1/spend", "unlimited-1", "", `{"limit":"Logins","id":"alice"}`)
	if e := decode[wire.ErrorResponse](t, rec); rec.Code != 422 || e.Error.Code != "idempotency_key_reused" {
		t.Fatalf("the key of a batch of no bucket, another body: %d %+v, want 422 idempotency_key_reused", rec.Code, e)
	}
	if got := decode[wire.BatchResponse](t, s.post("/v1/check", `{"limit":"Logins","id":"alice","cost":3}`)); !got.Allowed {
		t.Fatalf("alice after the refused reuse: %+v, want untouched", got)
	}
}

// The key expires with its TTL, and a check ignores keys.
func TestIdempotencyKeyExpiry(t *testing.T) {
	s := newServer(t, memory.New(0), false, ratelimits.WithIdempotencyTTL(time.Minute))
	body := `{"limit":"Logins","id":"carol"}`
	withKey(s.h, "/v1/spend", "k", "", body)
	s.clock.Add(time.Minute)
	if rec := withKey(s.h, "/v1/spend", "k", "", body); rec.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("a retry at the TTL was replayed: %s", rec.Body)
	}
	for range 2 {
		if rec := withKey(s.h, "/v1/check", "k", "", body); rec.Code != 200 || rec.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("check with a key: %d %q", rec.Code, rec.Header().Get("Idempotent-Replayed"))
		}
	}
}

func TestIdempotencyKeyRefusals(t *testing.T) {
	s := newServer(t, memory.New(0), false)
	body := `{"limit":"Logins","id":"dave"}`
	for _, key := range []string{strings.Repeat("k", 256), "has space", "tab\tkey", "é"} {
		rec := withKey(s.h, "/v1/spend", key, "", body)
		if e := decode[wire.ErrorResponse](t, rec); rec.Code != 400 || e.Error.Code != "invalid_idempotency_key" {
			t.Errorf("key %q: %d %+v, want 400 invalid_idempotency_key", key, rec.Code, e)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/spend", strings.NewReader(body))
	req.Header.Add("Idempotency-Key", "a")
	req.Header.Add("Idempotency-Key", "b")
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	if rec.Code != 400 {
		t.Errorf("two Idempotency-Key headers: %d, want 400", rec.Code)
	}
	if got := decode[wire.BatchResponse](t, s.post("/v1/check", `{"limit":"Logins","id":"dave","cost":3}`)); !got.Allowed {
		t.Fatalf("refused requests spent: %+v", got)
	}
	if rec := withKey(s.h, "/v1/spend", strings.Repeat("k", 255), "", body); rec.Code != 200 {
		t.Errorf("a 255-byte key: %d %s", rec.Code, rec.Body)
	}
}

// With tokens, a key belongs to the token that used it: another client's
// request with the same key is its own.
func TestIdempotencyKeyScopedToToken(t *testing.T) {
	l, _ := newLimiter(t, memory.New(0))
	h := httpapi.New(httpapi.Options{Limiter: l, APITokens: [][]byte{[]byte("client-a"), []byte("client-b")}})
	first := withKey(h, "/v1/spend", "same", "client-a", `{"limit":"Logins","id":"erin"}`)
	other := withKey(h, "/v1/spend", "same", "client-b", `{"limit":"Logins","id":"frank"}`)
	if first.Code != 200 || other.Code != 200 || other.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("two clients, one key: %d, %d %q %s", first.Code, other.Code, other.Header().Get("Idempotent-Replayed"), other.Body)
	}
	if again := withKey(h, "/v1/spend", "same", "client-a", `{"limit":"Logins","id":"erin"}`); again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("client-a's retry was not replayed: %s", again.Body)
	}
}
