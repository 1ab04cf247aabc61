package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
)

// apiError is a refusal the client can act on: a status, a stable
// machine-readable code, a sentence for people, and which transaction of
// the batch it concerns (when one does).
type apiError struct {
	status      int
	code        string
	message     string
	transaction int // -1: not about one transaction
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// Error codes: stable strings clients can switch on.
const (
	codeMalformedJSON         = "malformed_json"
	codeUnknownField          = "unknown_field"
	codeInvalidRequest        = "invalid_request"
	codeEmptyBatch            = "empty_batch"
	codeBatchTooLarge         = "batch_too_large"
	codeUnknownLimit          = "unknown_limit"
	codeInvalidID             = "invalid_id"
	codeInvalidCost           = "invalid_cost"
	codeInvalidMode           = "invalid_mode"
	codeDuplicateBucket       = "duplicate_bucket"
	codeInvalidArgument       = "invalid_argument"
	codeInvalidLease          = "invalid_lease"
	codeBodyTooLarge          = "body_too_large"
	codeUnsupportedType       = "unsupported_media_type"
	codeUnavailable           = "source_unavailable"
	codeOutcomeUnknown        = "source_outcome_unknown"
	codeInvalidIdempotencyKey = "invalid_idempotency_key"
	codeIdempotencyKeyReused  = "idempotency_key_reused"
	codeIdempotencyUnsettled  = "idempotency_key_unsettled"
	codeNotFound              = "not_found"
	codeUnauthorized          = "unauthorized"
	codeReloadFailed          = "reload_failed"
	codeMethod                = "method_not_allowed"
	codeInternal              = "internal"
)

// badRequest is a 400, its message cut as cutMessage cuts it.
func badRequest(code, message string, transaction int) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, message: cutMessage(message), transaction: transaction}
}

// cutMessage bounds the message of a refusal that may quote what the
// client sent (a name, an id, a number, a header, a path), which can be
// as long as the body or the headers: past maxMessageBytes it is cut, at
// a character's start, and says so, so that no refusal is larger than
// what it needs to say.
func cutMessage(message string) string {
	if len(message) <= maxMessageBytes {
		return message
	}
	cut := maxMessageBytes
	for cut > 0 && !utf8.RuneStart(message[cut]) {
		cut--
	}
	return message[:cut] + "… (" + strconv.Itoa(len(message)) + " bytes, cut)"
}

// maxMessageBytes bounds a message that quotes the client. A message about a name and an
// id of valid lengths (ratelimits.MaxLimitNameLength, 256 bytes) fits
// whole.
const maxMessageBytes = 1024

// limiterError maps an error from the Limiter to what the client sees.
// Validation errors are the client's (400); anything else means the source
// failed (503), since the Limiter produces no other kind.
func limiterError(err error) *apiError {
	index, message := -1, err.Error()
	var te *ratelimits.TransactionError
	if errors.As(err, &te) {
		// The index travels in its own field; the message need not repeat it.
		index, message = te.Index, te.Err.Error()
	}
	for _, m := range []struct {
		target error
		code   string
	}{
		{ratelimits.ErrEmptyBatch, codeEmptyBatch},
		{ratelimits.ErrUnknownLimit, codeUnknownLimit},
		{ratelimits.ErrInvalidID, codeInvalidID},
		{ratelimits.ErrInvalidCost, codeInvalidCost},
		{ratelimits.ErrInvalidMode, codeInvalidMode},
		{ratelimits.ErrDuplicateBucket, codeDuplicateBucket},
		// An ERL call's value out of range, a rate counter that is not
		// one, a penalty box of a limit that has none.
		{ratelimits.ErrInvalidArgument, codeInvalidArgument},
		{ratelimits.ErrNotRateCounter, codeInvalidArgument},
		{ratelimits.ErrNoBox, codeInvalidArgument},
		// A release or renew of a lease the service could not have made,
		// or of a limit that is not a concurrency limit; a refund of one
		// that is.
		{ratelimits.ErrInvalidLease, codeInvalidLease},
		{ratelimits.ErrNotConcurrency, codeInvalidRequest},
		{ratelimits.ErrConcurrencyRefund, codeInvalidRequest},
	} {
		if errors.Is(err, m.target) {
			return badRequest(m.code, message, index)
		}
	}
	switch {
	case errors.Is(err, ratelimits.ErrInvalidIdempotencyKey):
		// Refused for a transaction's limit (ErrBoxIdempotency, a window
		// that syncs), index names it.
		return badRequest(codeInvalidIdempotencyKey, message, index)
	case errors.Is(err, ratelimits.ErrIdempotencyMismatch):
		return &apiError{status: http.StatusUnprocessableEntity, code: codeIdempotencyKeyReused, transaction: -1,
			message: "this Idempotency-Key was already used for a different request (other transactions, or the same ones while their limits were different); nothing was done"}
	case errors.Is(err, ratelimits.ErrIdempotencyUnsettled):
		return &apiError{status: http.StatusConflict, code: codeIdempotencyUnsettled, transaction: -1,
			message: "the first request with this Idempotency-Key is still running or failed with an unknown outcome; nothing was done (retry later; it is answered once its outcome is known, or decided anew once the key expires)"}
	case errors.Is(err, ratelimits.ErrNotApplied):
		return &apiError{status: http.StatusServiceUnavailable, code: codeUnavailable, transaction: -1,
			message: "the bucket store could not be reached; nothing was decided or changed, so the request can be retried"}
	}
	return &apiError{
		status: http.StatusServiceUnavailable,
		code:   codeOutcomeUnknown,
		message: "the bucket store did not answer in time; the request may or may not have taken effect " +
			"(send spends and refunds with an Idempotency-Key, and retry with the same key to learn which without applying them twice)",
		transaction: -1,
	}
}

// writeError sends e as the JSON error shape of the API.
func writeError(w http.ResponseWriter, e *apiError) {
	body := wire.ErrorResponse{Error: wire.ErrorDetail{Code: e.code, Message: e.message}}
	if e.transaction >= 0 {
		body.Error.Transaction = &e.transaction
	}
	writeJSON(w, e.status, body)
}

// writeJSON sends v with status. Values given to it always encode.
//
// '<', '>' and '&' are written as they are, not escaped for HTML as
// json.Marshal escapes them: the answer is application/json with nosniff,
// never HTML, and a message such as "Authorization: Bearer <token>" must
// read the same on the wire as in the docs. The decisions' own encoder
// (appendString) writes them unescaped too.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // Encode ends the value with '\n'
		// Unreachable for the types this package sends; say so plainly.
		status = http.StatusInternalServerError
		b.Reset()
		b.WriteString(`{"error":{"code":"internal","message":"response encoding failed"}}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}
