package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// fault is why the decoder refused a body, taken apart.
type fault struct {
	empty   bool // no value at all
	text    bool // not JSON, not valid Unicode, or data after the object
	after   bool // (text) data after the object
	unknown bool // a member of a name the object does not have
	twice   bool // a member whose name the object already had
	// where is the JSON Pointer's reference tokens to the value at fault,
	// or, for unknown and twice, to the object whose member it is.
	where []string
	name  string        // the member at fault, if any
	kind  jsontext.Kind // the kind of the value at fault, if any
	value string        // the value at fault, for a number
	err   error
}

// within reduces a name given twice inside a value the body's type does
// not decode as an object (an object where a string or a number goes) to
// what it is: a value of the wrong type. list is the name of the body's
// one array of objects ("transactions", "checks").
func (f *fault) within(list string) {
	if !f.twice {
		return
	}
	owned := len(f.where) == 0 || (len(f.where) == 2 && f.where[0] == list)
	if owned {
		return
	}
	n := 1 // a top-level field
	if f.where[0] == list {
		n = min(3, len(f.where)) // a field of an element, or the element
	}
	f.twice, f.where, f.kind = false, f.where[:n], '{'
	f.name = f.where[n-1]
}

// depth is how deep in the body the fault is: 0 the body itself, 1 a
// member of it, 2 a member or element of that.
func (f *fault) depth() int {
	if f.unknown || f.twice {
		return len(f.where) + 1
	}
	return len(f.where)
}

// newFault takes apart an error of json.Unmarshal.
func newFault(body []byte, err error) *fault {
	f := &fault{err: err}
	var se *json.SemanticError
	var sy *jsontext.SyntacticError
	switch {
	case errors.As(err, &sy) && sy.Err == jsontext.ErrDuplicateName:
		f.twice, f.name = true, sy.JSONPointer.LastToken()
		f.where = tokens(sy.JSONPointer.Parent())
	case errors.As(err, &sy):
		f.text = true
		// The first value whole and valid means the error is in what
		// follows it.
		_, err := jsontext.NewDecoder(bytes.NewReader(body)).ReadValue()
		f.after = err == nil
	case errors.As(err, &se) && se.Err == json.ErrUnknownName:
		f.unknown, f.name = true, se.JSONPointer.LastToken()
		f.where = tokens(se.JSONPointer.Parent())
	case errors.As(err, &se):
		f.where, f.kind = tokens(se.JSONPointer), se.JSONKind
		if len(f.where) > 0 {
			f.name = f.where[len(f.where)-1]
		}
		// The value at fault is read whole, to word it, only when the
		// text is JSON: the decoder refuses a value by its first byte (an
		// array where an object goes, null) before reading the rest, but a
		// body that is not JSON is malformed whatever its values' types.
		// A null member of the body is the one exception: it is refused as
		// met, like an unknown name, even if what follows is not JSON.
		var v jsontext.Value
		var verr error
		if se.ByteOffset >= 0 && se.ByteOffset < int64(len(body)) {
			v, verr = jsontext.NewDecoder(bytes.NewReader(body[se.ByteOffset:])).ReadValue()
		}
		if se.Err == errNull {
			f.kind = 'n'
		} else if verr == nil {
			f.value = string(v)
		}
		if verr == nil && se.Err == errNull && len(f.where) == 1 {
			break
		}
		if _, err := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true)).ReadValue(); err != nil {
			*f = fault{text: true, err: err}
		}
	default:
		f.text = true
	}
	if !f.text && badText(body) {
		// The text is checked first (docs/api.md): a body with invalid
		// UTF-8 or a lone surrogate escape anywhere is malformed, whatever
		// fault the decoder met before reaching it.
		*f = fault{text: true, err: errors.New("a string is not valid UTF-8 or has a \\u escape of half a UTF-16 surrogate pair (such as \\ud800) without the other half")}
	}
	return f
}

// tokens are the reference tokens of p.
func tokens(p jsontext.Pointer) []string {
	var t []string
	for tok := range p.Tokens() {
		t = append(t, tok)
	}
	return t
}

// badText reports whether body has invalid UTF-8, or an escape of half a
// UTF-16 surrogate pair, anywhere as far as it is JSON: it is read once as
// the decoder reads it and once letting invalid text through, and a body
// that only the second reading gets further into has such a string.
func badText(body []byte) bool {
	if !utf8.Valid(body) {
		return true
	}
	strictErr := readAll(body)
	if strictErr == nil {
		return false
	}
	lenientErr := readAll(body, jsontext.AllowInvalidUTF8(true))
	return lenientErr == nil || offset(lenientErr) > offset(strictErr)
}

