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

// The fields of the ERL bodies, as the API names them (docs/api.md) and
// the wire request types spell them. Every field of a body is required.
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

// erlArgs are the fields of any ERL body, once read: each call's fields
// are all there (decodeERL checks), the others zero.
type erlArgs struct {
	entry, rateCounter, penaltyBox, ttl string
	delta, window, limit                int64
	checks                              []ratelimits.RateCheck
}

// erlBody is any ERL body as encoding/json reads it: pointers tell a
// missing field from a zero one. It has the fields of every call; which
// ones a body may have is checked by name before it is decoded.
type erlBody struct {
	Entry       *string                  `json:"entry"`
	RateCounter *string                  `json:"ratecounter"`
	Delta       *int64                   `json:"delta"`
	Window      *int64                   `json:"window"`
	Limit       *int64                   `json:"limit"`
	PenaltyBox  *string                  `json:"penaltybox"`
	TTL         *string                  `json:"ttl"`
	Checks      *[]wire.RateCheckRequest `json:"checks"`
}

// decodeERL reads the body of an ERL call whose fields are fields (and,
// in each element of "checks", checkFields) under the rules of every body
// of the API: content type, size, valid Unicode, exact field names, each
// once, no null, all of them there. Values are not checked beyond their
// JSON types: the Limiter checks them all before it changes anything.
func (h *handler) decodeERL(r *http.Request, fields, checkFields []string) (erlArgs, *apiError) {
	if e := checkContentType(r); e != nil {
		return erlArgs{}, e
	}
	bufp := h.bufs.Get().(*[]byte)
	body, e := readBody(r, h.maxBody, (*bufp)[:0])
	defer h.putBuffer(bufp, body)
	if e != nil {
		return erlArgs{}, e
	}
	return decodeERLBody(body, fields, checkFields)
}

// decodeERLBody decodes a body already read whole, for decodeERL: with
// decodeERLFast when it can, else with encoding/json, which words every
// error.
func decodeERLBody(body []byte, fields, checkFields []string) (erlArgs, *apiError) {
	if !utf8.Valid(body) {
		return erlArgs{}, badRequest(codeMalformedJSON, "the request body is not valid UTF-8", -1)
	}
	if a, ok := decodeERLFast(body, fields, checkFields); ok {
		return a, nil
	}
	return decodeERLSlow(body, fields, checkFields)
}

// decodeERLSlow decodes any ERL body with encoding/json.
func decodeERLSlow(body []byte, fields, checkFields []string) (erlArgs, *apiError) {
	if loneSurrogate(body) {
		return erlArgs{}, badRequest(codeMalformedJSON, `the request body has a \u escape for half a UTF-16 surrogate pair (such as \ud800) without the other half; strings must be valid Unicode`, -1)
	}
	if e := checkERLFields(body, fields, checkFields, ""); e != nil {
		return erlArgs{}, e
	}
	var b erlBody
	if e := decodeStrictAs(body, &b, noTransaction, erlDecodeError); e != nil {
		return erlArgs{}, e
	}
	var a erlArgs
	for _, f := range fields {
		present := true
		switch f {
		case "entry":
			present, a.entry = b.Entry != nil, deref(b.Entry)
		case "ratecounter":
			present, a.rateCounter = b.RateCounter != nil, deref(b.RateCounter)
		case "penaltybox":
			present, a.penaltyBox = b.PenaltyBox != nil, deref(b.PenaltyBox)
		case "ttl":
			present, a.ttl = b.TTL != nil, deref(b.TTL)
		case "delta":
			present, a.delta = b.Delta != nil, deref(b.Delta)
		case "window":
			present, a.window = b.Window != nil, deref(b.Window)
		case "limit":
			present, a.limit = b.Limit != nil, deref(b.Limit)
		case "checks":
			present = b.Checks != nil
		}
		if !present {
			return erlArgs{}, badRequest(codeInvalidRequest, fmt.Sprintf("%q is required", f), -1)
		}
	}
	if b.Checks != nil {
		a.checks = make([]ratelimits.RateCheck, len(*b.Checks))
		for i, c := range *b.Checks {
			for j, ok := range []bool{c.RateCounter != nil, c.Delta != nil, c.Window != nil, c.Limit != nil} {
				if !ok {
					return erlArgs{}, badRequest(codeInvalidRequest, fmt.Sprintf("%q in checks[%d] is required", rateCheckFields[j], i), -1)
				}
			}
			a.checks[i] = ratelimits.RateCheck{Counter: *c.RateCounter, Delta: *c.Delta, Window: *c.Window, Limit: *c.Limit}
		}
	}
	return a, nil
}

