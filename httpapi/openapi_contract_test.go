//go:build !limiter_fuzz

package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/limiter-dev/limiter/bearer"
)

// The OpenAPI document (openapi.json) as a contract the handler's real
// answers are held to: each request a test sends is matched to the
// document's operation, the request is validated against it (headers,
// body, security), and so is the answer (status, headers, body), with
// kin-openapi, which validates OpenAPI 3.1 documents with JSON Schema
// 2020-12. Every documented answer the tests see is recorded, so a test
// can tell which ones it never saw.

// restOfPath is the extension that marks a path parameter which takes the
// rest of the path, "/" included (the router's catch-all "*").
const restOfPath = "x-rest-of-path"

// additionalMethods is the path item extension naming the methods a path
// serves that OpenAPI 3.1 has no field for (CONNECT). They answer as the
// path's GET does.
const additionalMethods = "x-additional-methods"

// anyMethod is the path item extension saying that a path serves every
// method, those the document cannot name included, as it serves GET.
const anyMethod = "x-any-method"

// emptyBody is the response extension saying that the answer may also
// come with no body and no Content-Type, which OpenAPI 3.1 cannot say of
// a response that has content: a forward-auth rule with expose: none
// answers so.
const emptyBody = "x-empty-body"

// standardMethodOrder is the order an Allow header lists methods in.
func standardMethodOrder() []string {
	return []string{
		http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodPatch, http.MethodOptions, http.MethodConnect, http.MethodTrace,
	}
}

// apiContract is the loaded document and what the tests have seen of it.
type apiContract struct {
	doc   *openapi3.T
	paths []contractPath
	// answered counts the documented answers seen, by method, path
	// template and response key ("200", "4XX"); the two answers described
	// only in the components are under componentsPath.
	answered map[answerKey]int
	// codes are the error codes seen in answers.
	codes map[string]bool
}

// componentsPath is the path recorded for answers that no operation
// describes: 404 for a path no route has, 405 for a method a path lacks.
const componentsPath = "components"

type answerKey struct{ method, path, response string }

func (k answerKey) String() string { return k.method + " " + k.path + " " + k.response }

// contractPath is one path of the document, compiled to match request
// paths as the router does.
type contractPath struct {
	template string
	item     *openapi3.PathItem
	pattern  *regexp.Regexp
	params   []string
	// rest names the parameter that takes the rest of the path, if any.
	rest string
	// literals counts the fixed segments: the router prefers a fixed
	// segment to a parameter, so /x/{a}/add wins over /x/{a}/{rest}.
	literals int
}