// readAll reads every token of body, names given twice allowed.
func readAll(body []byte, opts ...jsontext.Options) error {
	d := jsontext.NewDecoder(bytes.NewReader(body), append(opts, jsontext.AllowDuplicateNames(true))...)
	for {
		if _, err := d.ReadToken(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// offset is where in the body a syntactic error is.
func offset(err error) int64 {
	var sy *jsontext.SyntacticError
	if errors.As(err, &sy) {
		return sy.ByteOffset
	}
	return -1
}

// got words the value at fault.
func (f *fault) got() string {
	if f.value != "" && f.kind == '0' {
		return f.value
	}
	return kindName(f.kind)
}

// kindName words a kind of JSON value.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "something else"
}

// shape words a fault of the body as a whole: empty, not JSON, data after
// the object, not an object.
func (f *fault) shape(index int) *apiError {
	switch {
	case f.empty:
		return badRequest(codeMalformedJSON, "the request body is empty; send a JSON object", index)
	case f.after:
		return badRequest(codeMalformedJSON, "unexpected data after the JSON object", index)
	case f.text:
		return badRequest(codeMalformedJSON, "the request body is not valid JSON: "+f.err.Error(), index)
	}
	return badRequest(codeInvalidRequest, "expected a JSON object, got "+kindName(f.kind), index)
}

// topLevelFault words a fault of a body of transactions (one, or a batch
// under "transactions") that is not inside the batch: the body's shape,
// then its names and nulls (names is its top level, read for its names
// only), then a field of its lone transaction or the batch as a field. top
// is false for a fault inside the batch, which the caller words.
func (f *fault) topLevelFault(body []byte, names any) (e *apiError, top bool) {
	f.within("transactions")
	if f.text || f.empty || f.depth() == 0 {
		return f.shape(-1), true
	}
	if f.depth() != 1 {
		return nil, false
	}
	if f = namesFirst(body, f, names, "transactions"); f.text || f.depth() != 1 {
		return f.shape(-1), true
	}
	if f.name == "transactions" {
		return f.batchFault(), true
	}
	index := 0
	if hasTransactions(body) {
		index = -1
	}
	return f.fieldFault(index), true
}

// transactionFault words a fault of a transaction body, naming the
// transaction it is in when it is in one (docs/api.md).
func (f *fault) transactionFault(body []byte, maxBatch int) *apiError {
	if e, top := f.topLevelFault(body, new(requestNames)); top {
		return e
	}
	// Inside the batch: the faults of the body's top level and of the
	// batch as a whole come first.
	if e := batchFirst(body, maxBatch); e != nil {
		return e
	}
	i, err := strconv.Atoi(f.where[1])
	if err != nil {
		return f.shape(-1) // unreachable: the batch is an array
	}
	if f.depth() == 2 {
		return badRequest(codeInvalidRequest, "a transaction must be an object, got "+kindName(f.kind), i)
	}
	return f.fieldFault(i)
}

// plain words a fault of a body of string fields that names no
// transaction.
func (f *fault) plain() *apiError {
	switch {
	case f.text || f.empty || f.depth() == 0:
		return f.shape(-1)
	case f.twice:
		return badRequest(codeInvalidRequest, fmt.Sprintf("field %q appears twice", f.name), -1)
	case f.unknown:
		return badRequest(codeUnknownField, fmt.Sprintf("unknown field %q", f.name), -1)
	}
	return badRequest(codeInvalidRequest, fmt.Sprintf("%q must be a string, got %s", f.name, f.got()), -1)
}

// batchFault words a fault of the "transactions" field itself.
func (f *fault) batchFault() *apiError {
	if f.twice {
		return badRequest(codeInvalidRequest, `field "transactions" appears twice`, -1)
	}
	return badRequest(codeInvalidRequest, "transactions must be an array of transaction objects, got "+kindName(f.kind), -1)
}

// fieldFault words a fault of a transaction's field.
func (f *fault) fieldFault(index int) *apiError {
	switch {
	case f.twice:
		return badRequest(codeInvalidRequest, fmt.Sprintf("field %q appears twice", f.name), index)
	case f.unknown:
		return badRequest(codeUnknownField, fmt.Sprintf("unknown field %q", f.name), index)
	case f.name == "cost":
		return badRequest(codeInvalidCost, "cost must be a whole number from 0 to the limit's burst, got "+f.got(), index)
	case f.name == "lease":
		// Only release and renew bodies have one; a lease that is no
		// string is no lease id either, as one of the wrong form is.
		return badRequest(codeInvalidLease, "lease must be a lease id, 32 lowercase hex characters, got "+f.got(), index)
	}
	return badRequest(codeInvalidRequest, fmt.Sprintf("%q must be a string, got %s", f.name, f.got()), index)
}

// hasTransactions reports whether the top level of body has a
// "transactions" member, reading as far as body is JSON: a fault in a
// field next to it is the body's, not a lone transaction's.
func hasTransactions(body []byte) bool {
	d := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	for d.PeekKind() == '"' {
		name, err := d.ReadToken()
		if err != nil {
			return false
		}
		if name.String() == "transactions" {
			return true
		}
		if d.SkipValue() != nil {
			return false
		}
	}
	return false
}

// batchFirst finds, for a body refused inside its batch, a fault of the
// body's top level or of the batch as a whole, which comes before any of
// its transactions' (docs/api.md): it decodes the top level again, each
// transaction kept as its text.
func batchFirst(body []byte, maxBatch int) *apiError {
	var top struct {
		txnJSON
		Transactions list[jsontext.Value] `json:"transactions"`
	}
	if err := json.Unmarshal(body, &top, strict); err != nil {
		if f := newFault(body, err); f.depth() <= 1 {
			return f.transactionFault(body, maxBatch)
		}
		return nil
	}
	req := requestJSON{txnJSON: top.txnJSON}
	req.Transactions.n = top.Transactions.n
	return checkBatch(&req, maxBatch)
}
