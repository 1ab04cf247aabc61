package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/limiter-dev/limiter/ratelimits"
)

// txnJSON is one transaction as sent. Pointers tell a missing field (or
// null) from a zero one: cost defaults to 1 only when it is absent.
type txnJSON struct {
	Limit *string `json:"limit"`
	ID    *string `json:"id"`
	Cost  *int64  `json:"cost"`
	Mode  *string `json:"mode"`
}

// requestJSON is either one transaction or {"transactions": [...]}.
// The batch is kept raw so that each transaction is decoded on its own and
// an error can say which one it was.
type requestJSON struct {
	txnJSON
	Transactions *[]json.RawMessage `json:"transactions"`
}

// bodyForm is what a body's transactions are for, which decides whether
// their modes mean anything.
type bodyForm int

const (
	// decisionBody: spend, check and refund, where a mode must be one of
	// the three.
	decisionBody bodyForm = iota
	// resetBody: reset deletes buckets whatever the mode, so a mode is
	// type-checked but not interpreted.
	resetBody
)

// readsMode reports whether transactions of this form interpret their mode.
func (f bodyForm) readsMode() bool { return f == decisionBody }

// decodeTransactions reads a request body into transactions, refusing
// anything the contract does not allow. It only parses: nothing is decided
// or written until the whole batch has been read and validated.
func (h *handler) decodeTransactions(r *http.Request, form bodyForm) ([]ratelimits.Transaction, *apiError) {
	if e := checkContentType(r); e != nil {
		return nil, e
	}
	// Every value decoded below is copied out of the body, so its buffer
	// goes back to the pool when decoding is done.
	bufp := h.bufs.Get().(*[]byte)
	body, e := readBody(r, h.maxBody, (*bufp)[:0])
	defer h.putBuffer(bufp, body)
	if e != nil {
		return nil, e
	}
	return decodeBody(body, h.maxBatch, form)
}

// decodeBody decodes a request body already read whole.
func decodeBody(body []byte, maxBatch int, form bodyForm) ([]ratelimits.Transaction, *apiError) {
	if !utf8.Valid(body) {
		// encoding/json would quietly turn invalid bytes into U+FFFD, making
		// a binary id into a different, valid-looking subscriber.
		return nil, badRequest(codeMalformedJSON, "the request body is not valid UTF-8", -1)
	}
	if txns, e, ok := decodeFast(body, maxBatch, form); ok {
		return txns, e
	}
	return decodeSlow(body, maxBatch, form)
}

// decodeSlow decodes any body with encoding/json, and words every error.
func decodeSlow(body []byte, maxBatch int, form bodyForm) ([]ratelimits.Transaction, *apiError) {
	if loneSurrogate(body) {
		// Checked here only: the fast path takes no escapes at all.
		return nil, badRequest(codeMalformedJSON, `the request body has a \u escape for half a UTF-16 surrogate pair (such as \ud800) without the other half; strings must be valid Unicode`, -1)
	}
	var req requestJSON
	// A body of one transaction is transaction 0: a fault in its fields
	// names it. A fault in the body's shape names no transaction, and
	// neither does one at the top of a batch.
	top := place{field: 0, shape: -1}
	batch, e := checkFieldNames(body, true, top)
	if e != nil {
		return nil, e
	}
	if batch {
		top.field = -1
	}
	if e := decodeStrict(body, &req, top); e != nil {
		return nil, e
	}
	if req.Transactions == nil {
		txn, e := req.txnJSON.transaction(0, form)
		if e != nil {
			return nil, e
		}
		return []ratelimits.Transaction{txn}, nil
	}
	if req.Limit != nil || req.ID != nil || req.Cost != nil || req.Mode != nil {
		return nil, badRequest(codeInvalidRequest, `send either one transaction or {"transactions": [...]}, not both`, -1)
	}
	raw := *req.Transactions
	if len(raw) == 0 {
		return nil, badRequest(codeEmptyBatch, "transactions is empty: send at least one", -1)
	}
	if maxBatch > 0 && len(raw) > maxBatch {
		return nil, badRequest(codeBatchTooLarge, fmt.Sprintf("%d transactions in one batch; at most %d are allowed", len(raw), maxBatch), -1)
	}
	txns := make([]ratelimits.Transaction, len(raw))
	for i, msg := range raw {
		var tj txnJSON
		if _, e := checkFieldNames(msg, false, place{i, i}); e != nil {
			return nil, e
		}
		if e := decodeStrict(msg, &tj, place{i, i}); e != nil {
			return nil, e
		}
		txn, e := tj.transaction(i, form)
		if e != nil {
			return nil, e
		}
		txns[i] = txn
	}
	return txns, nil
}