// loadContract reads and validates openapi.json.
func loadContract(t testing.TB) *apiContract {
	t.Helper()
	data, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatalf("loading openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	c := &apiContract{doc: doc, answered: map[answerKey]int{}, codes: map[string]bool{}}
	for template, item := range doc.Paths.Map() {
		p, err := compilePath(template, item)
		if err != nil {
			t.Fatal(err)
		}
		c.paths = append(c.paths, p)
	}
	return c
}

// compilePath turns a path template into a pattern over escaped request
// paths: a parameter is one segment, or the rest of the path when marked
// so.
func compilePath(template string, item *openapi3.PathItem) (contractPath, error) {
	rest := map[string]bool{}
	params := slices.Clone(item.Parameters)
	for _, op := range item.Operations() {
		params = append(params, op.Parameters...)
	}
	for _, p := range params {
		if p.Value != nil && p.Value.Extensions[restOfPath] == true {
			rest[p.Value.Name] = true
		}
	}
	p := contractPath{template: template, item: item}
	var re strings.Builder
	re.WriteString("^")
	segments := strings.Split(strings.TrimPrefix(template, "/"), "/")
	for i, seg := range segments {
		re.WriteString("/")
		name, isParam := strings.CutPrefix(seg, "{")
		if !isParam {
			re.WriteString(regexp.QuoteMeta(seg))
			p.literals++
			continue
		}
		name = strings.TrimSuffix(name, "}")
		p.params = append(p.params, name)
		switch {
		case rest[name] && i != len(segments)-1:
			return contractPath{}, fmt.Errorf("%s: %s takes the rest of the path but is not last", template, name)
		case rest[name]:
			re.WriteString("(.+)")
			p.rest = name
		default:
			re.WriteString("([^/]+)")
		}
	}
	re.WriteString("$")
	p.pattern = regexp.MustCompile(re.String())
	return p, nil
}

// methods are the methods the path serves, by the document.
func (p *contractPath) methods() []string {
	var ms []string
	for m := range p.item.Operations() {
		ms = append(ms, m)
	}
	if extra, ok := p.item.Extensions[additionalMethods].([]any); ok {
		for _, m := range extra {
			ms = append(ms, fmt.Sprint(m))
		}
	}
	return ms
}

// operation is the path's operation for method: its own, or GET's for a
// method named in x-additional-methods, or for any method at all on a
// path with x-any-method.
func (p *contractPath) operation(method string) *openapi3.Operation {
	if op := p.item.GetOperation(method); op != nil {
		return op
	}
	if slices.Contains(p.methods(), method) || p.item.Extensions[anyMethod] == true {
		return p.item.Get
	}
	return nil
}

// find matches a request to the document: its route and path parameters,
// or, for a path the document has without this method, the methods it has
// (a 405), or nothing at all (a 404).
func (c *apiContract) find(method, escapedPath string) (*routers.Route, map[string]string, []string) {
	var best *contractPath
	var groups []string
	allowed := map[string]bool{}
	for i := range c.paths {
		p := &c.paths[i]
		m := p.pattern.FindStringSubmatch(escapedPath)
		if m == nil {
			continue
		}
		for _, meth := range p.methods() {
			allowed[meth] = true
		}
		if p.operation(method) != nil && (best == nil || p.literals > best.literals) {
			best, groups = p, m
		}
	}
	if best == nil {
		var list []string
		for _, m := range standardMethodOrder() {
			if allowed[m] {
				list = append(list, m)
			}
		}
		return nil, nil, list
	}
	params := map[string]string{}
	for i, name := range best.params {
		v, err := url.PathUnescape(groups[i+1])
		if err != nil {
			v = groups[i+1]
		}
		params[name] = v
	}
	return &routers.Route{Spec: c.doc, Path: best.template, PathItem: best.item, Method: method, Operation: best.operation(method)}, params, nil
}

// componentRoute is a route whose only answer is the components response
// name, for the answers no operation describes.
func (c *apiContract) componentRoute(name string, status int) *routers.Route {
	ref := c.doc.Components.Responses[name]
	op := &openapi3.Operation{Responses: openapi3.NewResponses(openapi3.WithStatus(status, ref))}
	return &routers.Route{Spec: c.doc, Path: componentsPath, Method: name, Operation: op}
}

// validationOptions make an undocumented status a failure, and take a
// bearer token as present when the request has one: whether it is the
// right one is the server's to say (a 401), not the document's.
func validationOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		IncludeResponseStatus: true,
		MultiError:            true,
		// The validator would otherwise fill in defaults, taking a null
		// for a missing field, which the server refuses.
		SkipSettingDefaults: true,
		AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
			if _, ok := bearer.FromAuthorization(in.RequestValidationInput.Request.Header.Get("Authorization")); !ok {
				return fmt.Errorf("no bearer token for %s", in.SecuritySchemeName)
			}
			return nil
		},
	}
}

