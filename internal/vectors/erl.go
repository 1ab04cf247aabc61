package vectors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
)

// OpERL is the op of an ERL step.
const OpERL = "erl"

// The ERL calls a step may make, and whether each reads its entry from
// the URL (a GET) rather than a body.
var erlCalls = map[string]bool{
	"check_rate": false, "check_rates": false, "increment": false, "lookup": true,
	"add": false, "has": true, "remove": false,
}

// ERLStep is one ERL call of a scenario: Call is check_rate, check_rates,
// increment, lookup, add, has or remove; Path the rate counter or penalty
// box of the URL ("" for check_rate and check_rates); Body the request as
// the API takes it (a GET's entry goes into its URL). Expect holds the
// answer's fields that must be there with exactly these values, as
// encoding/json decodes them into an any (numbers are float64, and the
// rates are exact float64 quotients); other fields of the answer are not
// compared.
type ERLStep struct {
	Call   string
	Path   string
	Body   json.RawMessage
	Expect map[string]any
}

// ERLResult is an ERL call's answer: its status and, for a 200, its body
// decoded by encoding/json into an any.
type ERLResult struct {
	Status int
	Answer map[string]any
}

// HTTPRequest returns the HTTP request that makes the call: its method,
// its path (the counter, box and, for a GET, the entry escaped as one
// path segment each) and its body (nil for a GET).
func (s *ERLStep) HTTPRequest() (method, path string, body []byte, err error) {
	counter := url.PathEscape(s.Path)
	switch s.Call {
	case "check_rate", "check_rates":
		return http.MethodPost, "/v1/erl/" + s.Call, s.Body, nil
	case "increment":
		return http.MethodPost, "/v1/erl/ratecounters/" + counter + "/increment", s.Body, nil
	case "add", "remove":
		return http.MethodPost, "/v1/erl/penaltyboxes/" + counter + "/" + s.Call, s.Body, nil
	}
	var b struct {
		Entry string `json:"entry"`
	}
	if err := json.Unmarshal(s.Body, &b); err != nil {
		return "", "", nil, fmt.Errorf("the body of %s: %w", s.Call, err)
	}
	kind := "penaltyboxes"
	if s.Call == "lookup" {
		kind = "ratecounters"
	}
	return http.MethodGet, "/v1/erl/" + kind + "/" + counter + "/" + url.PathEscape(b.Entry), nil, nil
}

// ParseERLAnswer reads an answer to an ERL call sent over HTTP. A 5xx is
// an error, as a source failure is for a library driver; any other status
// is a result.
func ParseERLAnswer(status int, body []byte) (ERLResult, error) {
	if status >= 500 {
		return ERLResult{}, fmt.Errorf("status %d: %s", status, body)
	}
	if status != http.StatusOK {
		return ERLResult{Status: status}, nil
	}
	res := ERLResult{Status: status}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&res.Answer); err != nil {
		return ERLResult{}, fmt.Errorf("decoding %s: %w", body, err)
	}
	return res, nil
}

// answerOf returns v (an answer's wire type) as ParseERLAnswer reads it
// from a body: the same encoding and decoding, so a library driver's
// answer compares equal to an HTTP one.
func answerOf(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

// reporter is the part of testing.TB that checkERL uses.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// checkERL compares an ERL call's result with the step's expectation.
func checkERL(t reporter, where string, st Step, got ERLResult) {
	t.Helper()
	call := st.ERL
	if st.ExpectStatus != 0 {
		if got.Status != st.ExpectStatus {
			t.Errorf("%s: %s %s %s: status %d, want %d", where, call.Call, call.Path, call.Body, got.Status, st.ExpectStatus)
		}
		return
	}
	if got.Status != http.StatusOK {
		t.Errorf("%s: %s %s %s: status %d, want 200", where, call.Call, call.Path, call.Body, got.Status)
		return
	}
	var wrong []string
	for _, k := range slices.Sorted(maps.Keys(call.Expect)) {
		want := call.Expect[k]
		g, ok := got.Answer[k]
		if !ok || !reflect.DeepEqual(g, want) {
			wrong = append(wrong, fmt.Sprintf("%s = %s, want %s", k, show(g, ok), show(want, true)))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%s: %s %s %s:\n  %s\n  answer %s", where, call.Call, call.Path, call.Body, strings.Join(wrong, "\n  "), show(got.Answer, true))
	}
}

// show writes a decoded JSON value for a failure message.
func show(v any, present bool) string {
	if !present {
		return "(absent)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
