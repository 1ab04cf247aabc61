package httpapi

import "github.com/limiter-dev/limiter/ratelimits"

// decodeSingleFast reads the common request, one transaction object such
// as {"limit":"L","id":"x","cost":1}, without reflection. It accepts only a
// narrow subset of JSON that it can read exactly as encoding/json would:
// the keys limit, id, cost and mode spelled in lower case, each at most
// once; string values without escapes; cost a plain integer of at most 18
// digits. For anything else (a batch, escapes, null, other spellings,
// duplicates, any error) it reports !ok, and the caller decodes with
// encoding/json, which also words every error. FuzzFastDecode checks that
// whenever it answers, encoding/json answers the same. body must be valid
// UTF-8.
func decodeSingleFast(body []byte) (fastTxn, bool) {
	p := fastParser{b: body}
	var tj fastTxn
	p.space()
	if !p.byte('{') {
		return tj, false
	}
	// One string holds the body, so the values below are substrings of it:
	// one allocation for all of them.
	text := string(body)
	p.space()
	if p.peek() == '}' {
		return tj, false // {} lacks limit and id: let the slow path say so
	}
	for {
		key, ok := p.plainString()
		if !ok {
			return tj, false
		}
		p.space()
		if !p.byte(':') {
			return tj, false
		}
		p.space()
		switch string(key) {
		case "limit", "id", "mode":
			start := p.i + 1
			v, ok := p.plainString()
			if !ok {
				return tj, false
			}
			value := text[start : start+len(v)]
			target, seen := &tj.limit, &tj.hasLimit
			if string(key) == "id" {
				target, seen = &tj.id, &tj.hasID
			} else if string(key) == "mode" {
				target, seen = &tj.mode, &tj.hasMode
			}
			if *seen {
				return tj, false // a duplicate key
			}
			*target, *seen = value, true
		case "cost":
			if tj.hasCost {
				return tj, false
			}
			n, ok := p.integer()
			if !ok {
				return tj, false
			}
			tj.cost, tj.hasCost = n, true
		default:
			return tj, false
		}
		p.space()
		if p.byte(',') {
			p.space()
			continue
		}
		if !p.byte('}') {
			return tj, false
		}
		p.space()
		return tj, p.i == len(p.b) && tj.hasLimit && tj.hasID
	}
}

// fastTxn is a transaction as decodeSingleFast read it: plain values and
// presence flags, so reading one allocates nothing beyond the body string.
type fastTxn struct {
	limit, id, mode          string
	cost                     int64
	hasLimit, hasID, hasMode bool
	hasCost                  bool
}

// transaction fills defaults and checks the mode, as txnJSON.transaction
// does for the slow path.
func (f fastTxn) transaction(ignoreMode bool) (ratelimits.Transaction, *apiError) {
	txn := ratelimits.Transaction{Limit: f.limit, ID: f.id, Cost: 1}
	if f.hasCost {
		txn.Cost = f.cost
	}
	if f.hasMode && !ignoreMode {
		mode, err := ratelimits.ParseMode(f.mode)
		if err != nil {
			return ratelimits.Transaction{}, badRequest(codeInvalidMode, err.Error(), -1)
		}
		txn.Mode = mode
	}
	return txn, nil
}

// fastParser walks a byte slice for decodeSingleFast.
type fastParser struct {
	b []byte
	i int
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
