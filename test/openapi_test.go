package test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// The running service serves the repository's OpenAPI document, and its
// answers over the wire match it. The in-process tests of httpapi drive
// every route and refusal; this one checks what only a real server shows:
// the document it actually serves, HEAD answers without a body, and the
// headers as they cross the network.

// wireContract is openapi.json with the paths compiled to match request
// paths as the service's router does.
type wireContract struct {
	doc   *openapi3.T
	paths []wirePath
}

type wirePath struct {
	template string
	item     *openapi3.PathItem
	pattern  *regexp.Regexp
	params   []string
	literals int
}

// loadWireContract loads and validates a document.
func loadWireContract(t *testing.T, data []byte) *wireContract {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the served document is not valid OpenAPI: %v", err)
	}
	c := &wireContract{doc: doc}
	for template, item := range doc.Paths.Map() {
		rest := map[string]bool{}
		params := item.Parameters
		for _, op := range item.Operations() {
			params = append(params, op.Parameters...)
		}
		for _, p := range params {
			if p.Value.Extensions["x-rest-of-path"] == true {
				rest[p.Value.Name] = true
			}
		}
		wp := wirePath{template: template, item: item}
		re := "^"
		for _, seg := range strings.Split(strings.TrimPrefix(template, "/"), "/") {
			name, isParam := strings.CutPrefix(seg, "{")
			switch name = strings.TrimSuffix(name, "}"); {
			case !isParam:
				re += "/" + regexp.QuoteMeta(seg)
				wp.literals++
			case rest[name]:
				re += "/(.+)"
				wp.params = append(wp.params, name)
			default:
				re += "/([^/]+)"
				wp.params = append(wp.params, name)
			}
		}
		wp.pattern = regexp.MustCompile(re + "$")
		c.paths = append(c.paths, wp)
	}
	return c
}

// route matches a request to the document's operation; nil when the
// document has none (a 404 or 405 the router answers).
func (c *wireContract) route(method, escapedPath string) (*routers.Route, map[string]string) {
	var best *wirePath
	var groups []string
	for i := range c.paths {
		p := &c.paths[i]
		if m := p.pattern.FindStringSubmatch(escapedPath); m != nil && p.item.GetOperation(method) != nil &&
			(best == nil || p.literals > best.literals) {
			best, groups = p, m
		}
	}
	if best == nil {
		return nil, nil
	}
	params := map[string]string{}
	for i, name := range best.params {
		if v, err := url.PathUnescape(groups[i+1]); err == nil {
			params[name] = v
		}
	}
	return &routers.Route{Spec: c.doc, Path: best.template, PathItem: best.item, Method: method, Operation: best.item.GetOperation(method)}, params
}

// wireCall is one request to the service and the status it must answer.
type wireCall struct {
	method, path, token, body string
	header                    map[string]string
	accepted                  bool // the document accepts the request
	status                    int
}

// send makes the call on p and validates the request and the answer with
// c. A GET is sent again as a HEAD, which must answer the same status and
// headers with no body.
func (c *wireContract) send(t *testing.T, p *limiterProc, call wireCall) response {
	t.Helper()
	build := func(method string, target string) *http.Request {
		req := httptest.NewRequest(method, target, strings.NewReader(call.body))
		req.RequestURI = ""
		if call.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range call.header {
			req.Header.Set(k, v)
		}
		if call.token != "" {
			req.Header.Set("Authorization", "Bearer "+call.token)
		}
		return req
	}
	resp := p.send(build(call.method, p.URL+call.path))
	if resp.Status != call.status {
		t.Errorf("%s %s: %d, want %d: %s", call.method, call.path, resp.Status, call.status, resp.Body)
	}
	c.validate(t, build(call.method, call.path), call.accepted, resp)
	if call.method == http.MethodGet {
		head := p.send(build(http.MethodHead, p.URL+call.path))
		if head.Status != resp.Status || len(head.Body) != 0 || head.Header.Get("Content-Type") != resp.Header.Get("Content-Type") {
			t.Errorf("HEAD %s: %d, %s, %d bytes; want GET's %d, %s, none", call.path,
				head.Status, head.Header.Get("Content-Type"), len(head.Body), resp.Status, resp.Header.Get("Content-Type"))
		}
		c.validate(t, build(http.MethodHead, call.path), call.accepted, head)
	}
	return resp
}

