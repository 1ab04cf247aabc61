package client_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/client"
)

// A subscriber's day against one service: every decision call, and what
// each answer says, field by field.
func TestDecisionCalls(t *testing.T) {
	s := newServer(t, serverOptions{})
	c := newClient(t, s, client.Options{})
	ctx := context.Background()
	alice := client.Transaction{Limit: "Logins", ID: "alice"}
	logins := func(remaining int64, retry, reset time.Duration) client.TransactionDecision {
		return client.TransactionDecision{Limit: "Logins", ID: "alice", Allowed: true, Remaining: remaining,
			RetryIn: retry, ResetIn: reset, Burst: 3, Count: 3, Period: time.Minute, Algorithm: client.GCRA}
	}
	steps := []struct {
		name string
		call func() (*client.Decision, error)
		want client.TransactionDecision
	}{
		{"a spend of the default cost takes one token", func() (*client.Decision, error) { return c.Spend(ctx, alice) },
			logins(2, 0, 20*time.Second)},
		{"a check answers as that spend would, and takes nothing", func() (*client.Decision, error) { return c.Check(ctx, alice) },
			logins(1, 0, 40*time.Second)},
		{"a cost of 0 reads the bucket", func() (*client.Decision, error) { return c.Spend(ctx, alice.WithCost(0)) },
			logins(2, 0, 20*time.Second)},
		{"a spend of 2 empties it; the next token is 20s away", func() (*client.Decision, error) { return c.Spend(ctx, alice.WithCost(2)) },
			logins(0, 40*time.Second, time.Minute)},
		{"a refund gives one back", func() (*client.Decision, error) { return c.Refund(ctx, alice) },
			logins(1, 0, 40*time.Second)},
	}
	for _, st := range steps {
		d, err := st.call()
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if len(d.Decisions) != 1 || !reflect.DeepEqual(d.Decisions[0], st.want) {
			t.Fatalf("%s: decisions %+v\nwant [%+v]", st.name, d.Decisions, st.want)
		}
		if w := st.want; d.Allowed != w.Allowed || d.Remaining != w.Remaining || d.RetryIn != w.RetryIn || d.ResetIn != w.ResetIn || d.Degraded || d.Replayed {
			t.Fatalf("%s: batch figures %+v, want those of its one decision %+v", st.name, d, w)
		}
	}

	// Two more spends: the second is denied, with the RateLimit headers
	// and Retry-After a caller can pass on.
	if _, err := c.Spend(ctx, alice); err != nil {
		t.Fatal(err)
	}
	d, err := c.Spend(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.Remaining != 0 || d.RetryIn != 20*time.Second || d.Decisions[0].Allowed {
		t.Fatalf("the fourth token within a minute: %+v, want denied, 20s to wait", d)
	}
	if got := d.Header.Get("Retry-After"); got != "20" {
		t.Errorf("Retry-After %q, want 20", got)
	}
	if got := d.Header.Get("RateLimit-Policy"); got != `"Logins";q=3;w=60` {
		t.Errorf("RateLimit-Policy %q", got)
	}

	// Time passes on the service's clock; a reset empties the bucket.
	s.clock.Add(20 * time.Second)
	if d, err := c.Check(ctx, alice); err != nil || !d.Allowed {
		t.Fatalf("20s later: %+v %v, want allowed", d, err)
	}
	for _, want := range []int{1, 0} {
		n, err := c.Reset(ctx, alice)
		if err != nil || n != want {
			t.Fatalf("reset: %d %v, want %d (a full bucket does not count)", n, err, want)
		}
	}
	if d, err := c.Check(ctx, alice.WithCost(3)); err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("after the reset: %+v %v, want the whole burst", d, err)
	}
}

