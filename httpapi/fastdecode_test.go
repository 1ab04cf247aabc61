package httpapi

import (
	"fmt"
	"slices"
	"testing"
	"unicode/utf8"
)

// agree runs both decoders on body and reports whether the fast one
// answered and, if so, whether it said exactly what encoding/json says:
// the same transactions, or the same error code for the same index.
func agree(body []byte, maxBatch int, ignoreMode bool) (answered, same bool, detail string) {
	fast, fastErr, ok := decodeFast(body, maxBatch, ignoreMode)
	if !ok {
		return false, true, ""
	}
	slow, slowErr := decodeSlow(body, maxBatch, ignoreMode)
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
		answered, same, detail := agree([]byte(body), 10, false)
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
		if answered, _, detail := agree([]byte(body), 10, false); answered {
			t.Errorf("fast path answered %q: %s", body, detail)
		}
	}
	// An oversized batch is left to the slow path, which refuses it.
	if answered, _, _ := agree([]byte(`{"transactions":[{"limit":"A","id":"1"},{"limit":"A","id":"2"}]}`), 1, false); answered {
		t.Error("fast path answered a batch over the maximum")
	}
}

// FuzzFastDecode: whenever the fast path answers, encoding/json answers
// the same.
func FuzzFastDecode(f *testing.F) {
	for _, s := range []string{
		`{"limit":"L","id":"x","cost":3,"mode":"spend-only"}`, ` {"id":"a","limit":"b"} `, `{"limit":"L","id":"x","cost":-0}`,
		`{"transactions":[{"limit":"A","id":"1"},{"limit":"B","id":"2","mode":"x"}]}`,
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, ignoreMode bool) {
		if !utf8.Valid(body) {
			return // decodeBody refuses these before either decoder runs
		}
		if answered, same, detail := agree(body, 3, ignoreMode); answered && !same {
			t.Fatalf("%q: %s", body, detail)
		}
	})
}
