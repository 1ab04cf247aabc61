package httpapi

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/limiter-dev/limiter/httpapi/wire"
)

// erlForms are the field sets of the ERL bodies, by call.
var erlForms = []struct {
	name           string
	fields, checks []string
}{
	{"check_rate", checkRateFields, nil},
	{"check_rates", checkRatesFields, rateCheckFields},
	{"increment", incrementFields, nil},
	{"add", boxAddFields, nil},
	{"remove", boxRemoveFields, nil},
}

// erlAgree runs both ERL decoders on body and reports whether the fast one
// answered and, if so, whether encoding/json read the same arguments
// without an error.
func erlAgree(body []byte, fields, checks []string) (answered, same bool, detail string) {
	fast, ok := decodeERLFast(body, fields, checks)
	if !ok {
		return false, true, ""
	}
	slow, e := decodeERLSlow(body, fields, checks)
	return true, e == nil && reflect.DeepEqual(fast, slow), fmt.Sprintf("fast %+v; slow %+v %v", fast, slow, e)
}

func TestERLFastDecodeTakesTheCommonForms(t *testing.T) {
	for _, c := range []struct {
		form int
		body string
	}{
		{0, `{"entry":"192.0.2.1","ratecounter":"R","delta":1,"window":10,"limit":100,"penaltybox":"R","ttl":"15m"}`},
		{0, ` { "ttl" : "1h" , "penaltybox":"B","limit":70000000,"window":60,"delta":0,"ratecounter":"R","entry":"ключ" } `},
		{0, `{"entry":"x","ratecounter":"R","delta":-5,"window":7,"limit":1,"penaltybox":"R","ttl":"nonsense"}`},
		{1, `{"entry":"e","checks":[{"ratecounter":"A","delta":1,"window":1,"limit":20},{"limit":10,"window":60,"delta":1,"ratecounter":"B"}],"penaltybox":"A","ttl":"5m"}`},
		{1, `{"entry":"e","checks":[],"penaltybox":"A","ttl":"5m"}`},
		{1, `{"entry":"e","checks":[{"ratecounter":"A","delta":1,"window":1,"limit":20}],"penaltybox":"A","ttl":"5m"}`},
		{2, "{\n\t\"entry\": \"2001:db8::1\",\r\n\"delta\": 1000}\n"},
		{3, `{"entry":"a","ttl":"90s"}`},
		{4, `{"entry":"a"}`},
	} {
		f := erlForms[c.form]
		answered, same, detail := erlAgree([]byte(c.body), f.fields, f.checks)
		if !answered || !same {
			t.Errorf("%s %s: answered %v, agreed %v: %s", f.name, c.body, answered, same, detail)
		}
	}
}

func TestERLFastDecodeLeavesTheRestToEncodingJSON(t *testing.T) {
	for _, c := range []struct {
		form int
		body string
	}{
		{4, ``}, {4, `{}`}, {4, `[]`}, {4, `null`}, {4, `{"entry":"a"} x`}, {4, `{"entry":"a",}`},
		{4, `{"entry":"a\"b"}`}, {4, `{"entry":"\u0041"}`}, {4, `{"entry":null}`}, {4, `{"entry":1}`},
		{4, `{"ENTRY":"a"}`}, {4, `{"entry":"a","entry":"b"}`}, {4, `{"entry":"a","x":1}`}, {4, "{\"entry\":\"a\x01\"}"},
		{2, `{"entry":"a"}`}, {2, `{"entry":"a","delta":1.0}`}, {2, `{"entry":"a","delta":1e2}`}, {2, `{"entry":"a","delta":01}`},
		{2, `{"entry":"a","delta":1234567890123456789}`}, {2, `{"entry":"a","delta":"1"}`}, {2, `{"entry":"a","delta":-}`},
		{3, `{"entry":"a","ttl":60}`},
		{1, `{"entry":"e","checks":[null],"penaltybox":"A","ttl":"5m"}`},
		{1, `{"entry":"e","checks":{},"penaltybox":"A","ttl":"5m"}`},
		{1, `{"entry":"e","checks":[{"ratecounter":"A","delta":1,"window":1}],"penaltybox":"A","ttl":"5m"}`},
		{1, `{"entry":"e","checks":[{"ratecounter":"A","delta":1,"window":1,"limit":2,"entry":"x"}],"penaltybox":"A","ttl":"5m"}`},
		{1, `{"entry":"e","checks":[{"ratecounter":"A","delta":1,"window":1,"limit":2},],"penaltybox":"A","ttl":"5m"}`},
		{0, `{"entry":"e","checks":[],"ratecounter":"R","delta":1,"window":10,"limit":100,"penaltybox":"R","ttl":"15m"}`},
	} {
		f := erlForms[c.form]
		if _, ok := decodeERLFast([]byte(c.body), f.fields, f.checks); ok {
			t.Errorf("%s %q: the fast path answered", f.name, c.body)
		}
	}
}

// The field lists are the wire request types' JSON names, in their order,
// so that the documented types and the decoder agree.
func TestERLFieldsAreTheWireTypes(t *testing.T) {
	for _, c := range []struct {
		v      any
		fields []string
	}{
		{wire.CheckRateRequest{}, checkRateFields}, {wire.CheckRatesRequest{}, checkRatesFields},
		{wire.RateCheckRequest{}, rateCheckFields}, {wire.IncrementRequest{}, incrementFields},
		{wire.BoxAddRequest{}, boxAddFields}, {wire.BoxRemoveRequest{}, boxRemoveFields},
	} {
		typ := reflect.TypeOf(c.v)
		var names []string
		for i := range typ.NumField() {
			names = append(names, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
		}
		if !slices.Equal(names, c.fields) {
			t.Errorf("%s: %v, the decoder takes %v", typ.Name(), names, c.fields)
		}
	}
}

// FuzzERLFastDecode checks that the fast ERL decoder never answers
// differently from encoding/json.
func FuzzERLFastDecode(f *testing.F) {
	for _, seed := range []string{
		`{"entry":"192.0.2.1","ratecounter":"R","delta":1,"window":10,"limit":100,"penaltybox":"R","ttl":"15m"}`,
		`{"entry":"e","checks":[{"ratecounter":"A","delta":1,"window":1,"limit":20},{"ratecounter":"B","delta":1,"window":60,"limit":10}],"penaltybox":"A","ttl":"5m"}`,
		`{"entry":"a","delta":7}`, `{"entry":"a","ttl":"1m"}`, `{"entry":"a"}`, `{"entry":"a","delta":-0}`,
	} {
		for i := range erlForms {
			f.Add(uint8(i), seed)
		}
	}
	f.Fuzz(func(t *testing.T, form uint8, body string) {
		if !utf8.ValidString(body) {
			return
		}
		fm := erlForms[int(form)%len(erlForms)]
		if answered, same, detail := erlAgree([]byte(body), fm.fields, fm.checks); answered && !same {
			t.Fatalf("%s %q: %s", fm.name, body, detail)
		}
		// Whatever the body, the decoder answers with arguments or one of
		// its errors, never a panic.
		if _, e := decodeERLBody([]byte(body), fm.fields, fm.checks); e != nil && (e.code == "" || e.status != 400) {
			t.Fatalf("%s %q: %+v", fm.name, body, e)
		}
	})
}