// validate holds a request and its answer to the document. A request the
// document has no operation for is held to the answers the components
// describe: 405 with Allow, or 404.
func (c *wireContract) validate(t *testing.T, req *http.Request, accepted bool, resp response) {
	t.Helper()
	ctx := context.Background()
	opts := &openapi3filter.Options{
		IncludeResponseStatus: true,
		SkipSettingDefaults:   true,
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
	}
	route, params := c.route(req.Method, req.URL.EscapedPath())
	if route == nil && accepted {
		t.Errorf("%s %s: accepted, but the document has no such operation", req.Method, req.URL.Path)
	}
	if route == nil {
		name := "NotFound"
		if resp.Status == http.StatusMethodNotAllowed {
			name = "MethodNotAllowed"
		}
		ref := c.doc.Components.Responses[name]
		route = &routers.Route{Spec: c.doc, Path: req.URL.Path, Method: req.Method,
			Operation: &openapi3.Operation{Responses: openapi3.NewResponses(openapi3.WithStatus(resp.Status, ref))}}
	} else if err := openapi3filter.ValidateRequest(ctx, &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}); (err == nil) != accepted {
		t.Errorf("%s %s: the document accepts the request: %v; want %v (%v)", req.Method, req.URL.Path, err == nil, accepted, err)
	}
	if req.Method == http.MethodHead {
		// The validator skips HEAD answers: the HEAD operation is held
		// to its headers as a GET would be, and a 404 or 405 to the
		// components' answer without its body.
		req = req.Clone(ctx)
		req.Method = http.MethodGet
		opts.ExcludeResponseBody = true
	} else if len(resp.Body) == 0 && resp.Header.Get("Content-Type") == "" {
		// No body at all (a forward-auth rule with expose: none): only an
		// answer marked x-empty-body may have none; its headers are still
		// held to the document.
		if r := route.Operation.Responses.Status(resp.Status); r == nil || r.Value.Extensions["x-empty-body"] != true {
			t.Errorf("%s %s: %d without a body, which the document does not allow", req.Method, req.URL.Path, resp.Status)
		}
		opts.ExcludeResponseBody = true
	}
	err := openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts},
		Status:                 resp.Status,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(resp.Body)),
		Options:                opts,
	})
	if err != nil {
		t.Errorf("%s %s: the answer does not match the document: %v\n%s", route.Method, req.URL.Path, err, resp.Body)
	}
}

