package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/limiter-dev/limiter/ratelimits"
)

// Every body is decoded by github.com/go-json-experiment/json (the
// encoding/json/v2 API) in one pass, and its defaults are what make the
// decoding strict: names match exactly (no case folding), a name given
// twice and invalid UTF-8 (a lone surrogate escape included) are errors of
// the text. Unknown names are refused by this option; null is refused by
// field below.
var strict = json.RejectUnknownMembers(true)

// field is one field of a body: whether it was sent, and its value. It
// refuses null, which the decoder would otherwise take for a missing
// field: a null cost would spend 1, a null mode check-and-spend.
type field[T any] struct {
	v   T
	set bool
}

// errNull is the refusal of a null field, found again in decodeFault.
var errNull = errors.New("null")

func (f *field[T]) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	if d.PeekKind() == 'n' {
		return errNull
	}
	f.set = true
	return json.UnmarshalDecode(d, &f.v)
}

// list is a field holding a JSON array of objects, decoded one element at
// a time: the first max of them (listDecoded when max is 0) into v, the
// rest only checked as JSON and counted in n. A body of a million empty
// objects then costs a scan, not a million values, before its length is
// refused.
type list[T any] struct {
	v   []field[T]
	n   int
	set bool
	max int
}

// listDecoded is how many elements a list whose max is not set decodes:
// more than any list with a fixed length (check_rates' two checks) holds.
const listDecoded = 16

func (l *list[T]) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	l.set = true
	switch d.PeekKind() {
	case 'n':
		return errNull
	case '[':
	default:
		// Not an array: decoded as one, for the decoder's own refusal.
		return json.UnmarshalDecode(d, &l.v)
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	most := l.max
	if most <= 0 {
		most = listDecoded
	}
	// A batch is short: one allocation holds most, where growing by
	// append would take several.
	l.v = make([]field[T], 0, min(most, 4))
	for d.PeekKind() != ']' {
		if len(l.v) == most {
			if err := d.SkipValue(); err != nil {
				return err
			}
		} else {
			// Decoded in place: a value of its own would escape.
			l.v = append(l.v, field[T]{})
			if err := json.UnmarshalDecode(d, &l.v[len(l.v)-1]); err != nil {
				return err
			}
		}
		l.n++
	}
	_, err := d.ReadToken()
	return err
}

// anyValue is a field read for its name only: any value but null.
type anyValue struct{}

func (*anyValue) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	if d.PeekKind() == 'n' {
		return errNull
	}
	return d.SkipValue()
}

// requestNames is the top level of requestJSON, read for its names only.
type requestNames struct {
	Limit        anyValue `json:"limit"`
	ID           anyValue `json:"id"`
	Cost         anyValue `json:"cost"`
	Mode         anyValue `json:"mode"`
	Transactions anyValue `json:"transactions"`
}

// namesFirst finds, for a body refused for a value's type, a fault of a
// name (unknown, given twice) or a null in the same object, which comes
// first whatever the order (docs/api.md): the object is decoded again
// into names, a struct of the same names that takes any value but null.
// A name given twice inside a value of the wrong type is that value's
// fault, which f already is. list is the body's list of objects.
func namesFirst(body []byte, f *fault, names any, list string) *fault {
	if f.text || f.empty || f.unknown || f.twice || f.kind == 'n' {
		return f
	}
	g := decodeObject(body, names)
	if g == nil {
		return f
	}
	if g.within(list); g.text || g.unknown || g.twice || g.kind == 'n' {
		return g
	}
	return f
}

// txnJSON is one transaction as sent.
type txnJSON struct {
	Limit field[string] `json:"limit"`
	ID    field[string] `json:"id"`
	Cost  field[int64]  `json:"cost"`
	Mode  field[string] `json:"mode"`
}

// requestJSON is either one transaction or {"transactions": [...]}.
type requestJSON struct {
	txnJSON
	Transactions list[txnJSON] `json:"transactions"`
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
	var req requestJSON
	req.Transactions.max = maxBatch
	if e := decodeObject(body, &req); e != nil {
		return nil, e.transactionFault(body, maxBatch)
	}
	if !req.Transactions.set {
		txn, e := req.txnJSON.transaction(0, form)
		if e != nil {
			return nil, e
		}
		return []ratelimits.Transaction{txn}, nil
	}
	if e := checkBatch(&req, maxBatch); e != nil {
		return nil, e
	}
	txns := make([]ratelimits.Transaction, len(req.Transactions.v))
	for i := range req.Transactions.v {
		txn, e := req.Transactions.v[i].v.transaction(i, form)
		if e != nil {
			return nil, e
		}
		txns[i] = txn
	}
	return txns, nil
}

// checkBatch refuses what is wrong with a batch as a whole.
func checkBatch(req *requestJSON, maxBatch int) *apiError {
	if req.Limit.set || req.ID.set || req.Cost.set || req.Mode.set {
		return badRequest(codeInvalidRequest, `send either one transaction or {"transactions": [...]}, not both`, -1)
	}
	n := req.Transactions.n
	if n == 0 {
		return badRequest(codeEmptyBatch, "transactions is empty: send at least one", -1)
	}
	if maxBatch > 0 && n > maxBatch {
		return badRequest(codeBatchTooLarge, fmt.Sprintf("%d transactions in one batch; at most %d are allowed", n, maxBatch), -1)
	}
	return nil
}

// transaction checks the fields' presence and mode and fills defaults.
func (tj *txnJSON) transaction(index int, form bodyForm) (ratelimits.Transaction, *apiError) {
	if !tj.Limit.set {
		return ratelimits.Transaction{}, badRequest(codeInvalidRequest, `"limit" is required`, index)
	}
	if !tj.ID.set {
		return ratelimits.Transaction{}, badRequest(codeInvalidRequest, `"id" is required`, index)
	}
	txn := ratelimits.Transaction{Limit: tj.Limit.v, ID: tj.ID.v, Cost: 1}
	if tj.Cost.set {
		txn.Cost = tj.Cost.v
	}
	if tj.Mode.set && form.readsMode() {
		mode, err := parseMode(tj.Mode.v)
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

// checkContentType accepts one Content-Type of application/json (with any
// parameters), and none; anything else is 415.
func checkContentType(r *http.Request) *apiError {
	// Several Content-Type headers are a JSON body only when every one
	// says so: which one a proxy on the way read is anyone's guess.
	for _, ct := range r.Header.Values("Content-Type") {
		if ct == "" {
			continue
		}
		mediaType, _, err := mime.ParseMediaType(ct)
		if err != nil || mediaType != "application/json" {
			return &apiError{
				status:      http.StatusUnsupportedMediaType,
				code:        codeUnsupportedType,
				message:     cutMessage(fmt.Sprintf("Content-Type %q is not application/json", ct)),
				transaction: -1,
			}
		}
	}
	return nil
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

// decodeObject decodes body, which must be exactly one JSON object, into
// v strictly. A refusal is returned as a fault, which its caller words.
func decodeObject(body []byte, v any) *fault {
	switch string(bytes.TrimSpace(body)) {
	case "":
		return &fault{empty: true}
	case "null":
		// The decoder would take a null body for an empty object.
		return &fault{kind: 'n'}
	}
	if err := json.Unmarshal(body, v, strict); err != nil {
		return newFault(body, err)
	}
	return nil
}

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
