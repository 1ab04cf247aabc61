package httpapi

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// decodeCodes are the codes a body's decoding may refuse it with.
var decodeCodes = []string{codeMalformedJSON, codeUnknownField, codeInvalidRequest, codeEmptyBatch, codeBatchTooLarge, codeInvalidCost, codeInvalidMode}

// FuzzDecode: whatever the body, the decoder answers with transactions or
// a 400 of one of its codes naming a transaction the body can have, and
// it never makes up a U+FFFD: one only comes from the body.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"limit":"L","id":"x","cost":3,"mode":"spend-only"}`, ` {"id":"a","limit":"b"} `, `{"limit":"L","id":"x","cost":-0}`,
		`{"transactions":[{"limit":"A","id":"1"},{"limit":"B","id":"2","mode":"x"}]}`,
		`{"limit":"L","id":"\ud800"}`, `{"limit":"L","id":"\udc00"}`, `{"limit":"L","id":"\ufffd"}`,
		`{"limit":"L","id":"\ud83d\ude00"}`, `{"limit":"L","id":"a\\ud800"}`, `{"limit":"L","id":"\ud800\u0041"}`,
		`{"limit":"L","id":"x","cost":null}`, `{"limit":"L","id":"x","mode":null}`, `{"limit":null,"id":"x"}`,
		`{"limit":"L","id":null}`, `{"transactions":null}`, `{"transactions":[null]}`, `null`,
		`{"limit":{"a":1,"a":2},"id":"x"}`, `{"transactions":[{"limit":"A","id":"1","x":1}],"y":2}`,
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, reset bool) {
		form := decisionBody
		if reset {
			form = resetBody
		}
		txns, e := decodeBody(body, 3, form)
		if e != nil {
			if e.status != 400 || !slices.Contains(decodeCodes, e.code) || e.message == "" || e.transaction < -1 || e.transaction > 2 {
				t.Fatalf("%q: %+v", body, e)
			}
			return
		}
		if len(txns) == 0 || len(txns) > 3 {
			t.Fatalf("%q: %d transactions", body, len(txns))
		}
		fffd := bytes.Contains(body, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`))
		for _, txn := range txns {
			if !utf8.ValidString(txn.Limit+txn.ID) || (!fffd && strings.ContainsRune(txn.Limit+txn.ID, utf8.RuneError)) {
				t.Fatalf("%q: decoded %q/%q, not the body's text", body, txn.Limit, txn.ID)
			}
		}
	})
}
