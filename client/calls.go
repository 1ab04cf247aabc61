package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// CallOption changes one Spend, Refund, Acquire, Release or Renew call
// (their batches too).
type CallOption func(*callOptions)

type callOptions struct {
	key   string
	noKey bool
}

// WithIdempotencyKey sends key as the call's Idempotency-Key, on its
// first attempt and every retry: a key the caller chose (an order's id,
// say) lets the caller's own retries, even from another process, be
// answered with the first answer instead of spending again. The service
// takes 1 to 255 visible ASCII characters; an empty key is none. A key
// the service refuses for the batch (CodeInvalidIdempotencyKey) is an
// error: the client does not drop a key its caller asked for.
func WithIdempotencyKey(key string) CallOption {
	return func(o *callOptions) { o.key = key }
}

// WithoutIdempotencyKey sends the call without an Idempotency-Key, and so
// never retries it after a failure that may have applied it. It saves the
// request the service would refuse when the batch cannot take a key (a
// rate-counter limit, a limit with a penalty, a window limit with a
// sync_rate), which the client would otherwise send first.
func WithoutIdempotencyKey() CallOption {
	return func(o *callOptions) { o.noKey = true }
}

// Spend takes t's cost from its bucket if the bucket allows it. A denial is
// a Decision with Allowed false, not an error.
func (c *Client) Spend(ctx context.Context, t Transaction, opts ...CallOption) (*Decision, error) {
	body, err := singleBody(t)
	return c.decideKeyed(ctx, "/v1/spend", body, err, opts)
}

// SpendBatch decides txns together, atomically: the spends are written
// only when the whole batch is allowed (spend-only transactions when they
// are also allowed themselves), and the Decision has one
// TransactionDecision per transaction, in order.
func (c *Client) SpendBatch(ctx context.Context, txns []Transaction, opts ...CallOption) (*Decision, error) {
	body, err := batchBody(txns)
	return c.decideKeyed(ctx, "/v1/spend", body, err, opts)
}

// Check answers as Spend would, and writes nothing: every transaction is
// treated as check-only.
func (c *Client) Check(ctx context.Context, t Transaction) (*Decision, error) {
	body, err := singleBody(t)
	return c.decide(ctx, request{method: http.MethodPost, path: "/v1/check", body: body, safety: repeatable}, err)
}

// CheckBatch is Check of several transactions, decided together.
func (c *Client) CheckBatch(ctx context.Context, txns []Transaction) (*Decision, error) {
	body, err := batchBody(txns)
	return c.decide(ctx, request{method: http.MethodPost, path: "/v1/check", body: body, safety: repeatable}, err)
}

// Refund gives t's cost back to its bucket, if the bucket exists (a
// missing one is not created). A check-only transaction refunds nothing.
func (c *Client) Refund(ctx context.Context, t Transaction, opts ...CallOption) (*Decision, error) {
	body, err := singleBody(t)
	return c.decideKeyed(ctx, "/v1/refund", body, err, opts)
}

// RefundBatch refunds several transactions in one request.
func (c *Client) RefundBatch(ctx context.Context, txns []Transaction, opts ...CallOption) (*Decision, error) {
	body, err := batchBody(txns)
	return c.decideKeyed(ctx, "/v1/refund", body, err, opts)
}

// Reset deletes t's bucket (its cost and mode are ignored) and takes its
// id out of its limit's penalty box, and returns 1 when the bucket was not
// full (or the id was boxed), else 0. It is an admin call. A reset is
// safe to repeat, so it is retried; after a retry of a reset that the
// service had applied, the count says 0.
func (c *Client) Reset(ctx context.Context, t Transaction) (int, error) {
	body, err := singleBody(t)
	return c.reset(ctx, body, err)
}

// ResetBatch resets several buckets in one request and returns how many
// were not full (or were boxed), as Reset does.
func (c *Client) ResetBatch(ctx context.Context, txns []Transaction) (int, error) {
	body, err := batchBody(txns)
	return c.reset(ctx, body, err)
}

func (c *Client) reset(ctx context.Context, body []byte, encErr error) (int, error) {
	r := request{method: http.MethodPost, path: "/v1/reset", body: body, admin: true, safety: repeatable}
	var v struct {
		Reset int `json:"reset"`
	}
	if err := c.call(ctx, r, encErr, &v); err != nil {
		return 0, err
	}
	return v.Reset, nil
}

