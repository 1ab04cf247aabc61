package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// request is one logical call: sent once, or again on retries.
type request struct {
	method string
	path   string // escaped, starting at /v1/
	body   []byte // nil: no body
	admin  bool   // send the admin token when there is one
	safety safety
	// key is the Idempotency-Key sent on every attempt ("" sends none);
	// generated says the client made it up rather than the caller.
	key       string
	generated bool
}

// answer is a successful (200) answer read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// maxAnswerBytes bounds an answer's body: far above any the service sends
// (a batch of thousands of decisions, a list of every limit), and low
// enough that a wrong endpoint cannot fill the caller's memory.
const maxAnswerBytes = 32 << 20

// send makes the call r, with the retries it may have. A key the client
// generated that the service refuses for this batch (some limits cannot
// replay an answer) is dropped, and the call sent once more without it,
// as a call that must not be applied twice: it is retried only when an
// answer proves it was not applied. That happens only when every attempt
// before the refusal certainly did nothing (no connection, or the
// service's source_unavailable): after an attempt whose outcome is
// unknown, the batch may have been applied under the key before a reload
// made its limits refuse keys, and sending it without one could apply it
// twice, so the refusal is returned instead.
func (c *Client) send(ctx context.Context, r request) (*answer, error) {
	var tries attempts
	a, err := c.sendWithRetries(ctx, &r, &tries)
	if err != nil && r.generated && !tries.unknown && IsCode(err, CodeInvalidIdempotencyKey) {
		r.key, r.generated, r.safety = "", false, sendOnce
		a, err = c.sendWithRetries(ctx, &r, &tries)
	}
	return a, err
}

// attempts counts the requests a call has sent, and says whether any of
// them failed without a known outcome (it may have been applied).
type attempts struct {
	n       int
	unknown bool
}

// sendWithRetries tries r until it succeeds, fails in a way no repeat
// mends or that makes a repeat unsafe, runs out of retries, or ctx ends.
// tries counts every request sent, across calls.
func (c *Client) sendWithRetries(ctx context.Context, r *request, tries *attempts) (*answer, error) {
	for retry := 0; ; retry++ {
		tries.n++
		a, o, err := c.attempt(ctx, r)
		if err == nil {
			return a, nil
		}
		tries.unknown = tries.unknown || o == unknown
		var apiErr *Error
		if errors.As(err, &apiErr) {
			apiErr.Attempts = tries.n
		} else {
			err = fmt.Errorf("%w (attempt %d)", err, tries.n)
		}
		if retry >= c.retry.MaxRetries || !retryable(o, r.safety, r.key != "") {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, gaveUp(err, ctx.Err())
		}
		d := jitter(c.retry.backoff(retry+1), c.unit())
		if apiErr != nil && apiErr.RetryAfter > d {
			if apiErr.RetryAfter > c.retry.MaxDelay {
				// The service asks for more patience than the policy
				// has: the caller decides, knowing how long.
				return nil, err
			}
			d = apiErr.RetryAfter
		}
		if werr := wait(ctx, d); werr != nil {
			return nil, gaveUp(err, werr)
		}
	}
}

// gaveUp is the error of a call whose retries the end of its context cut
// short: the last failure, and the context's error unless the failure
// already says it.
func gaveUp(err, ctxErr error) error {
	if errors.Is(err, ctxErr) {
		return err
	}
	return fmt.Errorf("%w (gave up retrying: %w)", err, ctxErr)
}

// attempt sends r once and reads its answer whole, so that the
// connection goes back to the pool. A failure comes with what it says
// about the call (see outcome).
func (c *Client) attempt(ctx context.Context, r *request) (*answer, outcome, error) {
	if c.attemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.attemptTimeout)
		defer cancel()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.base+r.path, body)
	if err != nil {
		return nil, final, fmt.Errorf("limiter: %s %s: %w", r.method, r.path, err)
	}
	h := req.Header
	h.Set("Accept", "application/json")
	h.Set("User-Agent", c.userAgent)
	if r.body != nil {
		h.Set("Content-Type", "application/json")
	}
	if tok := c.token(r.admin); tok != "" {
		h.Set("Authorization", "Bearer "+tok)
	}
	if r.key != "" {
		h.Set("Idempotency-Key", r.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, classifyTransport(err), fmt.Errorf("limiter: %s %s: %w", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, unknown, fmt.Errorf("limiter: %s %s: reading the answer: %w", r.method, r.path, err)
	}
	if len(b) > maxAnswerBytes {
		return nil, final, fmt.Errorf("limiter: %s %s: %w: a body over %d bytes", r.method, r.path, ErrUnexpectedAnswer, maxAnswerBytes)
	}
	if resp.StatusCode >= 400 {
		e := newError(r.method, r.path, resp.StatusCode, resp.Header, b, c.now())
		return nil, classifyError(e), e
	}
	if resp.StatusCode != http.StatusOK {
		// The API answers every call it serves with 200.
		return nil, final, fmt.Errorf("limiter: %s %s: %w: status %d", r.method, r.path, ErrUnexpectedAnswer, resp.StatusCode)
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: b}, final, nil
}

// token is the bearer token for a call: the admin token for an admin call
// when there is one, else the API token ("" sends none).
func (c *Client) token(admin bool) string {
	if admin && c.adminToken != "" {
		return c.adminToken
	}
	return c.apiToken
}

// decodeError wraps the failure to read a successful answer.
func decodeError(r request, err error) error {
	return fmt.Errorf("limiter: %s %s: %w: %w", r.method, r.path, ErrUnexpectedAnswer, err)
}

// encodeError wraps the failure to encode a request's body; nothing was
// sent.
func encodeError(r request, err error) error {
	return fmt.Errorf("limiter: %s %s: encoding the request: %w", r.method, r.path, err)
}
