package httpapi

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// agree runs both decoders on body and reports whether the fast one
// answered and, if so, whether it said exactly what encoding/json says:
// the same transactions, or the same error code for the same index.
func agree(body []byte, maxBatch int, form bodyForm) (answered, same bool, detail string) {
	fast, fastErr, ok := decodeFast(body, maxBatch, form)
	if !ok {
		return false, true, ""
	}
	slow, slowErr := decodeSlow(body, maxBatch, form)
	switch {
	case fastErr != nil || slowErr != nil:
		same = fastErr != nil && slowErr != nil && fastErr.code == slowErr.code && fastErr.transaction == slowErr.transaction
	default:
		same = slices.Equal(fast, slow)
	}
	return true, same, describe(fast, fastErr, slow, slowErr)
}

// describe shows both decoders' answers.
func describe(a, b, c, d any) string { return fmt.Sprint("fast ", a, " ", b, "; slow ", c, " ", d) }

func TestFastDecodeTakesTheCommonForms(t *testing.T) {
	for _, body := range []string{
		`{"limit":"L","id":"x"}`,
		` { "limit" : "L" , "id" : "x" , "cost" : 0 , "mode" : "check-only" } `,
		"{\n\t\"id\": \"2001:db8::1\",\r\n\"limit\": \"L\", \"cost\": -7}\n",
		`{"limit":"Ünïcode","id":"ключ","cost":123456789012345678}`,
		`{"transactions":[{"limit":"A","id":"1"}]}`,
		` { "transactions" : [ {"limit":"A","id":"1"} , {"limit":"B","id":"2","mode":"spend-only","cost":3} ] } `,
		`{"limit":"L","id":"x","mode":"sometimes"}`,
		`{"transactions":[{"limit":"A","id":"1"},{"limit":"B","id":"2","mode":"bad"}]}`,
	} {
		answered, same, detail := agree([]byte(body), 10, decisionBody)
		if !answered || !same {
			t.Errorf("%s: answered %v, agreed %v: %s", body, answered, same, detail)
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
		`{"transactions":[]}`, `{"transactions":[{"limit":"A","id":"1"}],"limit":"L"}`, `{"transactions":[{"limit":"A","id":"1"},]}`,
		`{"transactions":[{"limit":"A","id":"1","mode":"bad"},{"limit":"B"}]}`, `{"transactions":{"limit":"A","id":"1"}}`,
		`{"transactions":[{"limit":"A","id":"1"}]}]`,
	} {
		if answered, _, detail := agree([]byte(body), 10, decisionBody); answered {
			t.Errorf("fast path answered %q: %s", body, detail)
		}
	}
	// An oversized batch is left to the slow path, which refuses it.
	if answered, _, _ := agree([]byte(`{"transactions":[{"limit":"A","id":"1"},{"limit":"A","id":"2"}]}`), 1, decisionBody); answered {
		t.Error("fast path answered a batch over the maximum")
	}
}

// FuzzFastDecode: whenever the fast path answers, encoding/json answers
// the same.
func FuzzFastDecode(f *testing.F) {
	for _, s := range []string{
		`{"limit":"L","id":"x","cost":3,"mode":"spend-only"}`, ` {"id":"a","limit":"b"} `, `{"limit":"L","id":"x","cost":-0}`,
		`{"transactions":[{"limit":"A","id":"1"},{"limit":"B","id":"2","mode":"x"}]}`,
		`{"limit":"L","id":"\ud800"}`, `{"limit":"L","id":"\udc00"}`, `{"limit":"L","id":"\ufffd"}`,
		`{"limit":"L","id":"\ud83d\ude00"}`, `{"limit":"L","id":"a\\ud800"}`, `{"limit":"L","id":"\ud800\u0041"}`,
		`{"limit":"L","id":"x","cost":null}`, `{"limit":"L","id":"x","mode":null}`, `{"limit":null,"id":"x"}`,
		`{"limit":"L","id":null}`, `{"transactions":null}`, `{"transactions":[null]}`, `null`,
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, reset bool) {
		if !utf8.Valid(body) {
			return // decodeBody refuses these before either decoder runs
		}
		form := decisionBody
		if reset {
			form = resetBody
		}
		if answered, same, detail := agree(body, 3, form); answered && !same {
			t.Fatalf("%q: %s", body, detail)
		}
		// Neither path makes up a U+FFFD: one only comes from the body.
		txns, e := decodeSlow(body, 3, form)
		if e != nil || bytes.Contains(body, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`)) {
			return
		}
		for _, txn := range txns {
			if strings.ContainsRune(txn.Limit+txn.ID, utf8.RuneError) {
				t.Fatalf("%q: decoded %q/%q with a U+FFFD the body does not have", body, txn.Limit, txn.ID)
			}
		}
	})
}

func TestLoneSurrogate(t *testing.T) {
	for _, tt := range []struct {
		body string
		lone bool
	}{
		{`"\ud800"`, true}, {`"\uDBFF"`, true}, {`"\udc00"`, true}, {`"\uDFFF"`, true},
		{`"\ud800\u0041"`, true}, {`"\ud800\ud800\udc00"`, true}, {`"\udc00\ud800"`, true},
		{`"\ud800x\udc00"`, true}, {`"\ud800\n"`, true}, {`"\ud800`, true}, {`"\ud800\`, true},
		{`"\ud83d\ude00"`, false}, {`"\uD83D\uDE00\ud83d\ude00"`, false}, {`"\ufffd"`, false},
		{`"\\ud800"`, false}, {`"\\\\ud800"`, false}, {`"\"\ud800"`, true}, {`"\ud7ff\ue000"`, false},
		{`"\ud8"`, false}, {`"\u"`, false}, {`"\`, false}, {`"a"`, false}, {``, false},
	} {
		if got := loneSurrogate([]byte(tt.body)); got != tt.lone {
			t.Errorf("loneSurrogate(%s) = %v, want %v", tt.body, got, tt.lone)
		}
	}
}
