package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The API's error codes: stable strings to switch on (with IsCode or
// Error.Code). A newer service may send others.
const (
	CodeMalformedJSON           = "malformed_json"
	CodeUnknownField            = "unknown_field"
	CodeInvalidRequest          = "invalid_request"
	CodeEmptyBatch              = "empty_batch"
	CodeBatchTooLarge           = "batch_too_large"
	CodeUnknownLimit            = "unknown_limit"
	CodeInvalidID               = "invalid_id"
	CodeInvalidCost             = "invalid_cost"
	CodeInvalidArgument         = "invalid_argument"
	CodeInvalidMode             = "invalid_mode"
	CodeInvalidLease            = "invalid_lease"
	CodeDuplicateBucket         = "duplicate_bucket"
	CodeUnauthorized            = "unauthorized"
	CodeNotFound                = "not_found"
	CodeMethodNotAllowed        = "method_not_allowed"
	CodeBodyTooLarge            = "body_too_large"
	CodeUnsupportedMediaType    = "unsupported_media_type"
	CodeReloadFailed            = "reload_failed"
	CodeInternal                = "internal"
	CodeInvalidIdempotencyKey   = "invalid_idempotency_key"
	CodeIdempotencyKeyUnsettled = "idempotency_key_unsettled"
	CodeIdempotencyKeyReused    = "idempotency_key_reused"
	// CodeSourceUnavailable: the service could not reach its bucket
	// store, and nothing was decided or changed.
	CodeSourceUnavailable = "source_unavailable"
	// CodeSourceOutcomeUnknown: the store did not answer in time after
	// the call reached it, so a spend, refund or reset may or may not
	// have taken effect.
	CodeSourceOutcomeUnknown = "source_outcome_unknown"
	CodeSyncFailed           = "sync_failed"
	CodeTopUnavailable       = "top_unavailable"
	CodeNotImplemented       = "not_implemented"
)

// ErrUnexpectedAnswer is wrapped by the error of a call whose successful
// answer the client could not read: not the API's JSON, or a field out of
// its form. The service may have acted on the call.
var ErrUnexpectedAnswer = errors.New("unexpected answer")

// Error is a refusal from the service, or from whatever answered in its
// place: every answer with a status of 400 or more is one. Get it with
// errors.As.
type Error struct {
	// Method and Path are the request's ("POST", "/v1/spend").
	Method string
	Path   string
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the API's error code (CodeInvalidID, ...); empty when the
	// answer was not the API's JSON error, such as a proxy's HTML page.
	Code string
	// Message explains the refusal for people. For an answer that was not
	// the API's, it is the start of its body.
	Message string
	// Transaction is the index of the transaction at fault in the batch
	// sent (0 for a call of one transaction), or -1 when the fault is not
	// one transaction's.
	Transaction int
	// RetryAfter is the answer's Retry-After, 0 when it had none.
	RetryAfter time.Duration
	// Attempts is how many requests the call made, this one included.
	Attempts int
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "limiter: %s %s: %d", e.Method, e.Path, e.StatusCode)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	} else {
		b.WriteString(" " + http.StatusText(e.StatusCode) + " (not an API error)")
	}
	if e.Transaction >= 0 {
		fmt.Fprintf(&b, " (transaction %d)", e.Transaction)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	return b.String()
}

// IsCode reports whether err is, or wraps, an *Error with the API error
// code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// errorJSON is the body of the API's error answers.
type errorJSON struct {
	Error *struct {
		Code        string `json:"code"`
		Message     string `json:"message"`
		Transaction *int   `json:"transaction"`
	} `json:"error"`
}

// snippetBytes bounds how much of an answer that is not the API's error
// goes into Error.Message.
const snippetBytes = 200

// newError reads an answer of status 400 or above. The API's JSON error
// gives its code, message and transaction; anything else gives a snippet
// of the body as the message, and no code.
func newError(method, path string, status int, h http.Header, body []byte, now time.Time) *Error {
	e := &Error{Method: method, Path: path, StatusCode: status, Transaction: -1}
	e.RetryAfter = parseRetryAfter(h.Get("Retry-After"), now)
	var j errorJSON
	if json.Unmarshal(body, &j) == nil && j.Error != nil && j.Error.Code != "" {
		e.Code, e.Message = j.Error.Code, j.Error.Message
		if j.Error.Transaction != nil {
			e.Transaction = *j.Error.Transaction
		}
		return e
	}
	e.Message = snippet(body)
	return e
}

// snippet is the start of body as one line of printable text.
func snippet(body []byte) string {
	s := strings.ToValidUTF8(string(body), "\uFFFD")
	if len(s) > snippetBytes {
		cut := snippetBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// parseRetryAfter reads a Retry-After value: whole seconds, or an HTTP
// date, which is counted from now. An absent, malformed or past value is
// 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		if n > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(n) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	if d := t.Sub(now); d > 0 {
		return d
	}
	return 0
}

// maxRetryAfter bounds a Retry-After in seconds, so that a huge value
// cannot overflow a Duration.
const maxRetryAfter = 365 * 24 * time.Hour
