// Package headers formats the RateLimit-Policy, RateLimit and Retry-After
// headers of a batch decision, once, for every front end that sends them:
// the HTTP API on its answers, and Envoy's rate-limit service in the
// headers it asks Envoy to add to the client's response.
package headers

import (
	"strconv"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
)

// Canonical names, as net/http spells header keys.
const (
	Policy     = "Ratelimit-Policy"
	RateLimit  = "Ratelimit"
	RetryAfter = "Retry-After"
)

// Values holds the three header values of one answer. They share one
// string, so formatting them costs one allocation.
type Values struct {
	Policy     string // `"<limit>";q=<count>;w=<window in whole seconds, at least 1>`, or for a concurrency limit `"<limit>";q=<count>;qu="concurrent-requests"`
	RateLimit  string // `"<limit>";r=<remaining>;t=<reset in whole seconds, rounded up>`
	RetryAfter string // whole seconds, rounded up, at least 1; empty when allowed
}

// For returns the headers of bd, all from its deciding transaction, and
// false when no transaction decides it (all spend-only, shadow or
// unlimited): such an answer carries none. Retry-After is set only when
// the batch is denied.
func For(bd *ratelimits.BatchDecision) (Values, bool) {
	if bd.Deciding < 0 {
		return Values{}, false
	}
	d := &bd.Decisions[bd.Deciding]
	var scratch [192]byte
	buf := strconv.AppendQuote(scratch[:0], d.Limit)
	buf = append(buf, ";q="...)
	buf = strconv.AppendInt(buf, d.Effective.Count, 10)
	if d.Algorithm == ratelimits.Concurrency {
		// Slots held at once, not a quota over a window.
		buf = append(buf, `;qu="concurrent-requests"`...)
	} else {
		buf = append(buf, ";w="...)
		// The window is whole seconds, truncated, and never 0: a calendar
		// limit's is its current period's.
		buf = strconv.AppendInt(buf, max(int64(d.Window()/time.Second), 1), 10)
	}
	policyEnd := len(buf)
	buf = strconv.AppendQuote(buf, d.Limit)
	buf = append(buf, ";r="...)
	buf = strconv.AppendInt(buf, max(d.Remaining, 0), 10)
	buf = append(buf, ";t="...)
	buf = strconv.AppendInt(buf, SecondsUp(d.ResetIn), 10)
	limitEnd := len(buf)
	if !bd.Allowed {
		buf = strconv.AppendInt(buf, max(SecondsUp(bd.RetryIn), 1), 10)
	}
	s := string(buf)
	return Values{Policy: s[:policyEnd], RateLimit: s[policyEnd:limitEnd], RetryAfter: s[limitEnd:]}, true
}

// SecondsUp is d in whole seconds, rounded up, so that a client that waits
// it is never early; 0 for d <= 0.
func SecondsUp(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	q := int64(d / time.Second)
	if d%time.Second != 0 {
		q++
	}
	return q
}
