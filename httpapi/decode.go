package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

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
