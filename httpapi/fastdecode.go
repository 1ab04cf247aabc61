package httpapi

import (
	"bytes"

	"github.com/limiter-dev/limiter/ratelimits"
)

// decodeFast reads the common requests without reflection: one
// transaction object such as {"limit":"L","id":"x","cost":1}, or
// {"transactions":[...]} with 1 to maxBatch of them. It accepts only a
// narrow subset of JSON that it reads exactly as encoding/json would: the
// keys limit, id, cost and mode spelled in lower case, each at most once;
// string values without escapes; cost a plain integer of at most 18 digits.
// For anything else (escapes, null, other spellings, duplicates, an empty or
// oversized batch, any syntax error) ok is false and the caller decodes with
// encoding/json, which also words those errors. A bad mode is the one error
// it reports itself, and only once the whole body has been read, as the slow
// path would. FuzzFastDecode checks that whenever it answers, the slow path
// answers the same. body must be valid UTF-8.
func decodeFast(body []byte, maxBatch int, form bodyForm) (txns []ratelimits.Transaction, e *apiError, ok bool) {
	p := fastParser{b: body}
	p.space()
	if p.peek() != '{' {
		return nil, nil, false
	}
	// One string holds the body, so the values read are substrings of it:
	// one allocation for all of them.
	p.text = string(body)
	var single [1]fastTxn
	read := single[:0]
	if p.batchStart() {
		for {
			p.space()
			ft, ok := p.object()
			if !ok || (maxBatch > 0 && len(read) == maxBatch) {
				return nil, nil, false
			}
			read = append(read, ft)
			p.space()
			if p.byte(',') {
				continue
			}
			if !p.byte(']') {
				return nil, nil, false
			}
			p.space()
			if !p.byte('}') {
				return nil, nil, false
			}
			break
		}
	} else {
		ft, ok := p.object()
		if !ok {
			return nil, nil, false
		}
		read = append(read, ft)
	}
	p.space()
	if p.i != len(p.b) {
		return nil, nil, false
	}
	txns = make([]ratelimits.Transaction, len(read))
	for i, ft := range read {
		txn, e := ft.transaction(i, form) // a lone transaction is 0, as in the slow path
		if e != nil {
			return nil, e, true
		}
		txns[i] = txn
	}
	return txns, nil, true
}

// batchStart consumes `{"transactions":[` and reports whether it was there;
// otherwise it leaves the parser at the opening brace.
func (p *fastParser) batchStart() bool {
	const key = `"transactions"`
	save := p.i
	p.byte('{')
	p.space()
	if !bytes.HasPrefix(p.b[p.i:], []byte(key)) {
		p.i = save
		return false
	}
	p.i += len(key)
	p.space()
	if !p.byte(':') {
		p.i = save
		return false
	}
	p.space()
	if !p.byte('[') {
		p.i = save
		return false
	}
	return true
}

// object reads one transaction object, which must have limit and id.
func (p *fastParser) object() (fastTxn, bool) {
	var ft fastTxn
	if !p.byte('{') {
		return ft, false
	}
	p.space()
	if p.peek() == '}' {
		return ft, false // {} lacks limit and id: let the slow path say so
	}
	for {
		key, ok := p.plainString()
		if !ok {
			return ft, false
		}
		p.space()
		if !p.byte(':') {
			return ft, false
		}
		p.space()
		switch string(key) {
		case "limit", "id", "mode":
			start := p.i + 1
			v, ok := p.plainString()
			if !ok {
				return ft, false
			}
			value := p.text[start : start+len(v)]
			target, seen := &ft.limit, &ft.hasLimit
			if string(key) == "id" {
				target, seen = &ft.id, &ft.hasID
			} else if string(key) == "mode" {
				target, seen = &ft.mode, &ft.hasMode
			}
			if *seen {
				return ft, false // a duplicate key
			}
			*target, *seen = value, true
		case "cost":
			if ft.hasCost {
				return ft, false
			}
			n, ok := p.integer()
			if !ok {
				return ft, false
			}
			ft.cost, ft.hasCost = n, true
		default:
			return ft, false
		}
		p.space()
		if p.byte(',') {
			p.space()
			continue
		}
		if !p.byte('}') {
			return ft, false
		}
		return ft, ft.hasLimit && ft.hasID
	}
}

// fastTxn is a transaction as decodeFast read it: plain values and
// presence flags, so reading one allocates nothing beyond the body string.
type fastTxn struct {
	limit, id, mode          string
	cost                     int64
	hasLimit, hasID, hasMode bool
	hasCost                  bool
}

// transaction fills defaults and checks the mode, as txnJSON.transaction
// does for the slow path.
func (f fastTxn) transaction(index int, form bodyForm) (ratelimits.Transaction, *apiError) {
	txn := ratelimits.Transaction{Limit: f.limit, ID: f.id, Cost: 1}
	if f.hasCost {
		txn.Cost = f.cost
	}
	if f.hasMode && form.readsMode() {
		mode, err := parseMode(f.mode)
		if err != nil {
			return ratelimits.Transaction{}, badRequest(codeInvalidMode, err.Error(), index)
		}
		txn.Mode = mode
	}
	return txn, nil
}

// fastParser walks a body for decodeFast.
type fastParser struct {
	b    []byte
	i    int
	text string // the body as a string, for the values read
}

func (p *fastParser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *fastParser) byte(c byte) bool {
	if p.peek() == c && p.i < len(p.b) {
		p.i++
		return true
	}
	return false
}

// space skips JSON whitespace.
func (p *fastParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// plainString reads a string with no escape and no control character and
// returns its contents.
func (p *fastParser) plainString() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// integer reads -?(0|[1-9][0-9]*) of at most 18 digits, which always fits
// an int64; longer numbers, fractions and exponents go to the slow path.
func (p *fastParser) integer() (int64, bool) {
	neg := p.byte('-')
	start := p.i
	var n int64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		n = n*10 + int64(p.b[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 18 || (digits > 1 && p.b[start] == '0') {
		return 0, false
	}
	switch p.peek() {
	case '.', 'e', 'E':
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}