// loneSurrogate reports whether a \u escape in data stands for half of a
// UTF-16 surrogate pair without the other half. encoding/json decodes one
// as U+FFFD, as it does invalid UTF-8, so "\ud800", "\udc00" and "\ufffd"
// would all be the same id. A pair (\ud83d\ude00) is one character and
// fine. Other escapes are skipped whole, so the "\\" of "\\ud800" is not
// taken for the start of an escape.
func loneSurrogate(data []byte) bool {
	for i := bytes.IndexByte(data, '\\'); i >= 0 && i+1 < len(data); {
		next := i + 2 // past a two-character escape
		if data[i+1] == 'u' {
			r, ok := hex4(data[i+2:])
			next = i + 6
			switch {
			case !ok:
				// Not valid JSON: the decoder says so.
			case r >= 0xdc00 && r <= 0xdfff:
				return true // a second half first
			case r >= 0xd800 && r <= 0xdbff:
				rest := data[next:]
				if len(rest) < 2 || rest[0] != '\\' || rest[1] != 'u' {
					return true
				}
				low, ok := hex4(rest[2:])
				if !ok || low < 0xdc00 || low > 0xdfff {
					return true
				}
				next += 6
			}
		}
		if next >= len(data) {
			return false
		}
		j := bytes.IndexByte(data[next:], '\\')
		if j < 0 {
			return false
		}
		i = next + j
	}
	return false
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// transaction checks the fields' presence and mode and fills defaults.
func (tj *txnJSON) transaction(index int, form bodyForm) (ratelimits.Transaction, *apiError) {
	if tj.Limit == nil {
		return ratelimits.Transaction{}, badRequest(codeInvalidRequest, `"limit" is required`, index)
	}
	if tj.ID == nil {
		return ratelimits.Transaction{}, badRequest(codeInvalidRequest, `"id" is required`, index)
	}
	txn := ratelimits.Transaction{Limit: *tj.Limit, ID: *tj.ID, Cost: 1}
	if tj.Cost != nil {
		txn.Cost = *tj.Cost
	}
	if tj.Mode != nil && form.readsMode() {
		mode, err := parseMode(*tj.Mode)
		if err != nil {
			return ratelimits.Transaction{}, badRequest(codeInvalidMode, err.Error(), index)
		}
		txn.Mode = mode
	}
	return txn, nil
}

// parseMode reads a mode as sent in a request. Unlike ratelimits.ParseMode,
// which takes "" for the default, a mode that is sent must be one of the
// three the API names (docs/api.md); only a missing mode defaults.
func parseMode(s string) (ratelimits.Mode, error) {
	if s == "" {
		return 0, fmt.Errorf(`%w "": want check-and-spend, check-only or spend-only (or leave mode out for check-and-spend)`, ratelimits.ErrInvalidMode)
	}
	return ratelimits.ParseMode(s)
}

// checkContentType accepts application/json (with any parameters) and a
// missing Content-Type; anything else is 415.
func checkContentType(r *http.Request) *apiError {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mediaType, _, err := mime.ParseMediaType(ct)
	if err == nil && mediaType == "application/json" {
		return nil
	}
	return &apiError{
		status:      http.StatusUnsupportedMediaType,
		code:        codeUnsupportedType,
		message:     fmt.Sprintf("Content-Type %q is not application/json", ct),
		transaction: -1,
	}
}

// readBody reads the body into buf (growing it as needed) and returns it;
// a body over maxBody bytes is 413, and only maxBody+1 bytes are ever read.
func readBody(r *http.Request, maxBody int64, buf []byte) ([]byte, *apiError) {
	limited := io.LimitReader(r.Body, maxBody+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := limited.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return buf, badRequest(codeMalformedJSON, "reading the request body failed", -1)
		}
	}
	if int64(len(buf)) > maxBody {
		return buf, &apiError{
			status:      http.StatusRequestEntityTooLarge,
			code:        codeBodyTooLarge,
			message:     fmt.Sprintf("request body is larger than %d bytes", maxBody),
			transaction: -1,
		}
	}
	return buf, nil
}

// fieldIndex numbers the field names a body may use: those of a
// transaction, then "transactions" (top level only). -1 for any other.
func fieldIndex(name string) int {
	switch name {
	case "limit":
		return 0
	case "id":
		return 1
	case "cost":
		return 2
	case "mode":
		return 3
	case "transactions":
		return 4
	}
	return -1
}

