package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The waits between attempts double from BaseDelay up to MaxDelay, and
// jitter keeps each between half of it and all of it.
func TestBackoff(t *testing.T) {
	p := RetryPolicy{BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second}.withDefaults()
	want := []time.Duration{50, 100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := p.backoff(i + 1); got != w*time.Millisecond {
			t.Errorf("retry %d: %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := p.backoff(1000); got != time.Second {
		t.Errorf("retry 1000: %v, want the cap", got)
	}
	for _, tt := range []struct {
		u    float64
		want time.Duration
	}{{0, 400 * time.Millisecond}, {0.5, 600 * time.Millisecond}, {0.999999, 799999600 * time.Nanosecond}} {
		if got := jitter(800*time.Millisecond, tt.u); got != tt.want {
			t.Errorf("jitter(800ms, %v) = %v, want %v", tt.u, got, tt.want)
		}
	}
}

// The zero policy is the defaults; NoRetries is none; a cap below the
// first wait is raised to it.
func TestRetryPolicyDefaults(t *testing.T) {
	tests := []struct {
		in, want RetryPolicy
	}{
		{RetryPolicy{}, RetryPolicy{MaxRetries: DefaultMaxRetries, BaseDelay: DefaultBaseDelay, MaxDelay: DefaultMaxDelay}},
		{RetryPolicy{MaxRetries: NoRetries}, RetryPolicy{MaxRetries: 0, BaseDelay: DefaultBaseDelay, MaxDelay: DefaultMaxDelay}},
		{RetryPolicy{MaxRetries: 5, BaseDelay: time.Second, MaxDelay: time.Millisecond}, RetryPolicy{MaxRetries: 5, BaseDelay: time.Second, MaxDelay: time.Second}},
	}
	for _, tt := range tests {
		if got := tt.in.withDefaults(); got != tt.want {
			t.Errorf("%+v: %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

// Retry-After is whole seconds or an HTTP date; anything else is none.
func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"20", 20 * time.Second},
		{" 3 ", 3 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"1.5", 0},
		{"soon", 0},
		{"99999999999999999", maxRetryAfter},
		{"Sun, 22 Nov 2026 00:01:30 GMT", 90 * time.Second},
		{"Sunday, 22-Nov-26 00:00:10 GMT", 10 * time.Second},
		{"Sat, 21 Nov 2026 23:00:00 GMT", 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// Answers that are not the API's errors still make a clear *Error.
func TestErrorFromAnyAnswer(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		want   Error
		text   string
	}{
		{"the API's error", 400, nil, `{"error":{"code":"invalid_id","message":"invalid id: no","transaction":2}}`,
			Error{Method: "POST", Path: "/v1/spend", StatusCode: 400, Code: "invalid_id", Message: "invalid id: no", Transaction: 2},
			"limiter: POST /v1/spend: 400 invalid_id (transaction 2): invalid id: no"},
		{"a proxy's page", 502, http.Header{"Retry-After": {"7"}}, "<html>\n<body>\t<h1>502 Bad Gateway</h1></body>\n</html>",
			Error{Method: "POST", Path: "/v1/spend", StatusCode: 502, Message: "<html> <body> <h1>502 Bad Gateway</h1></body> </html>", Transaction: -1, RetryAfter: 7 * time.Second},
			"limiter: POST /v1/spend: 502 Bad Gateway (not an API error): <html> <body> <h1>502 Bad Gateway</h1></body> </html>"},
		{"JSON that is not the API's", 500, nil, `{"error":"boom"}`,
			Error{Method: "POST", Path: "/v1/spend", StatusCode: 500, Message: `{"error":"boom"}`, Transaction: -1},
			`limiter: POST /v1/spend: 500 Internal Server Error (not an API error): {"error":"boom"}`},
		{"an empty body", 504, nil, "",
			Error{Method: "POST", Path: "/v1/spend", StatusCode: 504, Transaction: -1},
			"limiter: POST /v1/spend: 504 Gateway Timeout (not an API error)"},
		{"a long binary body is cut and cleaned", 502, nil, strings.Repeat("é\x00", 150) + "\xff",
			Error{Method: "POST", Path: "/v1/spend", StatusCode: 502, Message: strings.TrimSpace(strings.Repeat("é ", 66)) + " é…", Transaction: -1},
			""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header
			if h == nil {
				h = http.Header{}
			}
			got := newError("POST", "/v1/spend", tt.status, h, []byte(tt.body), now)
			if *got != tt.want {
				t.Errorf("got  %+v\nwant %+v", *got, tt.want)
			}
			if tt.text != "" && got.Error() != tt.text {
				t.Errorf("text %q\nwant %q", got.Error(), tt.text)
			}
		})
	}
}

// A decision answer with every field set decodes to the same values.
// (test/client, in the main module, holds the client's wire types to the
// service's: it sends this answer from the service's own types.)
func TestDecodeEveryDecisionField(t *testing.T) {
	body := []byte(`{"allowed":true,"remaining":7,"retry_in_ms":1,"reset_in_ms":2500,"degraded":true,"decisions":[` +
		`{"limit":"L","id":"i","allowed":true,"remaining":7,"retry_in_ms":1,"reset_in_ms":2500,"unlimited":true,` +
		`"burst":9,"count":8,"period":"15m0s","override":true,"algorithm":"fixed-window",` +
		`"penalized":true,"shadow":true,"sync_rate":0.5}]}`)
	h := http.Header{"Idempotent-Replayed": {"true"}}
	got, err := decodeDecision(body, h)
	if err != nil {
		t.Fatal(err)
	}
	want := &Decision{
		Allowed: true, Remaining: 7, RetryIn: time.Millisecond, ResetIn: 2500 * time.Millisecond, Degraded: true, Replayed: true, Header: h,
		Decisions: []TransactionDecision{{
			Limit: "L", ID: "i", Allowed: true, Remaining: 7, RetryIn: time.Millisecond, ResetIn: 2500 * time.Millisecond, Unlimited: true,
			Burst: 9, Count: 8, Period: 15 * time.Minute, Override: true, Algorithm: FixedWindow,
			HasPenaltyBox: true, Penalized: true, Shadow: true, HasSyncRate: true, SyncRate: 500 * time.Millisecond,
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if _, err := decodeDecision([]byte(`{"decisions":[{"period":"soon"}]}`), h); err == nil {
		t.Error("a period that is no duration decoded")
	}
}

// Sync rates are seconds as JSON numbers, negative ones included.
func TestSeconds(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want time.Duration
	}{{0, 0}, {-1, -time.Second}, {0.5, 500 * time.Millisecond}, {3600, time.Hour}, {0.001, time.Millisecond}} {
		if got := seconds(tt.in); got != tt.want {
			t.Errorf("seconds(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if got := millis(math.MaxInt64 / int64(time.Millisecond)); got <= 0 {
		t.Errorf("the largest millisecond count overflowed: %v", got)
	}
}

// A Transaction literal costs 1 and sends no cost; WithCost sends any.
func TestTransactionCost(t *testing.T) {
	login := Transaction{Limit: "Logins", ID: "alice"}
	tests := []struct {
		t    Transaction
		cost int64
		body string
	}{
		{login, 1, `{"limit":"Logins","id":"alice"}`},
		{login.WithCost(0), 0, `{"limit":"Logins","id":"alice","cost":0}`},
		{login.WithCost(1), 1, `{"limit":"Logins","id":"alice","cost":1}`},
		{Transaction{Limit: "Logins", ID: "alice", Mode: ModeSpendOnly}.WithCost(3), 3, `{"limit":"Logins","id":"alice","cost":3,"mode":"spend-only"}`},
	}
	for _, tt := range tests {
		body, err := singleBody(tt.t)
		if err != nil || string(body) != tt.body || tt.t.Cost() != tt.cost {
			t.Errorf("%+v: cost %d, body %s %v; want %d, %s", tt.t, tt.t.Cost(), body, err, tt.cost, tt.body)
		}
	}
	body, err := batchBody([]Transaction{login, login.WithCost(0)})
	if want := `{"transactions":[{"limit":"Logins","id":"alice"},{"limit":"Logins","id":"alice","cost":0}]}`; err != nil || string(body) != want {
		t.Errorf("batch body %s %v, want %s", body, err, want)
	}
	if login.Cost() != 1 || login.WithCost(5).Cost() != 5 {
		t.Error("WithCost changed the transaction it was called on")
	}
}

// What each failure says about the call, and which calls it retries.
func TestClassify(t *testing.T) {
	tests := []struct {
		status int
		code   string
		want   outcome
	}{
		{503, CodeSourceUnavailable, notApplied},
		{503, CodeSourceOutcomeUnknown, unknown},
		{409, CodeIdempotencyKeyUnsettled, unsettled},
		{502, "", unknown},
		{503, "", unknown},
		{504, "", unknown},
		{500, "", final},
		{500, CodeInternal, final},
		{429, "", final},
		{400, CodeInvalidID, final},
		{401, CodeUnauthorized, final},
		{503, CodeSyncFailed, final},
	}
	for _, tt := range tests {
		if got := classifyError(&Error{StatusCode: tt.status, Code: tt.code}); got != tt.want {
			t.Errorf("%d %q: %v, want %v", tt.status, tt.code, got, tt.want)
		}
	}
	for _, tt := range []struct {
		o     outcome
		s     safety
		keyed bool
		want  bool
	}{
		{notApplied, sendOnce, false, true},
		{unknown, sendOnce, false, false},
		{unknown, repeatable, false, true},
		{unknown, repeatable, true, true},
		{unsettled, repeatable, true, true},
		{unsettled, repeatable, false, false},
		{final, repeatable, true, false},
	} {
		if got := retryable(tt.o, tt.s, tt.keyed); got != tt.want {
			t.Errorf("retryable(%v, %v, keyed %v) = %v, want %v", tt.o, tt.s, tt.keyed, got, tt.want)
		}
	}
}

// After each renewal, WithLease renews at half the time to live that
// renewal answered (a reload may have changed it), unless RenewEvery
// fixed the interval.
func TestRenewInterval(t *testing.T) {
	renewal := func(period time.Duration) *Decision {
		return &Decision{Allowed: true, Decisions: []TransactionDecision{{Allowed: true, Period: period, Algorithm: Concurrency}}}
	}
	for _, tc := range []struct {
		name string
		o    leaseOptions
		d    *Decision
		want time.Duration
	}{
		{"a shorter time to live", leaseOptions{every: 5 * time.Second}, renewal(2 * time.Second), time.Second},
		{"a longer one", leaseOptions{every: time.Second}, renewal(time.Minute), 30 * time.Second},
		{"the same", leaseOptions{every: time.Second}, renewal(2 * time.Second), time.Second},
		{"fixed by RenewEvery", leaseOptions{every: time.Second, fixed: true}, renewal(time.Minute), time.Second},
		{"no period answered", leaseOptions{every: time.Second}, renewal(0), time.Second},
		{"no decision", leaseOptions{every: time.Second}, &Decision{Allowed: true}, time.Second},
		{"a millisecond at least", leaseOptions{every: time.Second}, renewal(time.Microsecond), time.Millisecond},
	} {
		if got := renewInterval(tc.o, tc.d); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A renewal the service refuses for good (a 4xx answer of the API) ends
// the run with ErrLeaseLost; a failure that may pass later does not.
func TestRenewalRefusedForGood(t *testing.T) {
	for _, tc := range []struct {
		err  error
		good bool
	}{
		{&Error{StatusCode: 400, Code: CodeInvalidRequest}, true},
		{&Error{StatusCode: 401, Code: CodeUnauthorized}, true},
		{&Error{StatusCode: 429, Code: "rate_limited"}, false},
		{&Error{StatusCode: 409, Code: CodeIdempotencyKeyUnsettled}, false},
		{&Error{StatusCode: 503, Code: CodeSourceUnavailable}, false},
		{&Error{StatusCode: 404}, false}, // not the API's answer: a proxy's
		{errors.New("connection refused"), false},
		{nil, false},
	} {
		if got := refusedForGood(tc.err); got != tc.good {
			t.Errorf("refusedForGood(%v) = %v, want %v", tc.err, got, tc.good)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/spend":
			fmt.Fprint(w, `{"allowed":true,"remaining":0,"retry_in_ms":0,"reset_in_ms":60000,"decisions":[{"limit":"Jobs","id":"a","allowed":true,"remaining":0,"retry_in_ms":0,"reset_in_ms":60000,"unlimited":false,"burst":1,"count":1,"period":"1m0s","override":false,"algorithm":"concurrency","lease":"0123456789abcdef0123456789abcdef","lease_expires_in_ms":60000}]}`)
		case "/v1/renew":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"code":"invalid_request","message":"Jobs is not a concurrency limit","transaction":0}}`)
		default:
			fmt.Fprint(w, `{"allowed":true,"remaining":1,"retry_in_ms":0,"reset_in_ms":0,"decisions":[]}`)
		}
	}))
	defer srv.Close()
	c, err := New(Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.WithLease(context.Background(), Transaction{Limit: "Jobs", ID: "a"}, func(ctx context.Context) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}, RenewEvery(time.Millisecond))
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("WithLease whose renewal is refused: %v, want ErrLeaseLost", err)
	}
}
