package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// The ERL calls: rate counters and penalty boxes, as Fastly's Edge Rate
// Limiting has them. Those that add hits (CheckRate, CheckRates,
// Increment) cannot carry an idempotency key, so they are retried only
// when an answer proves they were not applied; lookups, and adding to or
// removing from a box (which a repeat leaves as one call does), are
// retried like reads.

// RateCheck is one rate check: Delta hits (0 to 100,000) added to the
// entry's counter of the rate-counter limit RateCounter, whose rate over
// Window seconds (1, 10 or 60) is then compared with Limit hits per
// second (10 to 70,000,000).
type RateCheck struct {
	RateCounter string
	Delta       int64
	Window      int64
	Limit       int64
}

// RateResult answers CheckRate.
type RateResult struct {
	// Penalized says the entry is in the penalty box after the call, for
	// PenaltyExpiresIn more (0 when it is not).
	Penalized        bool
	PenaltyExpiresIn time.Duration
	// Rate is the counter's rate over the window after the hits, in hits
	// per second, not rounded.
	Rate float64
}

// RatesResult answers CheckRates: each check's rate and whether it went
// above its limit in this call, in the order of the checks.
type RatesResult struct {
	Penalized        bool
	PenaltyExpiresIn time.Duration
	Rates            [2]float64
	Exceeded         [2]bool
}

// RateCounterReading answers Client.RateCounter: the entry as its limit
// canonicalises it, its hits in the aligned ten-second blocks of the last
// minute (Buckets[0] is Fastly's bucket.10s, Buckets[5] bucket.60s), and
// its rates over the last 1, 10 and 60 seconds in hits per second.
type RateCounterReading struct {
	Entry   string
	Buckets [6]int64
	Rate1s  float64
	Rate10s float64
	Rate60s float64
}

// CheckRate adds check's hits to entry's counter and, if the rate goes
// above the check's limit, puts entry in the penalty box of the limit
// penaltyBox for ttl (1 to 60 minutes, rounded to the minute by the
// service).
func (c *Client) CheckRate(ctx context.Context, entry string, check RateCheck, penaltyBox string, ttl time.Duration) (RateResult, error) {
	body := map[string]any{
		"entry": entry, "ratecounter": check.RateCounter, "delta": check.Delta, "window": check.Window,
		"limit": check.Limit, "penaltybox": penaltyBox, "ttl": ttl.String(),
	}
	var v struct {
		Penalized bool    `json:"penalized"`
		Rate      float64 `json:"rate"`
		ExpiresMS int64   `json:"penalty_expires_in_ms"`
	}
	r := request{method: http.MethodPost, path: "/v1/erl/check_rate", safety: sendOnce}
	if err := c.erlCall(ctx, r, body, &v, entry, check.RateCounter, penaltyBox); err != nil {
		return RateResult{}, err
	}
	return RateResult{Penalized: v.Penalized, PenaltyExpiresIn: millis(v.ExpiresMS), Rate: v.Rate}, nil
}

// CheckRates is CheckRate of two checks on two different counters of one
// entry, decided together: the entry goes into the box when either check
// goes above its limit.
func (c *Client) CheckRates(ctx context.Context, entry string, checks [2]RateCheck, penaltyBox string, ttl time.Duration) (RatesResult, error) {
	list := make([]map[string]any, len(checks))
	for i, ch := range checks {
		list[i] = map[string]any{"ratecounter": ch.RateCounter, "delta": ch.Delta, "window": ch.Window, "limit": ch.Limit}
	}
	body := map[string]any{"entry": entry, "checks": list, "penaltybox": penaltyBox, "ttl": ttl.String()}
	var v struct {
		Penalized bool      `json:"penalized"`
		Rates     []float64 `json:"rates"`
		Exceeded  []bool    `json:"exceeded"`
		ExpiresMS int64     `json:"penalty_expires_in_ms"`
	}
	r := request{method: http.MethodPost, path: "/v1/erl/check_rates", safety: sendOnce}
	if err := c.erlCall(ctx, r, body, &v, entry, checks[0].RateCounter, checks[1].RateCounter, penaltyBox); err != nil {
		return RatesResult{}, err
	}
	if len(v.Rates) != 2 || len(v.Exceeded) != 2 {
		return RatesResult{}, decodeError(r, fmt.Errorf("%d rates and %d exceeded, want 2 of each", len(v.Rates), len(v.Exceeded)))
	}
	return RatesResult{
		Penalized: v.Penalized, PenaltyExpiresIn: millis(v.ExpiresMS),
		Rates: [2]float64(v.Rates), Exceeded: [2]bool(v.Exceeded),
	}, nil
}

