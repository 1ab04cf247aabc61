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

// A list far longer than its bound is refused for its length after a
// scan: the elements past the bound are counted, not decoded, so the
// refusal of a 1 MiB body of empty objects costs what a few of them do.
func TestLongListsAreCountedNotDecoded(t *testing.T) {
	const elements = 300_000
	many := func(prefix, elem, suffix string) []byte {
		return []byte(prefix + strings.Repeat(elem+",", elements-1) + elem + suffix)
	}
	tests := []struct {
		name   string
		decode func() *apiError
		code   string
		msg    string
	}{
		{"a spend", func() *apiError {
			_, e := decodeBody(many(`{"transactions":[`, `{}`, `]}`), 100, decisionBody)
			return e
		}, codeBatchTooLarge, "300000 transactions in one batch; at most 100"},
		{"a spend with bad elements past the bound", func() *apiError {
			good := strings.Repeat(`{"limit":"L","id":"x"},`, 100)
			_, e := decodeBody(many(`{"transactions":[`+good, `{"limit":1}`, `]}`), 100, decisionBody)
			return e
		}, codeBatchTooLarge, "300100 transactions"},
		{"a release", func() *apiError {
			_, e := decodeLeaseBody(many(`{"transactions":[`, `{}`, `]}`), 100)
			return e
		}, codeBatchTooLarge, "300000 transactions"},
		{"check_rates", func() *apiError {
			_, e := decodeERLBody(many(`{"entry":"e","penaltybox":"b","ttl":"1m","checks":[`, `{"ratecounter":"r","delta":1,"window":1,"limit":1}`, `]}`),
				checkRatesFields, rateCheckFields)
			return e
		}, codeInvalidArgument, "checks must hold exactly two checks, on two different rate counters; got 300000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e *apiError
			allocs := testing.AllocsPerRun(1, func() { e = tt.decode() })
			if tt.code != "" && (e == nil || e.code != tt.code || !strings.Contains(e.message, tt.msg)) {
				t.Fatalf("%+v, want %s saying %q", e, tt.code, tt.msg)
			}
			// Decoding each element would take several allocations apiece.
			if allocs > 5_000 {
				t.Errorf("%.0f allocations for %d elements: the elements past the bound were decoded", allocs, elements)
			}
		})
	}
}

// check_rates judges the number of its checks before any check's own
// fields, wherever the faulty check is, as a batch's size comes before its
// transactions; with two checks, a check's fault is reported.
func TestCheckRatesCountComesFirst(t *testing.T) {
	check := `{"ratecounter":"r","delta":1,"window":1,"limit":1}`
	body := func(checks ...string) []byte {
		return []byte(`{"entry":"e","penaltybox":"b","ttl":"1m","checks":[` + strings.Join(checks, ",") + `]}`)
	}
	many := func(n int, bad int, badCheck string) []string {
		cs := make([]string, n)
		for i := range cs {
			cs[i] = check
		}
		cs[bad] = badCheck
		return cs
	}
	for _, tt := range []struct {
		name string
		body []byte
		code string
		msg  string
	}{
		{"three, the last with an unknown field", body(many(3, 2, `{"ratecounter":"r","delta":1,"window":1,"limit":1,"x":1}`)...), codeInvalidArgument, "got 3"},
		{"three, the last missing a field", body(many(3, 2, `{"ratecounter":"r","delta":1,"window":1}`)...), codeInvalidArgument, "got 3"},
		{"twenty, the eighteenth with an unknown field", body(many(20, 17, `{"x":1}`)...), codeInvalidArgument, "got 20"},
		{"twenty, the first with an unknown field", body(many(20, 0, `{"x":1}`)...), codeInvalidArgument, "got 20"},
		{"two, the second with an unknown field", body(many(2, 1, `{"ratecounter":"r","delta":1,"window":1,"limit":1,"x":1}`)...), codeUnknownField, `"x"`},
		{"two, the second missing a field", body(many(2, 1, `{"ratecounter":"r","delta":1,"window":1}`)...), codeInvalidRequest, `"limit" in checks[1] is required`},
	} {
		_, e := decodeERLBody(tt.body, checkRatesFields, rateCheckFields)
		if e == nil || e.code != tt.code || !strings.Contains(e.message, tt.msg) {
			t.Errorf("%s: %+v, want %s saying %q", tt.name, e, tt.code, tt.msg)
		}
	}
}