// A batch is decided as a whole, in order; a denied batch writes nothing;
// the decisions say which limit is an override, unlimited, shadow or boxed.
func TestBatches(t *testing.T) {
	s := newServer(t, serverOptions{})
	c := newClient(t, s, client.Options{})
	ctx := context.Background()
	order := client.Transaction{Limit: "Orders", ID: "7"}
	batch := []client.Transaction{
		order.WithCost(15),
		{Limit: "Ranges", ID: "2001:DB8:1::/48", Mode: client.ModeCheckOnly},
		{Limit: "Lockout", ID: "bob", Mode: client.ModeSpendOnly},
		{Limit: "Trial", ID: "bob"},
	}
	d, err := c.SpendBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []client.TransactionDecision{
		{Limit: "Orders", ID: "7", Allowed: true, Remaining: 5, RetryIn: 30 * time.Minute, ResetIn: 45 * time.Minute,
			Burst: 20, Count: 20, Period: time.Hour, Override: true, Algorithm: client.GCRA},
		{Limit: "Ranges", ID: "2001:db8:1::/48", Allowed: true, Remaining: 3, ResetIn: 250 * time.Millisecond,
			Burst: 4, Count: 4, Period: time.Second, Override: true, Algorithm: client.GCRA},
		{Limit: "Lockout", ID: "bob", Allowed: true, Remaining: 1, ResetIn: 30 * time.Minute,
			Burst: 2, Count: 2, Period: time.Hour, Algorithm: client.GCRA, HasPenaltyBox: true},
		{Limit: "Trial", ID: "bob", Allowed: true, Remaining: 0, RetryIn: time.Hour, ResetIn: time.Hour,
			Burst: 1, Count: 1, Period: time.Hour, Algorithm: client.GCRA, Shadow: true},
	}
	if !reflect.DeepEqual(d.Decisions, want) {
		t.Fatalf("batch decisions:\n%+v\nwant\n%+v", d.Decisions, want)
	}
	// The deciding transaction is the strictest counting one: Orders,
	// whose next spend of 15 is the furthest away.
	if !d.Allowed || d.Remaining != 5 || d.RetryIn != 30*time.Minute {
		t.Fatalf("batch: %+v, want allowed with Orders' figures", d)
	}

	// Too much for Orders: the whole batch is denied and nothing is spent.
	d, err = c.SpendBatch(ctx, []client.Transaction{order.WithCost(6), {Limit: "Logins", ID: "carol"}})
	if err != nil || d.Allowed || d.Decisions[0].Allowed || !d.Decisions[1].Allowed {
		t.Fatalf("a batch over Orders' limit: %+v %v, want denied by Orders alone", d, err)
	}
	if sub, err := c.Subscriber(ctx, "Logins", "carol"); err != nil || sub.Remaining != 3 {
		t.Fatalf("carol after a denied batch: %+v %v, want untouched", sub, err)
	}

	// A known name without a default (this service's defaults leave the
	// built-in names out) is unlimited, and does not decide the batch.
	d, err = c.CheckBatch(ctx, []client.Transaction{{Limit: "NewOrdersPerAccount", ID: "42"}, {Limit: "Logins", ID: "carol"}})
	if err != nil {
		t.Fatal(err)
	}
	unlimited := client.TransactionDecision{Limit: "NewOrdersPerAccount", ID: "42", Allowed: true, Remaining: math.MaxInt64, Unlimited: true, Algorithm: client.GCRA}
	if !d.Allowed || d.Remaining != 2 || !reflect.DeepEqual(d.Decisions[0], unlimited) {
		t.Fatalf("a check batch with an unlimited name: %+v, want Logins deciding and %+v", d, unlimited)
	}

	// A refund batch and a reset batch.
	if d, err := c.RefundBatch(ctx, []client.Transaction{order.WithCost(5), {Limit: "Lockout", ID: "bob"}}); err != nil ||
		d.Decisions[0].Remaining != 10 || d.Decisions[1].Remaining != 2 {
		t.Fatalf("refund batch: %+v %v", d, err)
	}
	if n, err := c.ResetBatch(ctx, []client.Transaction{order, {Limit: "Trial", ID: "bob"}, {Limit: "Logins", ID: "nobody"}}); err != nil || n != 2 {
		t.Fatalf("reset batch: %d %v, want 2 buckets that were not full", n, err)
	}

	// Two denials box bob on Lockout: penalized, and the box's figures.
	for range 3 {
		d, err = c.Spend(ctx, client.Transaction{Limit: "Lockout", ID: "bob"})
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := d.Decisions[0]; got.Allowed || !got.HasPenaltyBox || !got.Penalized || got.RetryIn != 10*time.Minute {
		t.Fatalf("the third spend of two: %+v, want boxed for 10m", got)
	}
}

// A name declared without a default answers unlimited; the subscriber
// call shows overrides, sync rates and ids that need escaping.
func TestSubscriber(t *testing.T) {
	rec := &recorder{}
	s := newServer(t, serverOptions{wrap: rec.wrap})
	c := newClient(t, s, client.Options{})
	ctx := context.Background()
	if _, err := c.Spend(ctx, client.Transaction{Limit: "Logins", ID: "a/b c%2F?#é"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, limit, id string
		path            string // as sent, escaped
		want            client.TransactionDecision
	}{
		{"an IPv6 range: the slash is escaped, the id canonicalised", "Ranges", "2001:DB8:1::/48",
			"/v1/limits/Ranges/2001:DB8:1::%2F48",
			client.TransactionDecision{Limit: "Ranges", ID: "2001:db8:1::/48", Allowed: true, Remaining: 4,
				Burst: 4, Count: 4, Period: time.Second, Override: true, Algorithm: client.GCRA}},
		{"a string id with every character a path can mangle", "Logins", "a/b c%2F?#é",
			"/v1/limits/Logins/a%2Fb%20c%252F%3F%23%C3%A9",
			client.TransactionDecision{Limit: "Logins", ID: "a/b c%2F?#é", Allowed: true, Remaining: 2, ResetIn: 20 * time.Second,
				Burst: 3, Count: 3, Period: time.Minute, Algorithm: client.GCRA}},
		{"dots that a proxy could resolve away", "Logins", "..", "/v1/limits/Logins/%2E%2E",
			client.TransactionDecision{Limit: "Logins", ID: "..", Allowed: true, Remaining: 3,
				Burst: 3, Count: 3, Period: time.Minute, Algorithm: client.GCRA}},
		{"a window limit carries its sync rate", "Hourly", "x", "/v1/limits/Hourly/x",
			client.TransactionDecision{Limit: "Hourly", ID: "x", Allowed: true, Remaining: 5,
				Burst: 5, Count: 5, Period: time.Hour, Algorithm: client.SlidingWindow, HasSyncRate: true}},
		{"a rate counter: its penalty box and sync rate", "Hits", "192.0.2.1", "/v1/limits/Hits/192.0.2.1",
			client.TransactionDecision{Limit: "Hits", ID: "192.0.2.1", Allowed: true, Remaining: 600,
				Burst: 600, Count: 600, Period: time.Minute, Algorithm: client.RateCounter, HasPenaltyBox: true, HasSyncRate: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec.reset()
			got, err := c.Subscriber(ctx, tt.limit, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", *got, tt.want)
			}
			if sent := rec.all(); len(sent) != 1 || sent[0].path != tt.path {
				t.Errorf("sent %+v, want one GET of %s", sent, tt.path)
			}
		})
	}
	if _, err := c.Subscriber(ctx, "Ranges", "2001:db8::/33"); !client.IsCode(err, client.CodeInvalidID) {
		t.Errorf("a range of the wrong size: %v, want invalid_id", err)
	}
}

// The limits list has every name with what the defaults file says of it.
func TestLimits(t *testing.T) {
	s := newServer(t, serverOptions{})
	c := newClient(t, s, client.Options{})
	limits, err := c.Limits(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]client.LimitInfo{}
	for _, l := range limits {
		byName[l.Limit] = l
	}
	tests := []client.LimitInfo{
		{Limit: "Orders", Enum: 102, IDKind: "account", Declared: true, Algorithm: client.GCRA,
			Default: &client.LimitSettings{Burst: 10, Count: 10, Period: time.Hour}, Overrides: 1},
		{Limit: "Lockout", Enum: 104, IDKind: "string", Declared: true, Algorithm: client.GCRA, Capacity: 200000,
			Default: &client.LimitSettings{Burst: 2, Count: 2, Period: time.Hour, Penalty: 10 * time.Minute}},
		{Limit: "Hits", Enum: 105, IDKind: "ip", Declared: true, Algorithm: client.RateCounter, HasSyncRate: true, Capacity: 200000,
			Default: &client.LimitSettings{Window: time.Minute, Rate: 10, Penalty: 5 * time.Minute}},
		{Limit: "Trial", Enum: 106, IDKind: "string", Declared: true, Algorithm: client.GCRA, Shadow: true,
			Default: &client.LimitSettings{Burst: 1, Count: 1, Period: time.Hour}},
		{Limit: "Hourly", Enum: 107, IDKind: "string", Declared: true, Algorithm: client.SlidingWindow, HasSyncRate: true,
			Default: &client.LimitSettings{Count: 5, Period: time.Hour}},
	}
	for _, want := range tests {
		if got, ok := byName[want.Limit]; !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v (default %+v)\nwant %+v (default %+v)", want.Limit, got, got.Default, want, want.Default)
		}
	}
	if l, ok := byName["NewOrdersPerAccount"]; !ok || l.Declared || l.Enum == 0 {
		t.Errorf("a built-in name: %+v", l)
	}
}

// Refusals keep the API's code, message and the transaction at fault, and
// nothing is spent.
func TestRefusalsKeepTheirCodes(t *testing.T) {
	s := newServer(t, serverOptions{})
	c := newClient(t, s, client.Options{})
	ctx := context.Background()
	good := client.Transaction{Limit: "Logins", ID: "dave"}
	tests := []struct {
		name string
		call func() error
		code string
		txn  int
	}{
		{"an account id with a leading zero", func() error {
			_, err := c.SpendBatch(ctx, []client.Transaction{good, {Limit: "Orders", ID: "0042"}})
			return err
		}, client.CodeInvalidID, 1},
		{"an unknown limit", func() error { _, err := c.Spend(ctx, client.Transaction{Limit: "Nope", ID: "x"}); return err }, client.CodeUnknownLimit, 0},
		{"a cost above the burst", func() error { _, err := c.Spend(ctx, good.WithCost(4)); return err }, client.CodeInvalidCost, 0},
		{"a negative cost", func() error { _, err := c.Refund(ctx, good.WithCost(-1)); return err }, client.CodeInvalidCost, 0},
		{"a mode the API does not have", func() error {
			_, err := c.Check(ctx, client.Transaction{Limit: "Logins", ID: "dave", Mode: "maybe"})
			return err
		}, client.CodeInvalidMode, 0},
		{"one bucket twice", func() error { _, err := c.SpendBatch(ctx, []client.Transaction{good, good}); return err }, client.CodeDuplicateBucket, 1},
		{"an empty batch", func() error { _, err := c.SpendBatch(ctx, nil); return err }, client.CodeEmptyBatch, -1},
		{"a reset of an unknown limit", func() error { _, err := c.Reset(ctx, client.Transaction{Limit: "Nope", ID: "x"}); return err }, client.CodeUnknownLimit, 0},
		{"a reload the service does not offer", func() error { return c.Reload(ctx) }, client.CodeNotFound, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var e *client.Error
			if !errors.As(err, &e) {
				t.Fatalf("%v, want an *Error", err)
			}
			if e.Code != tt.code || e.Transaction != tt.txn || e.Message == "" || e.StatusCode/100 != 4 || e.Attempts != 1 || !client.IsCode(err, tt.code) {
				t.Errorf("%+v, want code %s, transaction %d, a message, one attempt", e, tt.code, tt.txn)
			}
		})
	}
	if d, err := c.Check(ctx, good.WithCost(0)); err != nil || d.Remaining != 3 {
		t.Fatalf("dave after the refusals: %+v %v, want untouched", d, err)
	}
	// A string JSON cannot carry unchanged is refused before sending.
	if _, err := c.Spend(ctx, client.Transaction{Limit: "Logins", ID: "\xff"}); !errors.Is(err, client.ErrInvalidUTF8) {
		t.Errorf("an id that is not UTF-8: %v, want ErrInvalidUTF8", err)
	}
}

