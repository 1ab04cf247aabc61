package httpapi

import (
	"testing"
	"unicode/utf8"
)

// slowDecodeSingle is the reference: encoding/json, as decodeBody uses it.
func slowDecodeSingle(body []byte) (txnJSON, bool) {
	var req requestJSON
	if e := decodeStrict(body, &req, -1); e != nil || req.Transactions != nil || req.Limit == nil || req.ID == nil {
		return txnJSON{}, false
	}
	return req.txnJSON, true
}

// sameTxn compares what the fast path read with what encoding/json read.
func sameTxn(f fastTxn, j txnJSON) bool {
	eqs := func(has bool, v string, p *string) bool { return has == (p != nil) && (!has || v == *p) }
	return eqs(f.hasLimit, f.limit, j.Limit) && eqs(f.hasID, f.id, j.ID) && eqs(f.hasMode, f.mode, j.Mode) &&
		f.hasCost == (j.Cost != nil) && (!f.hasCost || f.cost == *j.Cost)
}

func TestFastDecodeTakesTheCommonForms(t *testing.T) {
	for _, body := range []string{
		`{"limit":"L","id":"x"}`,
		` { "limit" : "L" , "id" : "x" , "cost" : 0 , "mode" : "check-only" } `,
		"{\n\t\"id\": \"2001:db8::1\",\r\n\"limit\": \"L\", \"cost\": -7}\n",
		`{"limit":"Ünïcode","id":"ключ","cost":123456789012345678}`,
	} {
		fast, ok := decodeSingleFast([]byte(body))
		slow, slowOK := slowDecodeSingle([]byte(body))
		if !ok || !slowOK || !sameTxn(fast, slow) {
			t.Errorf("%s: fast %v %+v, slow %v %+v", body, ok, fast, slowOK, slow)
		}
	}
}

func TestFastDecodeLeavesTheRestToEncodingJSON(t *testing.T) {
	for _, body := range []string{
		``, `{}`, `[]`, `{"limit":"L"}`, `{"limit":"L","id":"x",}`, `{"limit":"L","id":"x"} x`,
		`{"limit":"L","id":"a\"b"}`, `{"limit":"L","id":"\u0041"}`, `{"limit":"L","id":"x","cost":1.0}`,
		`{"limit":"L","id":"x","cost":1e2}`, `{"limit":"L","id":"x","cost":01}`, `{"limit":"L","id":"x","cost":-}`,
		`{"limit":"L","id":"x","cost":1234567890123456789}`, `{"limit":"L","id":"x","cost":null}`,
		`{"limit":"L","id":"x","id":"y"}`, `{"Limit":"L","id":"x"}`, `{"limit":"L","id":"x","transactions":[]}`,
		`{"limit":"L","id":"x","extra":1}`, `{"limit":"L","id":7}`, `{"limit":"L","id":"x"`, "{\"limit\":\"L\",\"id\":\"a\x01\"}",
	} {
		if tj, ok := decodeSingleFast([]byte(body)); ok {
			t.Errorf("fast path took %q as %+v", body, tj)
		}
	}
}

// FuzzFastDecode: whenever the fast path answers, encoding/json gives the
// same transaction.
func FuzzFastDecode(f *testing.F) {
	for _, s := range []string{`{"limit":"L","id":"x","cost":3,"mode":"spend-only"}`, ` {"id":"a","limit":"b"} `, `{"limit":"L","id":"x","cost":-0}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) {
			return // decodeBody refuses these before either path runs
		}
		fast, ok := decodeSingleFast(body)
		if !ok {
			return
		}
		slow, slowOK := slowDecodeSingle(body)
		if !slowOK || !sameTxn(fast, slow) {
			t.Fatalf("%q: fast %+v, encoding/json ok=%v %+v", body, fast, slowOK, slow)
		}
	})
}