// exchange is one request to a handler and the answer a test expects.
type exchange struct {
	name   string
	method string
	path   string
	// token is sent as a bearer token when not empty.
	token string
	// header holds more request headers. A body is sent as
	// application/json unless header says otherwise or noContentType is
	// set.
	header        map[string]string
	noContentType bool
	body          string
	// accepted says whether the document accepts the request. A request
	// the server refuses for what the document describes (a wrong type, a
	// missing field, a value out of range) must be refused by the document
	// too; one refused for what only the server knows (an unknown limit
	// name, a wrong token) is accepted by it.
	accepted bool
	status   int
	// code is the error code the answer must have, for a refusal.
	code string
	// answerHeaders are headers the answer must have, with these values;
	// an empty value means the answer must not have the header.
	answerHeaders map[string]string
}

func (ex exchange) request() *http.Request {
	req := httptest.NewRequest(ex.method, ex.path, strings.NewReader(ex.body))
	if ex.body != "" && !ex.noContentType {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range ex.header {
		req.Header.Set(k, v)
	}
	if ex.token != "" {
		req.Header.Set("Authorization", "Bearer "+ex.token)
	}
	return req
}

// run sends ex to h, checks the status and code, and validates the request
// and the answer against the document. A GET is sent again as a HEAD,
// whose answer must have the GET's status and Content-Type (net/http's
// server drops a HEAD answer's body, which a recorder keeps).
func (c *apiContract) run(t *testing.T, h http.Handler, ex exchange) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, ex.request())
	if rec.Code != ex.status {
		t.Errorf("%s: %s %s: status %d, want %d: %s", ex.name, ex.method, ex.path, rec.Code, ex.status, rec.Body)
	}
	if got := errorCode(rec.Body.Bytes()); got != ex.code {
		t.Errorf("%s: %s %s: error code %q, want %q: %s", ex.name, ex.method, ex.path, got, ex.code, rec.Body)
	}
	for k, want := range ex.answerHeaders {
		if got := rec.Header().Get(k); got != want {
			t.Errorf("%s: %s %s: %s %q, want %q", ex.name, ex.method, ex.path, k, got, want)
		}
	}
	c.validate(t, ex, rec)
	if ex.method == http.MethodGet {
		head := ex
		head.method, head.name = http.MethodHead, ex.name+" (HEAD)"
		hrec := httptest.NewRecorder()
		h.ServeHTTP(hrec, head.request())
		if hrec.Code != rec.Code || hrec.Header().Get("Content-Type") != rec.Header().Get("Content-Type") {
			t.Errorf("%s: status %d, %s, want %d, %s as the GET", head.name, hrec.Code, hrec.Header().Get("Content-Type"), rec.Code, rec.Header().Get("Content-Type"))
		}
		c.validate(t, head, hrec)
	}
	return rec
}

// errorCode is the code of an error body, or "" for any other body.
func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error.Code
}

// validate holds ex's request and its answer rec to the document.
func (c *apiContract) validate(t *testing.T, ex exchange, rec *httptest.ResponseRecorder) {
	t.Helper()
	ctx := context.Background()
	req := ex.request()
	opts := validationOptions()
	route, params, allowed := c.find(req.Method, req.URL.EscapedPath())
	switch {
	case route != nil:
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
		err := openapi3filter.ValidateRequest(ctx, in)
		switch {
		case ex.accepted && err != nil:
			t.Errorf("%s: the document refuses the request %s %s: %v", ex.name, ex.method, ex.path, err)
		case !ex.accepted && err == nil:
			t.Errorf("%s: the document accepts the request %s %s, which it should refuse", ex.name, ex.method, ex.path)
		}
	case ex.accepted:
		t.Errorf("%s: %s %s is accepted, but the document has no such operation", ex.name, ex.method, ex.path)
	}
	if route == nil {
		name, status := "NotFound", http.StatusNotFound
		if len(allowed) > 0 {
			name, status = "MethodNotAllowed", http.StatusMethodNotAllowed
			if got, want := rec.Header().Get("Allow"), strings.Join(allowed, ", "); got != want {
				t.Errorf("%s: Allow %q, but the document has %q on %s", ex.name, got, want, ex.path)
			}
		}
		if rec.Code != status {
			t.Errorf("%s: %s %s answered %d; the document says %d", ex.name, ex.method, ex.path, rec.Code, status)
			return
		}
		route = c.componentRoute(name, status)
	}
	c.validateAnswer(t, ex.name, &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}, rec)
}