// Increment adds delta hits (0 to 1,000) to entry's counter of the
// rate-counter limit counter, and returns the entry's hits in the last
// minute's blocks after them (Fastly's bucket.60s).
func (c *Client) Increment(ctx context.Context, counter, entry string, delta int64) (int64, error) {
	var v struct {
		Bucket60s int64 `json:"bucket_60s"`
	}
	r := request{method: http.MethodPost, path: "/v1/erl/ratecounters/" + pathSegment(counter) + "/increment", safety: sendOnce}
	if err := c.erlCall(ctx, r, map[string]any{"entry": entry, "delta": delta}, &v, entry, counter); err != nil {
		return 0, err
	}
	return v.Bucket60s, nil
}

// RateCounter reads entry's counter of the rate-counter limit counter
// without changing it. An entry never counted reads as zeros.
func (c *Client) RateCounter(ctx context.Context, counter, entry string) (*RateCounterReading, error) {
	var v struct {
		Entry   string           `json:"entry"`
		Buckets map[string]int64 `json:"buckets"`
		Rates   struct {
			S1  float64 `json:"1s"`
			S10 float64 `json:"10s"`
			S60 float64 `json:"60s"`
		} `json:"rates"`
	}
	r := request{method: http.MethodGet, path: erlPath("ratecounters", counter, entry), safety: repeatable}
	if err := c.erlCall(ctx, r, nil, &v, entry, counter); err != nil {
		return nil, err
	}
	reading := &RateCounterReading{Entry: v.Entry, Rate1s: v.Rates.S1, Rate10s: v.Rates.S10, Rate60s: v.Rates.S60}
	for i := range reading.Buckets {
		reading.Buckets[i] = v.Buckets[fmt.Sprintf("%ds", 10*(i+1))]
	}
	return reading, nil
}

// PenaltyBoxAdd puts entry in the penalty box of the limit box for ttl (1
// to 60 minutes, rounded to the minute), replacing the expiry it had, and
// returns how long it now stays.
func (c *Client) PenaltyBoxAdd(ctx context.Context, box, entry string, ttl time.Duration) (time.Duration, error) {
	var v struct {
		ExpiresMS int64 `json:"penalty_expires_in_ms"`
	}
	r := request{method: http.MethodPost, path: "/v1/erl/penaltyboxes/" + pathSegment(box) + "/add", safety: repeatable}
	if err := c.erlCall(ctx, r, map[string]any{"entry": entry, "ttl": ttl.String()}, &v, entry, box); err != nil {
		return 0, err
	}
	return millis(v.ExpiresMS), nil
}

// PenaltyBoxHas reports whether entry is in the penalty box of the limit
// box, and for how long more.
func (c *Client) PenaltyBoxHas(ctx context.Context, box, entry string) (bool, time.Duration, error) {
	var v struct {
		Has       bool  `json:"has"`
		ExpiresMS int64 `json:"penalty_expires_in_ms"`
	}
	r := request{method: http.MethodGet, path: erlPath("penaltyboxes", box, entry), safety: repeatable}
	if err := c.erlCall(ctx, r, nil, &v, entry, box); err != nil {
		return false, 0, err
	}
	return v.Has, millis(v.ExpiresMS), nil
}

// PenaltyBoxRemove takes entry out of the penalty box of the limit box,
// and reports whether it was in it. It is an admin call. After a retry of
// a removal that the service had applied, it reports false.
func (c *Client) PenaltyBoxRemove(ctx context.Context, box, entry string) (bool, error) {
	var v struct {
		Removed bool `json:"removed"`
	}
	r := request{method: http.MethodPost, path: "/v1/erl/penaltyboxes/" + pathSegment(box) + "/remove", admin: true, safety: repeatable}
	if err := c.erlCall(ctx, r, map[string]any{"entry": entry}, &v, entry, box); err != nil {
		return false, err
	}
	return v.Removed, nil
}

// erlPath is a lookup's path: the name, then the entry as the rest of the
// path, both escaped.
func erlPath(kind, name, entry string) string {
	return "/v1/erl/" + kind + "/" + pathSegment(name) + "/" + pathSegment(entry)
}

// erlCall sends an ERL call with body (nil: none) and decodes its answer
// into v, after refusing strings JSON cannot carry unchanged.
func (c *Client) erlCall(ctx context.Context, r request, body map[string]any, v any, texts ...string) error {
	for _, s := range texts {
		if !utf8.ValidString(s) {
			return encodeError(r, fmt.Errorf("%w: %q", ErrInvalidUTF8, s))
		}
	}
	var err error
	if body != nil {
		r.body, err = json.Marshal(body)
	}
	return c.call(ctx, r, err, v)
}
