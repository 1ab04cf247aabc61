package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
)

// The fields of the ERL bodies, as the API names them (docs/api.md). Every
// field of a body is required.
var (
	checkRateFields  = []string{"entry", "ratecounter", "delta", "window", "limit", "penaltybox", "ttl"}
	checkRatesFields = []string{"entry", "checks", "penaltybox", "ttl"}
	rateCheckFields  = []string{"ratecounter", "delta", "window", "limit"}
	incrementFields  = []string{"entry", "delta"}
	boxAddFields     = []string{"entry", "ttl"}
	boxRemoveFields  = []string{"entry"}
)

// erlValueFields are the fields whose values have ranges: a wrong type,
// null, or a number that is not a whole int64 is invalid_argument, as a
// value out of range is. The other fields name things (an entry, a
// counter, a box) and follow the transactions' rules.
var erlValueFields = []string{"delta", "window", "limit", "ttl"}

// erlValueWant words what a value field takes, for its refusals.
func erlValueWant(field string) string {
	switch field {
	case "ttl":
		return `ttl must be a Go duration from 1m to 1h, such as "10m"`
	case "window":
		return "window must be a number of seconds: 1, 10 or 60"
	case "limit":
		return fmt.Sprintf("limit must be a whole number of hits per second from %d to %d", ratelimits.MinRate, ratelimits.MaxRate)
	}
	return "delta must be a whole number of hits"
}

// decodeERL reads the body of an ERL call into v (a pointer to one of the
// wire request types) under the rules of every body of the API (content
// type, size, valid Unicode, exact field names, each once, no null), with
// fields as the only names allowed at the top and checkFields in the
// elements of "checks". Nothing is validated beyond the JSON: the Limiter
// checks the values, before it changes anything.
func (h *handler) decodeERL(r *http.Request, v any, fields, checkFields []string) *apiError {
	if e := checkContentType(r); e != nil {
		return e
	}
	bufp := h.bufs.Get().(*[]byte)
	body, e := readBody(r, h.maxBody, (*bufp)[:0])
	defer h.putBuffer(bufp, body)
	if e != nil {
		return e
	}
	return decodeERLBody(body, v, fields, checkFields)
}

// decodeERLBody decodes a body already read whole, for decodeERL.
func decodeERLBody(body []byte, v any, fields, checkFields []string) *apiError {
	if !utf8.Valid(body) {
		return badRequest(codeMalformedJSON, "the request body is not valid UTF-8", -1)
	}
	if loneSurrogate(body) {
		return badRequest(codeMalformedJSON, `the request body has a \u escape for half a UTF-16 surrogate pair (such as \ud800) without the other half; strings must be valid Unicode`, -1)
	}
	if e := checkERLFields(body, fields, checkFields, ""); e != nil {
		return e
	}
	return decodeStrictAs(body, v, noTransaction, erlDecodeError)
}

// checkERLFields refuses, in an object, a field not named exactly as the
// API names it (encoding/json would match "ENTRY" to "entry"), a field
// given twice (encoding/json would keep the last), and a null (which
// encoding/json would take for a missing field). The elements of
// "checks" are held to checkFields the same way; where says which element
// is read. Anything that is not JSON or not an object is left to the
// decoder, which words the error, so the fault reported is the first one
// met reading from the start.
func checkERLFields(data []byte, fields, checkFields []string, where string) *apiError {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := make([]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		i := slices.Index(fields, key)
		switch {
		case i < 0:
			return badRequest(codeUnknownField, fmt.Sprintf("unknown field %q%s (allowed: %s)", key, where, strings.Join(fields, ", ")), -1)
		case seen[i]:
			return badRequest(codeInvalidRequest, fmt.Sprintf("field %q appears twice%s", key, where), -1)
		}
		seen[i] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil
		}
		if string(raw) == "null" {
			return nullERLField(key, where)
		}
		if key != "checks" {
			continue
		}
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			continue // not an array: the decoder says so
		}
		for j, elem := range elems {
			if string(elem) == "null" {
				return badRequest(codeInvalidRequest, fmt.Sprintf("checks[%d] must be an object, got null", j), -1)
			}
			if e := checkERLFields(elem, checkFields, nil, fmt.Sprintf(" in checks[%d]", j)); e != nil {
				return e
			}
		}
	}
	return nil
}

// nullERLField words the refusal of a field sent as null.
func nullERLField(key, where string) *apiError {
	if slices.Contains(erlValueFields, key) {
		return badRequest(codeInvalidArgument, erlValueWant(key)+", got null"+where, -1)
	}
	return badRequest(codeInvalidRequest, fmt.Sprintf("%q%s must not be null", key, where), -1)
}

// erlDecodeError words a decoding error of an ERL body: a value field of
// the wrong type (a string delta, a fractional or huge window, a number
// ttl) is invalid_argument; anything else as in a transaction body.
func erlDecodeError(err error, at place) *apiError {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		if i := strings.LastIndexByte(field, '.'); i >= 0 {
			field = field[i+1:]
		}
		if slices.Contains(erlValueFields, field) {
			return badRequest(codeInvalidArgument, fmt.Sprintf("%s, got %s", erlValueWant(field), typeErr.Value), -1)
		}
		if field == "checks" {
			return badRequest(codeInvalidRequest, "checks must be an array of two check objects", -1)
		}
	}
	return decodeError(err, at)
}

// required refuses a request whose field named names[i] is missing
// (present[i] false): every field of an ERL body is required.
func required(names []string, present ...bool) *apiError {
	for i, ok := range present {
		if !ok {
			return badRequest(codeInvalidRequest, fmt.Sprintf("%q is required", names[i]), -1)
		}
	}
	return nil
}

// parseTTL reads an ERL TTL as sent: a Go duration. Its range is the
// Limiter's to check.
func parseTTL(s string) (time.Duration, *apiError) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, badRequest(codeInvalidArgument, fmt.Sprintf("%s, got %q", erlValueWant("ttl"), s), -1)
	}
	return d, nil
}

// rateCheck is one check of a check_rate or check_rates body, validated
// for presence.
func rateCheck(c wire.RateCheckRequest, where string) (ratelimits.RateCheck, *apiError) {
	for i, ok := range []bool{c.RateCounter != nil, c.Delta != nil, c.Window != nil, c.Limit != nil} {
		if !ok {
			return ratelimits.RateCheck{}, badRequest(codeInvalidRequest, fmt.Sprintf("%q%s is required", rateCheckFields[i], where), -1)
		}
	}
	return ratelimits.RateCheck{Counter: *c.RateCounter, Delta: *c.Delta, Window: *c.Window, Limit: *c.Limit}, nil
}