// With --fail-open, a failing source answers allowed and degraded.
func TestDegraded(t *testing.T) {
	s := newServer(t, serverOptions{failOpen: true})
	c := newClient(t, s, client.Options{Retry: client.RetryPolicy{MaxRetries: client.NoRetries}})
	s.source.failNext(failUnapplied)
	d, err := c.Spend(context.Background(), client.Transaction{Limit: "Logins", ID: "erin"})
	if err != nil || !d.Allowed || !d.Degraded {
		t.Fatalf("a spend while the source fails, fail-open: %+v %v, want allowed and degraded", d, err)
	}
}

// Reload is an admin call that reports the files' problems.
func TestReload(t *testing.T) {
	var fail error
	reloads := 0
	s := newServer(t, serverOptions{reload: func() error { reloads++; return fail }})
	c := newClient(t, s, client.Options{})
	if err := c.Reload(context.Background()); err != nil || reloads != 1 {
		t.Fatalf("reload: %v, %d reloads", err, reloads)
	}
	fail = errors.New("overrides.yaml:3: no such limit")
	err := c.Reload(context.Background())
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 422 || e.Code != client.CodeReloadFailed || e.Message != fail.Error() {
		t.Fatalf("a failed reload: %v, want 422 reload_failed with the problem", err)
	}
}