// deref is *p, or T's zero value when p is nil (a field that is missing,
// which decodeERLSlow then refuses if the call needs it).
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
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

// decodeERLFast reads the common ERL bodies without reflection: an object
// with exactly the fields named, each once, spelled exactly, string values
// without escapes and whole numbers of at most 18 digits where the field
// is a number, as fastParser reads them; "checks" an array of such objects
// with exactly checkFields. For anything else ok is false and
// decodeERLSlow decodes the body and words its errors; FuzzERLFastDecode
// checks that whenever this answers, that answers the same. body must be
// valid UTF-8.
func decodeERLFast(body []byte, fields, checkFields []string) (a erlArgs, ok bool) {
	p := fastParser{b: body}
	p.space()
	if p.peek() != '{' {
		return erlArgs{}, false
	}
	p.text = string(body) // one allocation for every string value
	if !p.erlObject(&a, fields, checkFields) {
		return erlArgs{}, false
	}
	p.space()
	return a, p.i == len(p.b)
}

// erlObject reads an object of exactly fields into a; "checks" is an
// array of objects of exactly checkFields, appended to a.checks.
func (p *fastParser) erlObject(a *erlArgs, fields, checkFields []string) bool {
	if len(fields) > 8 || !p.byte('{') {
		return false
	}
	var seen [8]bool
	n := 0
	for {
		p.space()
		key, ok := p.plainString()
		if !ok {
			return false
		}
		i := slices.Index(fields, string(key))
		if i < 0 || seen[i] {
			return false
		}
		seen[i] = true
		n++
		p.space()
		if !p.byte(':') {
			return false
		}
		p.space()
		if fields[i] == "checks" {
			ok = p.erlChecks(a, checkFields)
		} else {
			ok = p.erlValue(a, fields[i])
		}
		if !ok {
			return false
		}
		p.space()
		if p.byte(',') {
			continue
		}
		return p.byte('}') && n == len(fields)
	}
}

// erlChecks reads an array of check objects into a.checks.
func (p *fastParser) erlChecks(a *erlArgs, checkFields []string) bool {
	if !p.byte('[') {
		return false
	}
	p.space()
	if p.byte(']') {
		a.checks = []ratelimits.RateCheck{}
		return true
	}
	for {
		p.space()
		var c erlArgs
		if !p.erlObject(&c, checkFields, nil) {
			return false
		}
		a.checks = append(a.checks, ratelimits.RateCheck{Counter: c.rateCounter, Delta: c.delta, Window: c.window, Limit: c.limit})
		p.space()
		if p.byte(',') {
			continue
		}
		return p.byte(']')
	}
}

// erlValue reads the value of field into a: a number or a string.
func (p *fastParser) erlValue(a *erlArgs, field string) bool {
	var num *int64
	var str *string
	switch field {
	case "entry":
		str = &a.entry
	case "ratecounter":
		str = &a.rateCounter
	case "penaltybox":
		str = &a.penaltyBox
	case "ttl":
		str = &a.ttl
	case "delta":
		num = &a.delta
	case "window":
		num = &a.window
	case "limit":
		num = &a.limit
	default:
		return false
	}
	if num != nil {
		v, ok := p.integer()
		*num = v
		return ok
	}
	start := p.i + 1
	v, ok := p.plainString()
	if ok {
		*str = p.text[start : start+len(v)]
	}
	return ok
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
