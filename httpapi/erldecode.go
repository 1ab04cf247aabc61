package httpapi

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

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

// checksCount refuses a check_rates body whose checks are not two.
func checksCount(n int) *apiError {
	return badRequest(codeInvalidArgument, fmt.Sprintf("checks must hold exactly two checks, on two different rate counters; got %d (use check_rate for one)", n), -1)
}

// erlBody is any ERL body as decoded: it has the fields of every call.
// Each call's body is decoded into a struct of its own fields
// (erlBodyType), then copied here.
type erlBody struct {
	Entry       field[string]       `json:"entry"`
	RateCounter field[string]       `json:"ratecounter"`
	Delta       field[int64]        `json:"delta"`
	Window      field[int64]        `json:"window"`
	Limit       field[int64]        `json:"limit"`
	PenaltyBox  field[string]       `json:"penaltybox"`
	TTL         field[string]       `json:"ttl"`
	Checks      list[rateCheckBody] `json:"checks"`
}

// rateCheckBody is an element of "checks".
type rateCheckBody struct {
	RateCounter field[string] `json:"ratecounter"`
	Delta       field[int64]  `json:"delta"`
	Window      field[int64]  `json:"window"`
	Limit       field[int64]  `json:"limit"`
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

// decodeERLBody decodes a body already read whole, for decodeERL.
func decodeERLBody(body []byte, fields, checkFields []string) (erlArgs, *apiError) {
	// The body is decoded into a struct of the call's fields only, so
	// that the decoder refuses any other field where it meets it.
	shape := erlBodyType(fields)
	v := reflect.New(shape.typ)
	if f := decodeObject(body, v.Interface()); f != nil {
		f = namesFirst(body, f, reflect.New(erlNamesType(shape.typ)).Interface(), "checks")
		if f.depth() > 1 && f.where[0] == "checks" {
			// The number of checks is judged before any check, as a
			// batch's size is before its transactions: the list is
			// decoded again, only counted.
			var counted struct {
				Checks list[jsontext.Value] `json:"checks"`
			}
			if json.Unmarshal(body, &counted) == nil && counted.Checks.n != 2 {
				return erlArgs{}, checksCount(counted.Checks.n)
			}
		}
		return erlArgs{}, f.erlFault(fields, checkFields)
	}
	var b erlBody
	bv := reflect.ValueOf(&b).Elem()
	for i, j := range shape.into {
		bv.Field(j).Set(v.Elem().Field(i))
	}
	for _, name := range fields {
		if !b.has(name) {
			return erlArgs{}, badRequest(codeInvalidRequest, fmt.Sprintf("%q is required", name), -1)
		}
	}
	a := erlArgs{
		entry: b.Entry.v, rateCounter: b.RateCounter.v, penaltyBox: b.PenaltyBox.v, ttl: b.TTL.v,
		delta: b.Delta.v, window: b.Window.v, limit: b.Limit.v,
	}
	if b.Checks.set {
		if b.Checks.n != 2 {
			return erlArgs{}, checksCount(b.Checks.n)
		}
		a.checks = make([]ratelimits.RateCheck, len(b.Checks.v))
		for i, elem := range b.Checks.v {
			c := elem.v
			for j, ok := range []bool{c.RateCounter.set, c.Delta.set, c.Window.set, c.Limit.set} {
				if !ok {
					return erlArgs{}, badRequest(codeInvalidRequest, fmt.Sprintf("%q in checks[%d] is required", rateCheckFields[j], i), -1)
				}
			}
			a.checks[i] = ratelimits.RateCheck{Counter: c.RateCounter.v, Delta: c.Delta.v, Window: c.Window.v, Limit: c.Limit.v}
		}
	}
	return a, nil
}

// erlBodyTypes are the struct types of the calls' bodies: erlBody's
// fields that each call takes, built once.
var erlBodyTypes = func() (shapes []*erlBodyShape) {
	for _, fields := range [][]string{checkRateFields, checkRatesFields, incrementFields, boxAddFields, boxRemoveFields} {
		shapes = append(shapes, buildERLBodyType(fields))
	}
	return shapes
}()

// erlBodyShape is the struct type of a body of fields, and where each of
// its fields is in erlBody.
type erlBodyShape struct {
	fields []string
	typ    reflect.Type
	into   []int
}

// erlBodyType is the struct type of a body of fields.
func erlBodyType(fields []string) *erlBodyShape {
	for _, s := range erlBodyTypes {
		if slices.Equal(s.fields, fields) {
			return s
		}
	}
	return buildERLBodyType(fields)
}

// buildERLBodyType makes a struct type of erlBody's fields named in
// fields, in erlBody's order.
func buildERLBodyType(fields []string) *erlBodyShape {
	all := reflect.TypeFor[erlBody]()
	s := &erlBodyShape{fields: fields}
	var sf []reflect.StructField
	for i := range all.NumField() {
		if f := all.Field(i); slices.Contains(fields, f.Tag.Get("json")) {
			sf = append(sf, f)
			s.into = append(s.into, i)
		}
	}
	s.typ = reflect.StructOf(sf)
	return s
}

// rateCheckNames is rateCheckBody read for its names only.
type rateCheckNames struct {
	RateCounter anyValue `json:"ratecounter"`
	Delta       anyValue `json:"delta"`
	Window      anyValue `json:"window"`
	Limit       anyValue `json:"limit"`
}

// erlNamesType is a body type of erlBodyType's fields read for their
// names only, for namesFirst; "checks" is still a list of objects, whose
// names are read too.
func erlNamesType(typ reflect.Type) reflect.Type {
	var sf []reflect.StructField
	for i := range typ.NumField() {
		f := typ.Field(i)
		f.Type = reflect.TypeFor[anyValue]()
		if f.Tag.Get("json") == "checks" {
			f.Type = reflect.TypeFor[list[rateCheckNames]]()
		}
		sf = append(sf, f)
	}
	return reflect.StructOf(sf)
}

// erlBodyFields are the fields of erlBody, in its order.
var erlBodyFields = []string{"entry", "ratecounter", "delta", "window", "limit", "penaltybox", "ttl", "checks"}

// has reports whether the body had the field.
func (b *erlBody) has(name string) bool {
	switch name {
	case "entry":
		return b.Entry.set
	case "ratecounter":
		return b.RateCounter.set
	case "delta":
		return b.Delta.set
	case "window":
		return b.Window.set
	case "limit":
		return b.Limit.set
	case "penaltybox":
		return b.PenaltyBox.set
	case "ttl":
		return b.TTL.set
	case "checks":
		return b.Checks.set
	}
	return false
}

// unknownERLField words the refusal of a field the call does not have.
func unknownERLField(name, where string, allowed []string) *apiError {
	return badRequest(codeUnknownField, fmt.Sprintf("unknown field %q%s (allowed: %s)", name, where, strings.Join(allowed, ", ")), -1)
}

// erlFault words a fault of an ERL body. A value field of the wrong type
// or null (a string delta, a fractional or huge window, a number ttl) is
// invalid_argument; the others as in a transaction body. No fault names a
// transaction.
func (f *fault) erlFault(fields, checkFields []string) *apiError {
	f.within("checks")
	if f.text || f.empty || f.depth() == 0 {
		return f.shape(-1)
	}
	where, allowed := "", fields
	if f.depth() > 1 {
		// In "checks": the element is the second token.
		where, allowed = " in checks["+f.where[1]+"]", checkFields
		if f.depth() == 2 {
			return badRequest(codeInvalidRequest, fmt.Sprintf("checks[%s] must be an object, got %s", f.where[1], kindName(f.kind)), -1)
		}
	}
	switch {
	case f.twice:
		return badRequest(codeInvalidRequest, fmt.Sprintf("field %q appears twice%s", f.name, where), -1)
	case f.unknown:
		return unknownERLField(f.name, where, allowed)
	case slices.Contains(erlValueFields, f.name):
		return badRequest(codeInvalidArgument, fmt.Sprintf("%s, got %s%s", erlValueWant(f.name), f.got(), where), -1)
	case f.name == "checks":
		return badRequest(codeInvalidRequest, "checks must be an array of two check objects, got "+kindName(f.kind), -1)
	case f.kind == 'n':
		return badRequest(codeInvalidRequest, fmt.Sprintf("%q%s must not be null", f.name, where), -1)
	}
	return badRequest(codeInvalidRequest, fmt.Sprintf("%q%s must be a string, got %s", f.name, where, f.got()), -1)
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