// Sync answers with its counts (none on the memory source).
func TestSync(t *testing.T) {
	s := newServer(t, serverOptions{})
	c := newClient(t, s, client.Options{})
	if res, err := c.Sync(context.Background()); err != nil || res != (client.SyncResult{}) {
		t.Fatalf("sync on memory: %+v %v, want nothing pushed or fetched", res, err)
	}
}

// An answer that is not the API's success, from whatever stands in front
// of the service, is an error that says so, not a zero Decision.
func TestUnexpectedAnswers(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer http.HandlerFunc
	}{
		{"204 No Content", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }},
		{"a login page with 200", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html>please sign in</html>")
		}},
		{"JSON of another shape", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `{"allowed":"yes"}`)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{answers: map[int]http.HandlerFunc{0: tt.answer}}
			s := newServer(t, serverOptions{wrap: rec.wrap})
			c := newClient(t, s, client.Options{Retry: fastRetries})
			d, err := c.Check(context.Background(), client.Transaction{Limit: "Logins", ID: "x"})
			if !errors.Is(err, client.ErrUnexpectedAnswer) || d != nil {
				t.Fatalf("%+v %v, want ErrUnexpectedAnswer", d, err)
			}
			if n := len(rec.all()); n != 1 {
				t.Errorf("%d requests, want 1: a repeat would get the same", n)
			}
		})
	}
}