// checkFieldNames refuses an object with a field not named exactly as the
// API names it, or with a field given twice ("transactions" is allowed at
// the top level only). encoding/json alone would take "LIMIT" for "limit"
// (it matches names case-insensitively) and keep the last of two "id"s: a
// body that a proxy or a log reader in front of this service may read
// differently. Anything that is not an object is left to decodeStrict,
// which words the error.
//
// It also reports whether the object has a "transactions" field. At the
// top level that decides what a fault in a field names (at.field, the
// lone transaction, or nothing in a batch), so there the walk goes on past
// the first such fault, as far as the body is valid JSON, to find out; the
// fault reported is still the first one met.
func checkFieldNames(data []byte, topLevel bool, at place) (hasTransactions bool, e *apiError) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false, nil
	}
	var seen [5]bool
	var code, message string // the first fault in a field, once met
	for dec.More() {
		tok, err := dec.Token()
		if err == nil {
			key, _ := tok.(string)
			i := fieldIndex(key)
			known := i >= 0 && (i != 4 || topLevel)
			switch {
			case code != "":
				// Past the first fault: only looking for "transactions".
			case !known:
				code, message = codeUnknownField, fmt.Sprintf("unknown field %q", key)
			case seen[i] && i == 4:
				return true, badRequest(codeInvalidRequest, `field "transactions" appears twice`, at.shape)
			case seen[i]:
				code, message = codeInvalidRequest, fmt.Sprintf("field %q appears twice", key)
			}
			if known {
				seen[i] = true
			}
			if code != "" && !topLevel {
				break
			}
			var skip json.RawMessage
			err = dec.Decode(&skip)
			if err == nil && known && code == "" && string(skip) == "null" {
				// encoding/json would leave the field as if it were absent:
				// a null cost would spend 1, a null mode check-and-spend.
				if i == 4 {
					return true, badRequest(codeInvalidRequest, "transactions must be an array of transaction objects, got null", at.shape)
				}
				code, message = nullField(key)
				if !topLevel {
					break
				}
			}
		}
		if err != nil {
			if code != "" {
				break
			}
			return seen[4], decodeError(err, at)
		}
	}
	if code == "" {
		return seen[4], nil
	}
	if seen[4] {
		at.field = -1 // a batch: the fault is the body's
	}
	return seen[4], badRequest(code, message, at.field)
}

// nullField words the fault of a transaction field sent as null, as
// decodeError words a field of another wrong type.
func nullField(key string) (code, message string) {
	if key == "cost" {
		return codeInvalidCost, "cost must be a whole number from 0 to the limit's burst, got null"
	}
	return codeInvalidRequest, fmt.Sprintf("%q must be a string, got null", key)
}

// decodeStrict decodes exactly one JSON object into v: null, unknown
// fields, wrong types, fractional or out-of-range numbers and trailing data
// are all refused with a message that names the problem.
func decodeStrict(data []byte, v any, at place) *apiError {
	return decodeStrictAs(data, v, at, decodeError)
}

// decodeStrictAs is decodeStrict with the decoder's errors worded by
// words, for a body whose fields have codes of their own.
func decodeStrictAs(data []byte, v any, at place, words func(error, place) *apiError) *apiError {
	if len(bytes.TrimSpace(data)) == 0 {
		return badRequest(codeMalformedJSON, "the request body is empty; send a JSON object", at.shape)
	}
	if string(bytes.TrimSpace(data)) == "null" {
		// encoding/json would take it for an empty object.
		return badRequest(codeInvalidRequest, "expected a JSON object, got null", at.shape)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return words(err, at)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest(codeMalformedJSON, "unexpected data after the JSON object", at.shape)
	}
	return nil
}

// place is where the part of a body being decoded sits, and so which
// transaction an error found there names: a fault in one of a
// transaction's fields names that transaction (field), a fault in the
// shape of the part itself (not JSON, not an object, data after it) names
// one only when the part is a transaction of a batch (shape). -1 names
// none.
type place struct{ field, shape int }

// noTransaction is the place of a body that holds no transaction.
var noTransaction = place{-1, -1}

// decodeError turns an encoding/json error into the API's words.
func decodeError(err error, at place) *apiError {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if i := strings.LastIndexByte(field, '.'); i >= 0 {
			field = field[i+1:]
		}
		switch field {
		case "":
			return badRequest(codeInvalidRequest, fmt.Sprintf("expected a JSON object, got %s", typeErr.Value), at.shape)
		case "cost":
			return badRequest(codeInvalidCost, fmt.Sprintf("cost must be a whole number from 0 to the limit's burst, got %s", typeErr.Value), at.field)
		case "transactions":
			return badRequest(codeInvalidRequest, "transactions must be an array of transaction objects", at.shape)
		}
		return badRequest(codeInvalidRequest, fmt.Sprintf("%q must be a %s, got %s", field, typeErr.Type, typeErr.Value), at.field)
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return badRequest(codeMalformedJSON, "the request body is not valid JSON: "+err.Error(), at.shape)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		// encoding/json has no error type for this one.
		return badRequest(codeUnknownField, strings.TrimPrefix(err.Error(), "json: "), at.field)
	}
	return badRequest(codeMalformedJSON, "the request body is not valid JSON: "+err.Error(), at.shape)
}