// validateAnswer holds an answer to the route's operation, and records it.
func (c *apiContract) validateAnswer(t *testing.T, name string, in *openapi3filter.RequestValidationInput, rec *httptest.ResponseRecorder) {
	t.Helper()
	key := responseKey(in.Route.Operation.Responses, rec.Code)
	if key == "" {
		t.Errorf("%s: %s %s answered %d, which the document does not describe: %s", name, in.Request.Method, in.Request.URL.Path, rec.Code, rec.Body)
		return
	}
	if in.Request.Method == http.MethodHead {
		// The validator skips HEAD answers; the HEAD operation's
		// responses have no body to check, but their headers are.
		get := *in
		get.Request = in.Request.Clone(in.Request.Context())
		get.Request.Method = http.MethodGet
		in = &get
	} else if html := strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html"); html || rec.Body.Len() == 0 && rec.Header().Get("Content-Type") == "" {
		// No body at all: only an answer marked so may have none, and
		// then its headers are still held to the document. An HTML page
		// (the operator's, and a redirect to it) is a string to the
		// document, which the validator has no decoder for; the ui
		// package tests the page itself.
		if !html && in.Route.Operation.Responses.Value(key).Value.Extensions[emptyBody] != true {
			t.Errorf("%s: %s %s answered %d without a body, which the document does not allow (no %s)", name, in.Request.Method, in.Request.URL.Path, rec.Code, emptyBody)
		}
		opts := *in.Options
		opts.ExcludeResponseBody = true
		noBody := *in
		noBody.Options = &opts
		in = &noBody
	}
	err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 rec.Code,
		Header:                 rec.Header(),
		Body:                   io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
		Options:                in.Options,
	})
	if err != nil {
		t.Errorf("%s: the answer to %s %s does not match the document: %v\nbody: %s", name, in.Request.Method, in.Request.URL.Path, err, rec.Body)
	}
	c.answered[answerKey{in.Route.Method, in.Route.Path, key}]++
	if code := errorCode(rec.Body.Bytes()); code != "" {
		c.codes[code] = true
	}
}

// responseKey is the key of responses that describes status: the status
// itself, or its range ("4XX"); "" when none does.
func responseKey(responses *openapi3.Responses, status int) string {
	exact := fmt.Sprint(status)
	if responses.Value(exact) != nil {
		return exact
	}
	if rng := exact[:1] + "XX"; responses.Value(rng) != nil {
		return rng
	}
	return ""
}

// documented lists every answer the document describes: each operation's
// responses (the additional methods' too, under their own name), and the
// two that only the components describe.
func (c *apiContract) documented() []answerKey {
	var keys []answerKey
	for _, p := range c.paths {
		for _, m := range p.methods() {
			for key := range p.operation(m).Responses.Map() {
				keys = append(keys, answerKey{m, p.template, key})
			}
		}
	}
	keys = append(keys, answerKey{"NotFound", componentsPath, "404"}, answerKey{"MethodNotAllowed", componentsPath, "405"})
	slices.SortFunc(keys, func(a, b answerKey) int { return strings.Compare(a.String(), b.String()) })
	return keys
}

// errorCodes lists the codes the document's error body may have.
func (c *apiContract) errorCodes(t *testing.T) []string {
	t.Helper()
	s := c.doc.Components.Schemas["Error"].Value.Properties["error"].Value.Properties["code"].Value
	var codes []string
	for _, v := range s.Enum {
		codes = append(codes, fmt.Sprint(v))
	}
	if len(codes) == 0 {
		t.Fatal("the document's Error schema lists no codes")
	}
	return codes
}
