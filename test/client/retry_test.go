package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/client"
)

// loseAnswers is a transport that sends requests on and then loses the
// answers to the first n of them, as a connection that breaks after the
// service applied the call would.
type loseAnswers struct {
	base http.RoundTripper
	n    atomic.Int64
}

var errLost = errors.New("connection reset after the request was sent")

func (l *loseAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(r)
	if err == nil && l.n.Add(-1) >= 0 {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, errLost
	}
	return resp, err
}

// answerError answers like the API's error body, with status and code.
func answerError(status int, code string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"error":{"code":"`+code+`","message":"said by the test"}}`)
	}
}

// proxyPage answers as a proxy in front of the service might.
func proxyPage(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "<html>\n<head><title>502 Bad Gateway</title></head>\n<body><center><h1>502 Bad Gateway</h1></center></body>\n</html>\n")
	}
}

// Which failures are retried, and how: a repeat never spends twice, and
// nothing that a repeat cannot mend is repeated.
func TestRetries(t *testing.T) {
	alice := client.Transaction{Limit: "Logins", ID: "alice"}
	boxed := client.Transaction{Limit: "Lockout", ID: "alice"}
	tests := []struct {
		name string
		// setup runs first, before the failures below are armed.
		setup func(ctx context.Context, c *client.Client) (*client.Decision, error)
		// lose is how many answers the transport loses; answers replace
		// the service's; faults fail the source's next spends.
		lose    int64
		answers map[int]http.HandlerFunc
		faults  []fault
		retry   client.RetryPolicy
		call    func(ctx context.Context, c *client.Client) (*client.Decision, error)
		// wantCode is the error's code ("" for success, "-" for a
		// transport error); wantSent the requests the service saw.
		wantCode string
		wantSent int
		// wantKey: every request carried the same key ("" none; "*" any
		// one key); keyThenNone: all but the last carried one, the same, and the last none.
		wantKey     string
		keyThenNone bool
		// wantLeft is alice's tokens left afterwards on limit (Logins
		// when empty).
		limit    string
		wantLeft int64
		replayed bool
	}{
		{name: "a spend whose answer was lost after it was applied is retried with its key and spends once",
			lose: 1, retry: fastRetries, call: spend(alice),
			wantSent: 2, wantKey: "*", wantLeft: 2, replayed: true},
		{name: "so is one the service applied and then answered source_outcome_unknown",
			faults: []fault{applyThenFail}, retry: fastRetries, call: spend(alice),
			wantSent: 2, wantKey: "*", wantLeft: 2, replayed: true},
		{name: "a refund likewise: given back once",
			setup: spend(alice.WithCost(2)), lose: 1, retry: fastRetries,
			call:     func(ctx context.Context, c *client.Client) (*client.Decision, error) { return c.Refund(ctx, alice) },
			wantSent: 2, wantKey: "*", wantLeft: 2, replayed: true},
		{name: "the caller's key is sent on every attempt",
			lose: 1, retry: fastRetries, call: spend(alice, client.WithIdempotencyKey("order-7f3a")),
			wantSent: 2, wantKey: "order-7f3a", wantLeft: 2, replayed: true},
		{name: "without retries, a spend is sent once, without a key",
			lose: 1, retry: client.RetryPolicy{MaxRetries: client.NoRetries}, call: spend(alice),
			wantCode: "-", wantSent: 1, wantLeft: 2},
		{name: "without a key, an unknown outcome is not retried",
			faults: []fault{applyThenFail}, retry: fastRetries, call: spend(alice, client.WithoutIdempotencyKey()),
			wantCode: client.CodeSourceOutcomeUnknown, wantSent: 1, wantLeft: 2},
		{name: "nor is a lost answer",
			lose: 1, retry: fastRetries, call: spend(alice, client.WithoutIdempotencyKey()),
			wantCode: "-", wantSent: 1, wantLeft: 2},
		{name: "source_unavailable changed nothing: even a spend without a key is retried",
			faults: []fault{failUnapplied, failUnapplied}, retry: fastRetries, call: spend(alice, client.WithoutIdempotencyKey()),
			wantSent: 3, wantLeft: 2},
		{name: "retries run out",
			faults: []fault{failUnapplied, failUnapplied, failUnapplied, failUnapplied}, retry: fastRetries, call: spend(alice),
			wantCode: client.CodeSourceUnavailable, wantSent: 4, wantKey: "*", wantLeft: 3},
		{name: "a 400 is never retried",
			retry: fastRetries, call: spend(alice.WithCost(9)),
			wantCode: client.CodeInvalidCost, wantSent: 1, wantKey: "*", wantLeft: 3},
		{name: "a batch that refuses keys (a limit with a penalty) is sent again without one",
			retry: fastRetries, call: spend(boxed),
			wantSent: 2, keyThenNone: true, limit: "Lockout", wantLeft: 1},
		{name: "and that call is not retried after an unknown outcome",
			faults: []fault{applyThenFail}, retry: fastRetries, call: spend(boxed),
			wantCode: client.CodeSourceOutcomeUnknown, wantSent: 2, keyThenNone: true, limit: "Lockout", wantLeft: 1},
		{name: "a generated key refused after attempts that did nothing is dropped: sent again without one",
			answers: map[int]http.HandlerFunc{0: answerError(503, client.CodeSourceUnavailable)},
			retry:   fastRetries, call: spend(boxed),
			wantSent: 3, keyThenNone: true, limit: "Lockout", wantLeft: 1},
		{name: "a generated key refused after an unknown outcome is not dropped: the first attempt may have been applied under it",
			answers: map[int]http.HandlerFunc{0: answerError(503, client.CodeSourceOutcomeUnknown), 1: answerError(400, client.CodeInvalidIdempotencyKey)},
			retry:   fastRetries, call: spend(alice),
			wantCode: client.CodeInvalidIdempotencyKey, wantSent: 2, wantKey: "*", wantLeft: 3},
		{name: "a key the caller gave is not dropped: its refusal is the answer",
			retry: fastRetries, call: spend(boxed, client.WithIdempotencyKey("mine")),
			wantCode: client.CodeInvalidIdempotencyKey, wantSent: 1, wantKey: "mine", limit: "Lockout", wantLeft: 2},
		{name: "WithoutIdempotencyKey spares the refused request",
			retry: fastRetries, call: spend(boxed, client.WithoutIdempotencyKey()),
			wantSent: 1, limit: "Lockout", wantLeft: 1},
		{name: "idempotency_key_unsettled is retried with the same key",
			answers: map[int]http.HandlerFunc{0: answerError(409, client.CodeIdempotencyKeyUnsettled), 1: answerError(409, client.CodeIdempotencyKeyUnsettled)},
			retry:   fastRetries, call: spend(alice),
			wantSent: 3, wantKey: "*", wantLeft: 2},
		{name: "a check is retried after source_outcome_unknown",
			answers: map[int]http.HandlerFunc{0: answerError(503, client.CodeSourceOutcomeUnknown)},
			retry:   fastRetries, call: check(alice),
			wantSent: 2, wantLeft: 3},
		{name: "and after a proxy's 502",
			answers: map[int]http.HandlerFunc{0: proxyPage(502)},
			retry:   fastRetries, call: check(alice),
			wantSent: 2, wantLeft: 3},
		{name: "a spend without a key is not retried after a proxy's 502, which may have passed it on",
			answers: map[int]http.HandlerFunc{0: proxyPage(502)},
			retry:   fastRetries, call: spend(alice, client.WithoutIdempotencyKey()),
			wantCode: "", wantSent: 1, wantLeft: 3},
		{name: "a Retry-After longer than the policy's longest wait ends the retries",
			answers: map[int]http.HandlerFunc{0: answerError(503, client.CodeSourceUnavailable, "Retry-After", "30")},
			retry:   fastRetries, call: check(alice),
			wantCode: client.CodeSourceUnavailable, wantSent: 1, wantLeft: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{answers: tt.answers}
			s := newServer(t, serverOptions{wrap: rec.wrap})
			lose := &loseAnswers{base: client.NewHTTPClient().Transport}
			c := newClient(t, s, client.Options{Retry: tt.retry, HTTPClient: &http.Client{Transport: lose}})
			ctx := context.Background()
			if tt.setup != nil {
				if _, err := tt.setup(ctx, c); err != nil {
					t.Fatal(err)
				}
				rec.reset()
			}
			lose.n.Store(tt.lose)
			s.source.failNext(tt.faults...)
			d, err := tt.call(ctx, c)
			checkOutcome(t, err, tt.wantCode)
			if err == nil && d.Replayed != tt.replayed {
				t.Errorf("replayed %v, want %v", d.Replayed, tt.replayed)
			}
			sent := rec.all()
			if len(sent) != tt.wantSent {
				t.Fatalf("the service saw %d requests %+v, want %d", len(sent), sent, tt.wantSent)
			}
			switch {
			case tt.keyThenNone:
				last := len(sent) - 1
				for _, r := range sent[:last] {
					if r.key == "" || r.key != sent[0].key {
						t.Errorf("keys sent %+v, want one, the same on each, then none", sent)
					}
				}
				if sent[last].key != "" {
					t.Errorf("keys sent %+v, want none on the last", sent)
				}
			default:
				for _, r := range sent {
					if r.key != sent[0].key || (tt.wantKey == "" && r.key != "") || (tt.wantKey == "*" && r.key == "") ||
						(tt.wantKey != "" && tt.wantKey != "*" && r.key != tt.wantKey) {
						t.Errorf("keys sent %+v, want %q, the same on each", sent, tt.wantKey)
						break
					}
				}
			}
			limit := tt.limit
			if limit == "" {
				limit = "Logins"
			}
			if sub, err := c.Subscriber(ctx, limit, "alice"); err != nil || sub.Remaining != tt.wantLeft {
				t.Errorf("%s/alice afterwards: %+v %v, want %d left", limit, sub, err, tt.wantLeft)
			}
		})
	}
}

func spend(t client.Transaction, opts ...client.CallOption) func(context.Context, *client.Client) (*client.Decision, error) {
	return func(ctx context.Context, c *client.Client) (*client.Decision, error) { return c.Spend(ctx, t, opts...) }
}

func check(t client.Transaction) func(context.Context, *client.Client) (*client.Decision, error) {
	return func(ctx context.Context, c *client.Client) (*client.Decision, error) { return c.Check(ctx, t) }
}

// checkOutcome fails the test unless err is what code says: nil for "",
// an *Error with that code, "-" for an error that is no *Error (the
// transport's); a proxy's page is an *Error with no code.
func checkOutcome(t *testing.T, err error, code string) {
	t.Helper()
	var e *client.Error
	switch {
	case code == "" && err != nil && !errors.As(err, &e):
		t.Fatalf("error %v, want none", err)
	case code == "" && err != nil && e.Code != "":
		t.Fatalf("error %v, want none or a proxy's", err)
	case code == "-" && (err == nil || errors.As(err, &e)):
		t.Fatalf("error %v, want the transport's", err)
	case code != "" && code != "-" && !client.IsCode(err, code):
		t.Fatalf("error %v, want code %s", err, code)
	}
}

// cancelOnClose cancels a context once the body of the first answer it
// carries is read and closed: the attempt is over, and the client is about
// to wait for its retry.
type cancelOnClose struct {
	base   http.RoundTripper
	cancel context.CancelFunc
}

func (cc *cancelOnClose) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := cc.base.RoundTrip(r)
	if err == nil {
		resp.Body = &closeHook{ReadCloser: resp.Body, onClose: cc.cancel}
	}
	return resp, err
}

type closeHook struct {
	io.ReadCloser
	onClose func()
}

func (h *closeHook) Close() error {
	err := h.ReadCloser.Close()
	h.onClose()
	return err
}

// The caller's context bounds the call: once it is done, no retry is
// sent, and the error has both the context's end and the last refusal.
func TestCancelStopsRetries(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{answers: map[int]http.HandlerFunc{0: answerError(503, client.CodeSourceUnavailable)}}
	s := newServer(t, serverOptions{wrap: rec.wrap})
	// An hour between attempts: if the cancellation did not end the wait,
	// the test would time out.
	c := newClient(t, s, client.Options{
		Retry:      client.RetryPolicy{MaxRetries: 5, BaseDelay: time.Hour, MaxDelay: time.Hour},
		HTTPClient: &http.Client{Transport: &cancelOnClose{base: client.NewHTTPClient().Transport, cancel: cancel}},
	})
	_, err := c.Check(ctx, client.Transaction{Limit: "Logins", ID: "alice"})
	if !errors.Is(err, context.Canceled) || !client.IsCode(err, client.CodeSourceUnavailable) {
		t.Fatalf("%v, want the cancellation and the refusal it cut short", err)
	}
	if n := len(rec.all()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
	// A context already done sends nothing.
	if _, err := c.Check(ctx, client.Transaction{Limit: "Logins", ID: "alice"}); !errors.Is(err, context.Canceled) || len(rec.all()) != 1 {
		t.Fatalf("a call with a done context: %v, %d requests", err, len(rec.all()))
	}
}

// An attempt that runs out of time may have reached the service: a check
// is tried again, a spend without a key is not.
func TestAttemptTimeout(t *testing.T) {
	// hang reads the request (so that the server notices the client
	// going away) and answers only once it has.
	hang := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
			t.Error("the client did not give up on the attempt")
		}
	}
	for _, tt := range []struct {
		name     string
		call     func(context.Context, *client.Client) (*client.Decision, error)
		wantSent int
		wantErr  bool
	}{
		{"a check", check(client.Transaction{Limit: "Logins", ID: "alice"}), 2, false},
		{"a spend without a key", spend(client.Transaction{Limit: "Logins", ID: "alice"}, client.WithoutIdempotencyKey()), 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{answers: map[int]http.HandlerFunc{0: hang}}
			s := newServer(t, serverOptions{wrap: rec.wrap})
			c := newClient(t, s, client.Options{Retry: fastRetries, AttemptTimeout: 50 * time.Millisecond})
			_, err := tt.call(context.Background(), c)
			if tt.wantErr != (err != nil) || (err != nil && !errors.Is(err, context.DeadlineExceeded)) {
				t.Fatalf("%v, want an error: %v, the attempt's deadline", err, tt.wantErr)
			}
			if n := len(rec.all()); n != tt.wantSent {
				t.Fatalf("%d requests, want %d", n, tt.wantSent)
			}
		})
	}
}