func TestOpenAPIServedByTheBinary(t *testing.T) {
	file, err := os.ReadFile(filepath.Join(repoRoot, "httpapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const api, admin = "api-tok", "admin-tok"
	p := startLimiter(t, procOptions{
		Args: []string{"--max-body-bytes", "4096",
			"--api-token-file", writeFile(t, dir, "api.tokens", api+"\n"), "--admin-token-file", writeFile(t, dir, "admin.tokens", admin+"\n")},
		Env: map[string]string{"LIMITER_FAKECLOCK": fakeClockStart},
	})

	// The document is served as the repository has it, to anyone.
	served := p.do("GET", "/openapi.json", "")
	if served.Status != 200 || served.Header.Get("Content-Type") != "application/json" || !bytes.Equal(served.Body, file) {
		t.Fatalf("GET /openapi.json: %d %s, %d bytes; want 200 application/json and httpapi/openapi.json (%d bytes)",
			served.Status, served.Header.Get("Content-Type"), len(served.Body), len(file))
	}
	if head := p.do("HEAD", "/openapi.json", ""); head.Header.Get("Content-Length") != strconv.Itoa(len(file)) || len(head.Body) != 0 {
		t.Errorf("HEAD /openapi.json: Content-Length %q and %d bytes, want %d and none", head.Header.Get("Content-Length"), len(head.Body), len(file))
	}
	c := loadWireContract(t, served.Body)

	spend := func(body string) wireCall {
		return wireCall{method: "POST", path: "/v1/spend", token: api, body: body, accepted: true, status: 200}
	}
	refund := wireCall{method: "POST", path: "/v1/refund", token: api, header: map[string]string{"Idempotency-Key": "wire-1"},
		body: `{"limit":"LoginAttemptsPerUser","id":"alice"}`, accepted: true, status: 200}
	for _, call := range []wireCall{
		spend(`{"limit":"LoginAttemptsPerUser","id":"alice"}`),
		spend(`{"limit":"LoginAttemptsPerUser","id":"alice","cost":5}`), // denied
		spend(`{"transactions":[{"limit":"APIRequestsPerConsumer","id":"c1"},{"limit":"SearchRequestsPerKey","id":"k:search"},{"limit":"LoginAttemptsPerAccount","id":"42","mode":"check-only"}]}`),
		{method: "POST", path: "/v1/check", token: api, body: `{"limit":"RequestsPerClientIP","id":"192.0.2.1","cost":0}`, accepted: true, status: 200},
		refund,
		refund, // replayed
		{method: "POST", path: "/v1/reset", token: admin, body: `{"limit":"LoginAttemptsPerUser","id":"alice"}`, accepted: true, status: 200},
		{method: "GET", path: "/v1/limits", token: api, accepted: true, status: 200},
		{method: "GET", path: "/v1/limits/NewRegistrationsPerIPv6Range/2001:db8:abcd::/48", token: api, accepted: true, status: 200},
		{method: "GET", path: "/v1/limits/APIRequestsPerConsumer/c1", token: api, accepted: true, status: 200},
		{method: "POST", path: "/v1/erl/check_rate", token: api, accepted: true, status: 200,
			body: `{"entry":"192.0.2.1","ratecounter":"RequestsPerClientIP","delta":1001,"window":10,"limit":100,"penaltybox":"RequestsPerClientIP","ttl":"15m"}`},
		{method: "GET", path: "/v1/erl/ratecounters/RequestsPerClientIP/192.0.2.1", token: api, accepted: true, status: 200},
		{method: "GET", path: "/v1/erl/penaltyboxes/RequestsPerClientIP/192.0.2.1", token: api, accepted: true, status: 200},
		{method: "GET", path: "/v1/forward-auth/api", token: api, header: map[string]string{"X-Api-Key": "key-1"}, accepted: true, status: 200},
		{method: "POST", path: "/v1/forward-auth/api", token: api, accepted: true, status: 429}, // no X-Api-Key: missing_id
		// password-reset shows nothing (expose: none): 3 allowed an hour,
		// the GET's HEAD the second, then refused with 403 for nginx.
		{method: "GET", path: "/v1/forward-auth/password-reset", token: api, accepted: true, status: 200},
		{method: "POST", path: "/v1/forward-auth/password-reset", token: api, accepted: true, status: 200},
		{method: "POST", path: "/v1/forward-auth/password-reset", token: api, accepted: true, status: 403},
		{method: "POST", path: "/v1/admin/sync", token: admin, accepted: true, status: 200},
		{method: "POST", path: "/v1/admin/reload", token: admin, accepted: true, status: 200},
		{method: "GET", path: "/healthz", accepted: true, status: 200},
		{method: "GET", path: "/readyz", accepted: true, status: 200},
		{method: "GET", path: "/metrics", accepted: true, status: 200},
		{method: "GET", path: "/debug/clock", token: admin, accepted: true, status: 200},
		{method: "POST", path: "/debug/clock", token: admin, body: `{"advance":"1s"}`, accepted: true, status: 200},

		{method: "POST", path: "/v1/spend", body: `{"limit":"LoginAttemptsPerUser","id":"alice"}`, accepted: true, status: 401},
		{method: "POST", path: "/v1/spend", token: api, body: `{"limit":"Nope","id":"a"}`, accepted: true, status: 400},
		{method: "POST", path: "/v1/spend", token: api, body: `{"limit":"LoginAttemptsPerUser","id":"a","cost":-1}`, status: 400},
		{method: "POST", path: "/v1/spend", token: api, body: `{"limit":`, status: 400},
		{method: "POST", path: "/v1/spend", token: api, body: `{"limit":"LoginAttemptsPerUser","id":"a"}`, header: map[string]string{"Content-Type": "text/plain"}, status: 415},
		{method: "POST", path: "/v1/spend", token: api, body: `{"limit":"LoginAttemptsPerUser","id":"` + strings.Repeat("a", 5000) + `"}`, accepted: true, status: 413},
		{method: "GET", path: "/v1/spend", token: api, status: 405},
		{method: "GET", path: "/nope", status: 404},
	} {
		t.Run(fmt.Sprintf("%s %s", call.method, call.path), func(t *testing.T) {
			resp := c.send(t, p, call)
			if call.status == 405 && resp.Header.Get("Allow") != "POST" {
				t.Errorf("Allow %q, want POST", resp.Header.Get("Allow"))
			}
		})
	}
}