// Limits lists every limit name the service knows, by enum.
func (c *Client) Limits(ctx context.Context) ([]LimitInfo, error) {
	r := request{method: http.MethodGet, path: "/v1/limits", safety: repeatable}
	a, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	limits, err := decodeLimits(a.body)
	if err != nil {
		return nil, decodeError(r, err)
	}
	return limits, nil
}

// Subscriber reads one subscriber's bucket without changing it (a cost-0
// check): the effective limit, whether it is an override, the bucket's
// state, and for a window or rate-counter limit the name's sync_rate. The
// id may hold any character, "/" included (an IPv6 range such as
// "2001:db8::/48"): it is escaped into the path.
func (c *Client) Subscriber(ctx context.Context, limit, id string) (*TransactionDecision, error) {
	r := request{method: http.MethodGet, path: "/v1/limits/" + pathSegment(limit) + "/" + pathSegment(id), safety: repeatable}
	a, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	d, err := decodeTransactionDecision(a.body)
	if err != nil {
		return nil, decodeError(r, err)
	}
	return d, nil
}

// Reload has the service load its configuration files and token files
// again. It is an admin call. A reload the files make fail is an *Error
// with CodeReloadFailed whose Message lists every problem; the service
// then keeps its running configuration.
func (c *Client) Reload(ctx context.Context) error {
	r := request{method: http.MethodPost, path: "/v1/admin/reload", admin: true, safety: repeatable}
	return c.call(ctx, r, nil, nil)
}

// SyncResult is the answer of Client.Sync.
type SyncResult struct {
	// Pushed counts the (limit, id) counters whose hits went to the
	// shared source; Fetched those whose totals were read back.
	Pushed  int
	Fetched int
}

// Sync has the service run one sync cycle of its limits with a sync_rate
// above 0 now, and answers when it is done. It is an admin call. A failed
// push is an *Error with CodeSyncFailed (the hits are kept for the next
// cycle). It is retried only when nothing was sent: a repeat after a push
// that may have been applied could count its hits twice.
func (c *Client) Sync(ctx context.Context) (SyncResult, error) {
	r := request{method: http.MethodPost, path: "/v1/admin/sync", admin: true, safety: sendOnce}
	var v struct {
		Pushed  int `json:"pushed"`
		Fetched int `json:"fetched"`
	}
	if err := c.call(ctx, r, nil, &v); err != nil {
		return SyncResult{}, err
	}
	return SyncResult{Pushed: v.Pushed, Fetched: v.Fetched}, nil
}

// pathSegment escapes s as one segment of a path: "/" and the other
// characters a path gives meaning to are escaped, and so are the dots of
// "." and "..", which a proxy between client and service might otherwise
// resolve away. The service unescapes the segment.
func pathSegment(s string) string {
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	return url.PathEscape(s)
}

// decideKeyed sends a spend or refund: with the caller's idempotency key,
// or one of the client's own when retries are on, which makes the call
// safe to retry after a failure that may have applied it.
func (c *Client) decideKeyed(ctx context.Context, path string, body []byte, encErr error, opts []CallOption) (*Decision, error) {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	r := request{method: http.MethodPost, path: path, body: body, safety: sendOnce}
	switch {
	case o.key != "":
		if strings.ContainsFunc(o.key, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return nil, errControlInKey
		}
		r.key, r.safety = o.key, repeatable
	case !o.noKey && c.retry.MaxRetries > 0:
		r.key, r.generated, r.safety = c.newKey(), true, repeatable
	}
	return c.decide(ctx, r, encErr)
}

// decide sends a spend, check or refund and reads its Decision.
func (c *Client) decide(ctx context.Context, r request, encErr error) (*Decision, error) {
	if encErr != nil {
		return nil, encodeError(r, encErr)
	}
	a, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	d, err := decodeDecision(a.body, a.header)
	if err != nil {
		return nil, decodeError(r, err)
	}
	return d, nil
}

// call sends r and decodes its answer into v (nil: the answer is not
// read).
func (c *Client) call(ctx context.Context, r request, encErr error, v any) error {
	if encErr != nil {
		return encodeError(r, encErr)
	}
	a, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(a.body, v); err != nil {
		return decodeError(r, err)
	}
	return nil
}
