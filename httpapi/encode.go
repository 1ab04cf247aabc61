package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/limiter-dev/limiter/httpapi/headers"
	"github.com/limiter-dev/limiter/ratelimits"
)

// ceilDiv divides a non-negative duration by unit, rounding up, so that a
// client that waits the answer is never early (1ns -> 1ms).
func ceilDiv(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	q := int64(d / unit)
	if d%unit != 0 {
		q++
	}
	return q
}

func millisUp(d time.Duration) int64 { return ceilDiv(d, time.Millisecond) }

// setRateLimitHeaders writes RateLimit-Policy, RateLimit and, when the
// batch is denied, Retry-After, all from the deciding transaction. A batch
// that no transaction decides (all spend-only, shadow or unlimited) gets
// none.
func setRateLimitHeaders(h http.Header, bd *ratelimits.BatchDecision) {
	v, ok := headers.For(bd)
	if !ok {
		return
	}
	// The header slices share one array: one allocation beside the
	// values' string.
	values := new([3]string)
	values[0], values[1], values[2] = v.Policy, v.RateLimit, v.RetryAfter
	h[headers.Policy] = values[0:1:1]
	h[headers.RateLimit] = values[1:2:2]
	if !bd.Allowed {
		h[headers.RetryAfter] = values[2:3:3]
	}
}

// appendBatch encodes a batch decision as wire.BatchResponse, newline
// included. It is written by hand because it is on every request's path:
// no reflection, one buffer. A test holds it to what encoding/json writes
// for the wire types, byte for byte.
func appendBatch(buf []byte, bd *ratelimits.BatchDecision) []byte {
	return appendBatchOf(buf, bd, bd.Decisions)
}

// appendBatchOf is appendBatch with decisions in place of bd's own: the
// batch fields of bd and only those decisions, for a forward-auth rule
// that shows the deciding one alone.
func appendBatchOf(buf []byte, bd *ratelimits.BatchDecision, decisions []ratelimits.Decision) []byte {
	buf = append(buf, '{')
	buf = appendFigures(buf, bd.Allowed, bd.Remaining, bd.RetryIn, bd.ResetIn)
	if bd.Degraded {
		buf = append(buf, `,"degraded":true`...)
	}
	buf = append(buf, `,"decisions":[`...)
	for i := range decisions {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendDecision(buf, &decisions[i], false)
	}
	return append(buf, "]}\n"...)
}

// appendDecision encodes one transaction's decision as
// wire.DecisionResponse: penalized for a limit that has a penalty box, and
// with withSyncRate a window or rate-counter limit's sync_rate, as the
// answer of GET /v1/limits/{limit}/{id} does.
func appendDecision(buf []byte, d *ratelimits.Decision, withSyncRate bool) []byte {
	buf = append(buf, `{"limit":`...)
	buf = appendString(buf, d.Limit)
	buf = append(buf, `,"id":`...)
	buf = appendString(buf, d.ID)
	buf = append(buf, ',')
	buf = appendFigures(buf, d.Allowed, d.Remaining, d.RetryIn, d.ResetIn)
	buf = append(buf, `,"unlimited":`...)
	buf = strconv.AppendBool(buf, d.Unlimited)
	buf = append(buf, `,"burst":`...)
	buf = strconv.AppendInt(buf, d.Effective.Burst, 10)
	buf = append(buf, `,"count":`...)
	buf = strconv.AppendInt(buf, d.Effective.Count, 10)
	buf = append(buf, `,"period":`...)
	buf = appendString(buf, d.PeriodName())
	buf = append(buf, `,"override":`...)
	buf = strconv.AppendBool(buf, d.Effective.Override)
	buf = append(buf, `,"algorithm":`...)
	buf = appendString(buf, d.Algorithm.String())
	if d.Effective.Calendar != nil {
		buf = append(buf, `,"timezone":`...)
		buf = appendString(buf, d.Effective.Calendar.Zone())
		buf = append(buf, `,"period_end":"`...)
		buf = appendPeriodEnd(buf, d.Period.End)
		buf = append(buf, '"')
	}
	if d.Effective.HasBox() {
		buf = append(buf, `,"penalized":`...)
		buf = strconv.AppendBool(buf, d.Penalized)
	}
	if d.Shadow {
		buf = append(buf, `,"shadow":true`...)
	}
	if d.Lease != "" {
		buf = append(buf, `,"lease":`...)
		buf = appendString(buf, d.Lease)
		buf = append(buf, `,"lease_expires_in_ms":`...)
		buf = strconv.AppendInt(buf, millisUp(d.LeaseExpiresIn), 10)
	}
	if withSyncRate && showsSyncRate(d) {
		buf = append(buf, `,"sync_rate":`...)
		buf = appendFloat(buf, d.Effective.SyncRate.Seconds())
	}
	return append(buf, '}')
}

// showsSyncRate reports whether the subscriber view of d shows a
// sync_rate: only window and rate-counter limits have one, and an
// unlimited transaction has no limit to show.
func showsSyncRate(d *ratelimits.Decision) bool {
	return !d.Unlimited && hasSyncRate(d.Effective.Algorithm)
}

// appendFloat appends f as encoding/json writes a float64: the shortest
// decimal that reads back as f, in exponent form below 1e-6 and from 1e21
// on, with a one-digit exponent written without a leading zero.
func appendFloat(buf []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 becomes 1e-7.
		if n := len(buf); n >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	}
	return buf
}

// appendPeriodEnd appends the instant ms (unix ms) as RFC 3339 in UTC
// with milliseconds, "2026-12-31T23:00:00.000Z".
func appendPeriodEnd(buf []byte, ms int64) []byte {
	return time.UnixMilli(ms).UTC().AppendFormat(buf, periodEndFormat)
}

// periodEndFormat is RFC 3339 in UTC with exactly three decimals.
const periodEndFormat = "2006-01-02T15:04:05.000Z"

// appendFigures encodes the fields a batch and a decision share: allowed,
// remaining (never negative) and the two durations in milliseconds,
// rounded up.
func appendFigures(buf []byte, allowed bool, remaining int64, retryIn, resetIn time.Duration) []byte {
	buf = append(buf, `"allowed":`...)
	buf = strconv.AppendBool(buf, allowed)
	buf = append(buf, `,"remaining":`...)
	buf = strconv.AppendInt(buf, max(remaining, 0), 10)
	buf = append(buf, `,"retry_in_ms":`...)
	buf = strconv.AppendInt(buf, millisUp(retryIn), 10)
	buf = append(buf, `,"reset_in_ms":`...)
	return strconv.AppendInt(buf, millisUp(resetIn), 10)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, byte for byte as encoding/json
// writes it without HTML escaping: quotes, backslashes and control
// characters escaped (\b, \f, \n, \r and \t by their short forms), U+2028
// and U+2029 escaped for JavaScript's sake, and invalid UTF-8 written as
// U+FFFD, so the output is always valid JSON.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\t':
				buf = append(buf, '\\', 't')
			case '\r':
				buf = append(buf, '\\', 'r')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
