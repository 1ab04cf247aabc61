//go:build !limiter_fuzz

package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

// Bodies the exchanges below share.
const (
	checkRateOK  = `{"entry":"192.0.2.1","ratecounter":"PerIP","delta":1,"window":10,"limit":10,"penaltybox":"PerIP","ttl":"2m"}`
	checkRatesOK = `{"entry":"192.0.2.2","checks":[{"ratecounter":"PerIP","delta":1,"window":10,"limit":10},{"ratecounter":"Burst","delta":1,"window":1,"limit":20}],"penaltybox":"PerIP","ttl":"1m"}`
)

// bodyRoute is a route that reads a JSON body: a body it takes, and the
// token it needs on the handler with tokens.
type bodyRoute struct {
	path, body, token string
}

// bodyRoutes are every route with a body, on the handler with tokens and
// the fake clock.
func bodyRoutes() []bodyRoute {
	return []bodyRoute{
		{"/v1/spend", `{"limit":"Plain","id":"body-routes"}`, apiToken},
		{"/v1/check", `{"limit":"Plain","id":"body-routes"}`, apiToken},
		{"/v1/refund", `{"limit":"Plain","id":"body-routes"}`, apiToken},
		{"/v1/reset", `{"limit":"Plain","id":"body-routes"}`, adminToken},
		{"/v1/release", `{"limit":"Slots","id":"body-routes","lease":"0123456789abcdef0123456789abcdef"}`, apiToken},
		{"/v1/renew", `{"limit":"Slots","id":"body-routes","lease":"0123456789abcdef0123456789abcdef"}`, apiToken},
		{"/v1/erl/check_rate", checkRateOK, apiToken},
		{"/v1/erl/check_rates", checkRatesOK, apiToken},
		{"/v1/erl/ratecounters/PerIP/increment", `{"entry":"192.0.2.3","delta":1}`, apiToken},
		{"/v1/erl/penaltyboxes/Lockout/add", `{"entry":"body-routes","ttl":"1m"}`, apiToken},
		{"/v1/erl/penaltyboxes/Lockout/remove", `{"entry":"body-routes"}`, adminToken},
		{"/debug/clock", `{"advance":"0s"}`, adminToken},
	}
}

// bodyRefusals are the refusals every body route shares: no token, a body
// too large, a body of another media type; and the route's body taken.
func bodyRefusals() []exchange {
	var out []exchange
	for _, r := range bodyRoutes() {
		// Valid JSON, padded past the 2048 bytes the handler takes (4096
		// for the clock): what the document accepts, the size aside.
		large := r.body[:len(r.body)-1] + strings.Repeat(" ", 5000) + "}"
		out = append(out,
			exchange{name: "a body the route takes", method: "POST", path: r.path, token: r.token, body: r.body, accepted: true, status: 200},
			exchange{name: "no token", method: "POST", path: r.path, body: r.body, accepted: true, status: 401, code: "unauthorized",
				answerHeaders: map[string]string{"WWW-Authenticate": `Bearer realm="limiter"`}},
			exchange{name: "a body too large", method: "POST", path: r.path, token: r.token, body: large, accepted: true, status: 413, code: "body_too_large"},
			exchange{name: "text/plain", method: "POST", path: r.path, token: r.token, body: r.body, header: map[string]string{"Content-Type": "text/plain"},
				status: 415, code: "unsupported_media_type"},
		)
	}
	return out
}

// decisionExchanges spend, check, refund and reset, and are refused in
// every way a transaction body can be.
func decisionExchanges() []exchange {
	spend := func(name, body string, accepted bool, status int, code string) exchange {
		return exchange{name: name, method: "POST", path: "/v1/spend", token: apiToken, body: body, accepted: accepted, status: status, code: code}
	}
	keyed := func(name, path, key, body string, accepted bool, status int, code string) exchange {
		return exchange{name: name, method: "POST", path: path, token: apiToken, header: map[string]string{"Idempotency-Key": key},
			body: body, accepted: accepted, status: status, code: code}
	}
	sixTransactions := `{"transactions":[` + strings.TrimSuffix(strings.Repeat(`{"limit":"Plain","id":"x"},`, 6), ",") + `]}`
	return []exchange{
		{name: "a spend", method: "POST", path: "/v1/spend", token: apiToken, body: `{"limit":"Plain","id":"alice"}`, accepted: true, status: 200,
			answerHeaders: map[string]string{"RateLimit-Policy": `"Plain";q=5;w=1`, "RateLimit": `"Plain";r=4;t=1`, "Retry-After": ""}},
		spend("a batch of every mode, algorithm, a lockout and a shadow limit", `{"transactions":[`+
			`{"limit":"Plain","id":"bob","cost":2,"mode":"check-and-spend"},{"limit":"Window","id":"bob","mode":"check-only"},`+
			`{"limit":"PerIP","id":"192.0.2.7","cost":3,"mode":"spend-only"},{"limit":"Lockout","id":"bob","cost":0},{"limit":"Shadowed","id":"bob"}]}`,
			true, 200, ""),
		{name: "a calendar limit's spend", method: "POST", path: "/v1/spend", token: apiToken, body: `{"limit":"Monthly","id":"alice","cost":40}`, accepted: true, status: 200,
			answerHeaders: map[string]string{"RateLimit-Policy": `"Monthly";q=100;w=2592000`, "RateLimit": `"Monthly";r=60;t=774000`}},
		spend("a batch of a calendar limit and a window", `{"transactions":[{"limit":"Monthly","id":"bob","cost":100},{"limit":"Window","id":"bob","cost":1}]}`, true, 200, ""),
		spend("a calendar limit's denial", `{"limit":"Monthly","id":"bob"}`, true, 200, ""),
		spend("a name without a default is unlimited", `{"limit":"NewOrdersPerAccount","id":"42"}`, true, 200, ""),
		spend("an override", `{"limit":"Plain","id":"vip"}`, true, 200, ""),
		{name: "a denial is a 200", method: "POST", path: "/v1/spend", token: apiToken, body: `{"limit":"Plain","id":"alice","cost":5}`, accepted: true, status: 200,
			answerHeaders: map[string]string{"Retry-After": "1"}},
		keyed("a spend with an Idempotency-Key", "/v1/spend", "order-1", `{"limit":"Plain","id":"carol"}`, true, 200, ""),
		{name: "its retry is replayed", method: "POST", path: "/v1/spend", token: apiToken, header: map[string]string{"Idempotency-Key": "order-1"},
			body: `{"limit":"Plain","id":"carol"}`, accepted: true, status: 200, answerHeaders: map[string]string{"Idempotent-Replayed": "true"}},
		keyed("the key with another body", "/v1/spend", "order-1", `{"limit":"Plain","id":"dave"}`, true, 422, "idempotency_key_reused"),
		keyed("the spend's key on a refund", "/v1/refund", "order-1", `{"limit":"Plain","id":"carol"}`, true, 422, "idempotency_key_reused"),
		keyed("a key with a space", "/v1/spend", "order 2", `{"limit":"Plain","id":"carol"}`, false, 400, "invalid_idempotency_key"),
		keyed("a key on a limit with a penalty", "/v1/spend", "lock-1", `{"limit":"Lockout","id":"carol"}`, true, 400, "invalid_idempotency_key"),
		keyed("a check ignores any Idempotency-Key", "/v1/check", "not a key", `{"limit":"Plain","id":"alice"}`, true, 200, ""),
		keyed("a refund with an Idempotency-Key", "/v1/refund", "refund-1", `{"limit":"Plain","id":"alice","cost":1}`, true, 200, ""),
		{name: "a reset reads cost and mode for their types only", method: "POST", path: "/v1/reset", token: adminToken,
			body: `{"transactions":[{"limit":"Plain","id":"alice"},{"limit":"Lockout","id":"bob","mode":"anything","cost":-3}]}`, accepted: true, status: 200},
		{name: "a reset with the API token", method: "POST", path: "/v1/reset", token: apiToken, body: `{"limit":"Plain","id":"alice"}`,
			accepted: true, status: 401, code: "unauthorized"},
		{name: "a wrong token", method: "POST", path: "/v1/spend", token: "guess", body: `{"limit":"Plain","id":"alice"}`,
			accepted: true, status: 401, code: "unauthorized"},
		{name: "no Content-Type is taken as JSON, which the document does not promise", method: "POST", path: "/v1/spend", token: apiToken,
			body: `{"limit":"Plain","id":"erin"}`, noContentType: true, status: 200},

		spend("not JSON", `{"limit":`, false, 400, "malformed_json"),
		spend("an empty body", ``, false, 400, "malformed_json"),
		spend("an unknown field", `{"limit":"Plain","id":"a","colour":"red"}`, false, 400, "unknown_field"),
		spend("a field in another case", `{"LIMIT":"Plain","id":"a"}`, false, 400, "unknown_field"),
		spend("a wrong type", `{"limit":7,"id":"a"}`, false, 400, "invalid_request"),
		spend("no id", `{"limit":"Plain"}`, false, 400, "invalid_request"),
		spend("both forms", `{"limit":"Plain","id":"a","transactions":[{"limit":"Plain","id":"b"}]}`, false, 400, "invalid_request"),
		spend("a null mode", `{"limit":"Plain","id":"a","mode":null}`, false, 400, "invalid_request"),
		spend("not an object", `[1]`, false, 400, "invalid_request"),
		spend("an empty batch", `{"transactions":[]}`, false, 400, "empty_batch"),
		spend("more than --max-batch", sixTransactions, true, 400, "batch_too_large"),
		spend("an unknown limit", `{"limit":"Nope","id":"a"}`, true, 400, "unknown_limit"),
		spend("an id its kind refuses", `{"limit":"PerIP","id":"not-an-ip"}`, true, 400, "invalid_id"),
		spend("a negative cost", `{"limit":"Plain","id":"a","cost":-1}`, false, 400, "invalid_cost"),
		spend("a fractional cost", `{"limit":"Plain","id":"a","cost":1.5}`, false, 400, "invalid_cost"),
		spend("a null cost", `{"limit":"Plain","id":"a","cost":null}`, false, 400, "invalid_cost"),
		spend("a cost above the burst", `{"limit":"Plain","id":"a","cost":6}`, true, 400, "invalid_cost"),
		spend("an unknown mode", `{"limit":"Plain","id":"a","mode":"sometimes"}`, false, 400, "invalid_mode"),
		spend("one bucket twice", `{"transactions":[{"limit":"Ranges","id":"2001:db8:abcd::/48"},{"limit":"Ranges","id":"2001:DB8:ABCD::/48"}]}`, true, 400, "duplicate_bucket"),
		{name: "a check's refusal", method: "POST", path: "/v1/check", token: apiToken, body: `{"limit":"Nope","id":"a"}`, accepted: true, status: 400, code: "unknown_limit"},
		{name: "a refund's refusal", method: "POST", path: "/v1/refund", token: apiToken, body: `{"limit":"Plain","id":"a","cost":99}`, accepted: true, status: 400, code: "invalid_cost"},
		{name: "a reset's refusal", method: "POST", path: "/v1/reset", token: adminToken, body: `{"limit":"PerIP","id":"nope"}`, accepted: true, status: 400, code: "invalid_id"},
	}
}

// leaseExchanges acquire, release and renew leases of a concurrency
// limit, and are refused in the ways only lease bodies are.
func leaseExchanges() []exchange {
	post := func(name, path, body string, accepted bool, status int, code string) exchange {
		return exchange{name: name, method: "POST", path: path, token: apiToken, body: body, accepted: accepted, status: status, code: code}
	}
	const lease = `{"limit":"Slots","id":"ann","lease":"0123456789abcdef0123456789abcdef"}`
	keyed := func(name, key, body string, status int, code string) exchange {
		ex := post(name, "/v1/release", body, true, status, code)
		ex.header = map[string]string{"Idempotency-Key": key}
		return ex
	}
	return []exchange{
		{name: "an acquire", method: "POST", path: "/v1/spend", token: apiToken, body: `{"limit":"Slots","id":"ann"}`, accepted: true, status: 200,
			answerHeaders: map[string]string{"RateLimit-Policy": `"Slots";q=2;qu="concurrent-requests"`, "RateLimit": `"Slots";r=1;t=60`}},
		post("a release of no live lease", "/v1/release", lease, true, 200, ""),
		post("a renewal of a batch", "/v1/renew", `{"transactions":[`+lease+`]}`, true, 200, ""),
		keyed("a release with an Idempotency-Key", "release-1", lease, 200, ""),
		{name: "the release's key on a renewal", method: "POST", path: "/v1/renew", token: apiToken, header: map[string]string{"Idempotency-Key": "release-1"},
			body: lease, accepted: true, status: 422, code: "idempotency_key_reused"},
		keyed("the key with another lease", "release-1", `{"limit":"Slots","id":"ann","lease":"ffffffffffffffffffffffffffffffff"}`, 422, "idempotency_key_reused"),
		post("a lease that is no id", "/v1/release", `{"limit":"Slots","id":"ann","lease":"nope"}`, false, 400, "invalid_lease"),
		post("a release of a limit that is no concurrency limit", "/v1/release", `{"limit":"Plain","id":"ann","lease":"0123456789abcdef0123456789abcdef"}`, true, 400, "invalid_request"),
		post("a renewal without its lease", "/v1/renew", `{"limit":"Slots","id":"ann"}`, false, 400, "invalid_request"),
		post("a release with a cost", "/v1/release", `{"limit":"Slots","id":"ann","lease":"0123456789abcdef0123456789abcdef","cost":1}`, false, 400, "unknown_field"),
		post("a release of an unknown limit", "/v1/release", `{"limit":"Nope","id":"ann","lease":"0123456789abcdef0123456789abcdef"}`, true, 400, "unknown_limit"),
		post("a release of a refused id", "/v1/release", `{"limit":"Plain","id":"","lease":"0123456789abcdef0123456789abcdef"}`, true, 400, "invalid_id"),
		post("a refund of a concurrency limit", "/v1/refund", `{"limit":"Slots","id":"ann"}`, true, 400, "invalid_request"),
		post("a renewal of an empty batch", "/v1/renew", `{"transactions":[]}`, false, 400, "empty_batch"),
		post("a renewal that is not JSON", "/v1/renew", `{"limit":`, false, 400, "malformed_json"),
	}
}

// limitsExchanges read the limits and single buckets.
func limitsExchanges() []exchange {
	get := func(name, path, token string, accepted bool, status int, code string) exchange {
		return exchange{name: name, method: "GET", path: path, token: token, accepted: accepted, status: status, code: code}
	}
	return []exchange{
		get("the limits", "/v1/limits", apiToken, true, 200, ""),
		get("the limits without a token", "/v1/limits", "", true, 401, "unauthorized"),
		get("a bucket", "/v1/limits/Plain/alice", apiToken, true, 200, ""),
		get("a bucket of an override", "/v1/limits/Plain/vip", apiToken, true, 200, ""),
		get("an id with a slash", "/v1/limits/Ranges/2001:db8:abcd::/48", apiToken, true, 200, ""),
		get("an id with an escaped slash", "/v1/limits/Ranges/2001:db8:abcd::%2F48", apiToken, true, 200, ""),
		get("a window limit's bucket, with its sync_rate", "/v1/limits/Window/bob", apiToken, true, 200, ""),
		get("a calendar limit's bucket", "/v1/limits/Monthly/alice", apiToken, true, 200, ""),
		get("a rate counter's bucket", "/v1/limits/PerIP/192.0.2.7", apiToken, true, 200, ""),
		get("a shadow limit's bucket", "/v1/limits/Shadowed/bob", apiToken, true, 200, ""),
		get("a bucket of an unknown limit", "/v1/limits/Nope/a", apiToken, true, 400, "unknown_limit"),
		get("a bucket of a refused id", "/v1/limits/PerIP/nope", apiToken, true, 400, "invalid_id"),
		get("a bucket without a token", "/v1/limits/Plain/alice", "", true, 401, "unauthorized"),
	}
}

// erlExchanges count, box and read, and are refused in the ERL's ways.
func erlExchanges() []exchange {
	post := func(name, path, body string, accepted bool, status int, code string) exchange {
		return exchange{name: name, method: "POST", path: path, token: apiToken, body: body, accepted: accepted, status: status, code: code}
	}
	get := func(name, path string, status int, code string) exchange {
		return exchange{name: name, method: "GET", path: path, token: apiToken, accepted: true, status: status, code: code}
	}
	const rate, box = "/v1/erl/check_rate", "/v1/erl/penaltyboxes/Lockout/add"
	return []exchange{
		post("hits that box the entry", rate, `{"entry":"192.0.2.9","ratecounter":"PerIP","delta":1000,"window":10,"limit":10,"penaltybox":"PerIP","ttl":"2m"}`, true, 200, ""),
		get("a counter", "/v1/erl/ratecounters/PerIP/192.0.2.3", 200, ""),
		get("a counter of a boxed entry", "/v1/erl/ratecounters/PerIP/192.0.2.9", 200, ""),
		get("a box", "/v1/erl/penaltyboxes/PerIP/192.0.2.9", 200, ""),
		get("an entry named like the add route", "/v1/erl/penaltyboxes/Lockout/add", 200, ""),
		get("a counter of a limit that is no rate counter", "/v1/erl/ratecounters/Plain/x", 400, "invalid_argument"),
		get("a counter of no limit", "/v1/erl/ratecounters/Nope/x", 400, "unknown_limit"),
		get("a counter's refused entry", "/v1/erl/ratecounters/PerIP/nope", 400, "invalid_id"),
		get("a box of a limit without one", "/v1/erl/penaltyboxes/Plain/x", 400, "invalid_argument"),
		{name: "a box without a token", method: "GET", path: "/v1/erl/penaltyboxes/PerIP/192.0.2.9", status: 401, accepted: true, code: "unauthorized"},
		{name: "a counter without a token", method: "GET", path: "/v1/erl/ratecounters/PerIP/192.0.2.9", status: 401, accepted: true, code: "unauthorized"},
		{name: "a removal with the API token", method: "POST", path: "/v1/erl/penaltyboxes/PerIP/remove", token: apiToken,
			body: `{"entry":"192.0.2.9"}`, accepted: true, status: 401, code: "unauthorized"},
		{name: "an add ignores any Idempotency-Key", method: "POST", path: box, token: apiToken, header: map[string]string{"Idempotency-Key": "k"},
			body: `{"entry":"mallory","ttl":"10m"}`, accepted: true, status: 200},
		{name: "check_rate refuses an Idempotency-Key", method: "POST", path: rate, token: apiToken, header: map[string]string{"Idempotency-Key": "k"},
			body: checkRateOK, status: 400, code: "invalid_idempotency_key"},
		post("a window of 5 seconds", rate, strings.Replace(checkRateOK, `"window":10`, `"window":5`, 1), false, 400, "invalid_argument"),
		post("a delta as a string", rate, strings.Replace(checkRateOK, `"delta":1`, `"delta":"1"`, 1), false, 400, "invalid_argument"),
		post("a null delta", rate, strings.Replace(checkRateOK, `"delta":1`, `"delta":null`, 1), false, 400, "invalid_argument"),
		post("a limit below 10", rate, strings.Replace(checkRateOK, `"limit":10`, `"limit":9`, 1), false, 400, "invalid_argument"),
		post("a counter that is no rate counter", rate, strings.Replace(checkRateOK, `"ratecounter":"PerIP"`, `"ratecounter":"Plain"`, 1), true, 400, "invalid_argument"),
		post("a box of a limit without one", rate, strings.Replace(checkRateOK, `"penaltybox":"PerIP"`, `"penaltybox":"Plain"`, 1), true, 400, "invalid_argument"),
		post("a counter of no limit", rate, strings.Replace(checkRateOK, `"ratecounter":"PerIP"`, `"ratecounter":"Nope"`, 1), true, 400, "unknown_limit"),
		post("an entry its kind refuses", rate, strings.Replace(checkRateOK, `"192.0.2.1"`, `"nope"`, 1), true, 400, "invalid_id"),
		post("an entry that is no string", rate, strings.Replace(checkRateOK, `"192.0.2.1"`, `5`, 1), false, 400, "invalid_request"),
		post("no ttl", rate, strings.Replace(checkRateOK, `,"ttl":"2m"`, ``, 1), false, 400, "invalid_request"),
		post("an unknown field", rate, strings.Replace(checkRateOK, `}`, `,"colour":"red"}`, 1), false, 400, "unknown_field"),
		post("not JSON", rate, `{"entry":`, false, 400, "malformed_json"),
		post("one check", "/v1/erl/check_rates", `{"entry":"192.0.2.2","checks":[{"ratecounter":"PerIP","delta":1,"window":10,"limit":10}],"penaltybox":"PerIP","ttl":"1m"}`,
			false, 400, "invalid_argument"),
		post("an increment above 1000", "/v1/erl/ratecounters/PerIP/increment", `{"entry":"192.0.2.3","delta":1001}`, false, 400, "invalid_argument"),
		post("a ttl that is no duration", box, `{"entry":"mallory","ttl":"forever"}`, false, 400, "invalid_argument"),
		post("a ttl above an hour", box, `{"entry":"mallory","ttl":"2h"}`, true, 400, "invalid_argument"),
		{name: "a removal's refusal", method: "POST", path: "/v1/erl/penaltyboxes/Plain/remove", token: adminToken,
			body: `{"entry":"mallory"}`, accepted: true, status: 400, code: "invalid_argument"},
	}
}

// forwardAuthExchanges ask as a proxy would, with method, in every way
// the forward-auth rules answer. Each denial is of a key that bucket
// spends (in the same exchanges) have emptied.
func forwardAuthExchanges(method string) []exchange {
	fa := func(name, rule, key, token string, status int, code string) exchange {
		ex := exchange{name: method + " " + name, method: method, path: "/v1/forward-auth/" + rule, token: token, accepted: true, status: status, code: code}
		if key != "" {
			ex.header = map[string]string{"X-Api-Key": key}
		}
		return ex
	}
	empty := func(key string) exchange {
		return exchange{name: "empty the bucket of " + key, method: "POST", path: "/v1/spend", token: apiToken,
			body: fmt.Sprintf(`{"limit":"Plain","id":%q,"cost":5}`, key), accepted: true, status: 200}
	}
	denied := "denied-" + strings.ToLower(method)
	nginx := "nginx-" + strings.ToLower(method)
	quiet := "quiet-" + strings.ToLower(method)
	// expose: none answers without a body, Content-Type or RateLimit
	// headers; a denial keeps Retry-After.
	none := func(ex exchange, retryAfter string) exchange {
		ex.answerHeaders = map[string]string{"Content-Type": "", "RateLimit": "", "RateLimit-Policy": "", "Retry-After": retryAfter}
		return ex
	}
	return []exchange{
		fa("an allowed request", "api", "key-"+strings.ToLower(method), apiToken, 200, ""),
		fa("an allowed request with the admin token", "api", "key-"+strings.ToLower(method), adminToken, 200, ""),
		fa("every id left out", "open", "", apiToken, 200, ""),
		empty(denied),
		fa("a denial", "api", denied, apiToken, 429, ""),
		empty(nginx),
		fa("a denial with another status", "nginx", nginx, apiToken, 403, ""),
		none(fa("an allowed request, expose: none", "quiet", quiet, apiToken, 200, ""), ""),
		empty(quiet + "-denied"),
		none(fa("a denial, expose: none", "quiet", quiet+"-denied", apiToken, 429, ""), "1"),
		fa("a missing id", "api", "", apiToken, 429, "missing_id"),
		{name: method + " an id its kind refuses", method: method, path: "/v1/forward-auth/ranges", token: apiToken,
			header: map[string]string{"X-Range": "nope"}, accepted: true, status: 400, code: "invalid_id"},
		fa("no such rule", "nope", "k", apiToken, 404, "not_found"),
		fa("no token", "api", "k", "", 401, "unauthorized"),
	}
}

// adminExchanges reload, sync, and serve the operational routes.
func adminExchanges() []exchange {
	return []exchange{
		{name: "a reload", method: "POST", path: "/v1/admin/reload", token: adminToken, accepted: true, status: 200},
		{name: "a reload with the API token", method: "POST", path: "/v1/admin/reload", token: apiToken, accepted: true, status: 401, code: "unauthorized"},
		{name: "a sync", method: "POST", path: "/v1/admin/sync", token: adminToken, accepted: true, status: 200},
		{name: "a sync with the API token", method: "POST", path: "/v1/admin/sync", token: apiToken, accepted: true, status: 401, code: "unauthorized"},
		{name: "the last reload", method: "GET", path: "/v1/admin/reload", token: adminToken, accepted: true, status: 200},
		{name: "the last reload with a parameter", method: "GET", path: "/v1/admin/reload?x=1", token: adminToken, accepted: true, status: 400, code: "invalid_argument"},
		{name: "the last reload with the API token", method: "GET", path: "/v1/admin/reload", token: apiToken, accepted: true, status: 401, code: "unauthorized"},
		{name: "the operator's page", method: "GET", path: "/ui/", accepted: true, status: 200},
		{name: "the operator's page without its slash", method: "GET", path: "/ui", accepted: true, status: 301},
		{name: "a box", method: "GET", path: "/v1/admin/boxes?limit=Lockout", token: adminToken, accepted: true, status: 200},
		{name: "a box's next page", method: "GET", path: "/v1/admin/boxes?limit=PerIP&cursor=203.m1.5", token: adminToken, accepted: true, status: 200},
		{name: "a box of no limit", method: "GET", path: "/v1/admin/boxes?limit=Nope", token: adminToken, accepted: true, status: 400, code: "unknown_limit"},
		{name: "a box with a made-up cursor", method: "GET", path: "/v1/admin/boxes?limit=Lockout&cursor=x", token: adminToken, accepted: true, status: 400, code: "invalid_argument"},
		{name: "a box with the API token", method: "GET", path: "/v1/admin/boxes?limit=Lockout", token: apiToken, accepted: true, status: 401, code: "unauthorized"},
		{name: "the top denied ids", method: "GET", path: "/v1/admin/top?limit=Plain&window=1h", token: adminToken, accepted: true, status: 200},
		{name: "the top denied ids of every limit", method: "GET", path: "/v1/admin/top", token: adminToken, accepted: true, status: 200},
		{name: "the top denied ids of no such limit", method: "GET", path: "/v1/admin/top?limit=Nope", token: adminToken, accepted: true, status: 400, code: "unknown_limit"},
		{name: "the top denied ids of a day", method: "GET", path: "/v1/admin/top?window=24h", token: adminToken, status: 400, code: "invalid_argument"},
		{name: "the top denied ids with the API token", method: "GET", path: "/v1/admin/top", token: apiToken, accepted: true, status: 401, code: "unauthorized"},
		{name: "health", method: "GET", path: "/healthz", accepted: true, status: 200},
		{name: "readiness", method: "GET", path: "/readyz", accepted: true, status: 200},
		{name: "metrics", method: "GET", path: "/metrics", accepted: true, status: 200},
		{name: "this document", method: "GET", path: "/openapi.json", accepted: true, status: 200},
		{name: "the clock", method: "GET", path: "/debug/clock", token: adminToken, accepted: true, status: 200},
		{name: "the clock without a token", method: "GET", path: "/debug/clock", accepted: true, status: 401, code: "unauthorized"},
		{name: "a clock set", method: "POST", path: "/debug/clock", token: adminToken, body: `{"set":"2026-11-22T00:00:10Z"}`, accepted: true, status: 200},
		{name: "a clock moved by a negative duration", method: "POST", path: "/debug/clock", token: adminToken, body: `{"advance":"-1.5s"}`, accepted: true, status: 200},
		{name: "a clock set and moved", method: "POST", path: "/debug/clock", token: adminToken, body: `{"advance":"1s","set":"2026-11-22T00:00:00Z"}`, status: 400, code: "invalid_request"},
		{name: "a clock moved by no duration", method: "POST", path: "/debug/clock", token: adminToken, body: `{"advance":"soon"}`, status: 400, code: "invalid_request"},
		{name: "a clock moved by a number", method: "POST", path: "/debug/clock", token: adminToken, body: `{"advance":5}`, status: 400, code: "invalid_request"},
		{name: "a clock with an unknown field", method: "POST", path: "/debug/clock", token: adminToken, body: `{"colour":"red"}`, status: 400, code: "unknown_field"},
		{name: "a clock body that is not JSON", method: "POST", path: "/debug/clock", token: adminToken, body: `{"set":`, status: 400, code: "malformed_json"},
	}
}

// routingExchanges are answered by the router: no such path, or not this
// method.
func routingExchanges() []exchange {
	return []exchange{
		{name: "no such path", method: "GET", path: "/nope", status: 404, code: "not_found"},
		{name: "no such ERL path", method: "POST", path: "/v1/erl/nope", token: apiToken, body: `{}`, status: 404, code: "not_found"},
		{name: "an escaped slash in a fixed part", method: "GET", path: "/v1%2Flimits", token: apiToken, status: 404, code: "not_found"},
		{name: "GET of a POST route", method: "GET", path: "/v1/spend", token: apiToken, status: 405, code: "method_not_allowed",
			answerHeaders: map[string]string{"Allow": "POST"}},
		{name: "PUT of a GET route", method: "PUT", path: "/healthz", status: 405, code: "method_not_allowed",
			answerHeaders: map[string]string{"Allow": "GET, HEAD"}},
		{name: "DELETE where two routes meet", method: "DELETE", path: "/v1/erl/penaltyboxes/Lockout/add", token: apiToken, status: 405, code: "method_not_allowed",
			answerHeaders: map[string]string{"Allow": "GET, HEAD, POST"}},
		{name: "QUERY of forward-auth, which serves any method", method: "QUERY", path: "/v1/forward-auth/api", token: apiToken, accepted: true, status: 429, code: "missing_id"},
		{name: "a method nobody knows, on forward-auth", method: "BREW", path: "/v1/forward-auth/api", token: apiToken, accepted: true, status: 429, code: "missing_id"},
		{name: "a method nobody knows, elsewhere", method: "BREW", path: "/v1/spend", token: apiToken, status: 405, code: "method_not_allowed",
			answerHeaders: map[string]string{"Allow": "POST"}},
	}
}

// Every route answers as the document says, in success and in every
// refusal the tests can provoke, and the document refuses the requests the
// server refuses for what the document can describe. Then every answer
// the document describes, and every error code, must have been seen,
// except those listed with the reason they cannot be provoked here.
func TestOpenAPIAnswersMatchTheDocument(t *testing.T) {
	c := loadContract(t)
	reload := &reloadHook{}
	main := newContractHandler(t, contractOptions{tokens: true, fakeClock: true, reload: reload})
	var all []exchange
	all = append(all, decisionExchanges()...)
	all = append(all, bodyRefusals()...)
	all = append(all, limitsExchanges()...)
	all = append(all, leaseExchanges()...)
	all = append(all, erlExchanges()...)
	for _, m := range standardMethodOrder() {
		if m != http.MethodHead { // each GET is also sent as a HEAD
			all = append(all, forwardAuthExchanges(m)...)
		}
	}
	all = append(all, adminExchanges()...)
	all = append(all, routingExchanges()...)
	for _, ex := range all {
		c.run(t, main, ex)
	}

	reload.err = fmt.Errorf("defaults.yaml:3: burst must be positive")
	c.run(t, main, exchange{name: "a reload that fails", method: "POST", path: "/v1/admin/reload", token: adminToken, accepted: true, status: 422, code: "reload_failed"})
	reload.err, reload.panics = nil, true
	c.run(t, main, exchange{name: "a reload that panics", method: "POST", path: "/v1/admin/reload", token: adminToken, accepted: true, status: 500, code: "internal"})
	c.run(t, main, exchange{name: "a reload status that panics", method: "GET", path: "/v1/admin/reload", token: adminToken, accepted: true, status: 500, code: "internal"})

	runSourceFailures(t, c)
	runSync(t, c)

	// Without the fake clock or with metrics on a listener of their own,
	// those paths are not served.
	for _, f := range []struct {
		top    failingTop
		status int
		code   string
	}{{failingTop{}, 503, "top_unavailable"}, {failingTop{panics: true}, 500, "internal"}} {
		h := newContractHandler(t, contractOptions{top: f.top})
		c.run(t, h, exchange{name: "a top list that fails", method: "GET", path: "/v1/admin/top", accepted: true, status: f.status, code: f.code})
	}
	// A source that offers no listing (the interface alone hides it).
	unlisted := newContractHandler(t, contractOptions{source: struct{ ratelimits.Source }{memory.New(0)}})
	c.run(t, unlisted, exchange{name: "a box the source cannot list", method: "GET", path: "/v1/admin/boxes?limit=Lockout", accepted: true, status: 501, code: "not_implemented"})
	bare := newContractHandler(t, contractOptions{omitMetrics: true})
	for _, ex := range []exchange{
		{name: "the clock without a fake clock", method: "GET", path: "/debug/clock", accepted: true, status: 404, code: "not_found"},
		{name: "a clock move without a fake clock", method: "POST", path: "/debug/clock", body: `{"advance":"1s"}`, accepted: true, status: 404, code: "not_found"},
		{name: "metrics on their own listener", method: "GET", path: "/metrics", accepted: true, status: 404, code: "not_found"},
	} {
		c.run(t, bare, ex)
	}

	if t.Failed() {
		return // what was not seen follows from what failed
	}
	for _, key := range c.documented() {
		if c.answered[key] > 0 {
			continue
		}
		if reason := notProvoked(key); reason != "" {
			t.Logf("not seen, as expected (%s): %s", reason, key)
			continue
		}
		t.Errorf("openapi.json describes %s, which no exchange of this test answered", key)
	}
	for _, code := range c.errorCodes(t) {
		if !c.codes[code] && code != "idempotency_key_unsettled" { // see notProvoked
			t.Errorf("openapi.json lists error code %s, which no answer of this test had", code)
		}
	}
}

// notProvoked says why a documented answer cannot be provoked in this
// process, or "" when it can and must be.
func notProvoked(key answerKey) string {
	switch {
	case key.response == "409":
		return "a Redis Cluster batch across hash slots"
	case key.response == "500" && (key.path == "/v1/limits" || key.path == "/healthz" || key.path == "/metrics" ||
		key.path == "/openapi.json" || key.path == "/v1/admin/sync" || key.path == "/ui/" || key.path == "/ui"):
		return "reads no source and calls no hook that a test can make panic"
	}
	return ""
}

// runSourceFailures sends a call of every route that asks the source to
// handlers whose source fails: after the call was sent (the outcome is
// unknown), before (nothing applied), by panicking, and failing open.
func runSourceFailures(t *testing.T, c *apiContract) {
	t.Helper()
	calls := []exchange{
		{method: "POST", path: "/v1/spend", body: `{"limit":"Plain","id":"a"}`},
		{method: "POST", path: "/v1/check", body: `{"limit":"Plain","id":"a"}`},
		{method: "POST", path: "/v1/refund", body: `{"limit":"Plain","id":"a"}`},
		{method: "POST", path: "/v1/reset", body: `{"limit":"Plain","id":"a"}`},
		{method: "POST", path: "/v1/release", body: `{"limit":"Slots","id":"a","lease":"0123456789abcdef0123456789abcdef"}`},
		{method: "POST", path: "/v1/renew", body: `{"limit":"Slots","id":"a","lease":"0123456789abcdef0123456789abcdef"}`},
		{method: "GET", path: "/v1/limits/Plain/a"},
		{method: "POST", path: "/v1/erl/check_rate", body: checkRateOK},
		{method: "POST", path: "/v1/erl/check_rates", body: checkRatesOK},
		{method: "POST", path: "/v1/erl/ratecounters/PerIP/increment", body: `{"entry":"192.0.2.3","delta":1}`},
		{method: "GET", path: "/v1/erl/ratecounters/PerIP/192.0.2.3"},
		{method: "POST", path: "/v1/erl/penaltyboxes/Lockout/add", body: `{"entry":"mallory","ttl":"1m"}`},
		{method: "GET", path: "/v1/erl/penaltyboxes/Lockout/mallory"},
		{method: "POST", path: "/v1/erl/penaltyboxes/Lockout/remove", body: `{"entry":"mallory"}`},
		{method: "GET", path: "/readyz"},
		{method: "GET", path: "/v1/admin/boxes?limit=Lockout"},
	}
	for _, m := range standardMethodOrder() {
		if m != http.MethodHead {
			calls = append(calls, exchange{method: m, path: "/v1/forward-auth/api", header: map[string]string{"X-Api-Key": "k"}})
		}
	}
	// A call that writes nothing (a check, a lookup, a readiness probe)
	// knows nothing changed, whatever became of it.
	writesNothing := func(ex exchange) bool {
		return ex.method == "GET" && !strings.HasPrefix(ex.path, "/v1/forward-auth/") || ex.path == "/v1/check"
	}
	for _, f := range []struct {
		name   string
		source failingSource
		status int
		code   func(exchange) string
	}{
		{"a source that timed out", failingSource{}, 503, func(ex exchange) string {
			if writesNothing(ex) {
				return "source_unavailable"
			}
			return "source_outcome_unknown"
		}},
		{"a source that was not reached", failingSource{refused: true}, 503, func(exchange) string { return "source_unavailable" }},
		{"a source that panics", failingSource{panics: true}, 500, func(exchange) string { return "internal" }},
	} {
		h := newContractHandler(t, contractOptions{source: f.source})
		for _, ex := range calls {
			ex.name, ex.accepted, ex.status, ex.code = f.name, true, f.status, f.code(ex)
			if ex.path == "/readyz" && f.status == 503 {
				ex.code = "" // its own body, not an error's
			}
			c.run(t, h, ex)
		}
	}
	open := newContractHandler(t, contractOptions{source: failingSource{}, failOpen: true})
	for _, ex := range []exchange{
		{name: "a spend failing open", method: "POST", path: "/v1/spend", body: `{"limit":"Plain","id":"a"}`, accepted: true, status: 200},
		{name: "a forward-auth failing open", method: "GET", path: "/v1/forward-auth/api", header: map[string]string{"X-Api-Key": "k"}, accepted: true, status: 200},
	} {
		rec := c.run(t, open, ex)
		if !strings.Contains(rec.Body.String(), `"degraded":true`) {
			t.Errorf("%s: %s, want degraded", ex.name, rec.Body)
		}
	}
}

// runSync syncs a window limit that is counted in process memory: a
// push that fails, then one that succeeds. Its hits also refuse an
// Idempotency-Key.
func runSync(t *testing.T, c *apiContract) {
	t.Helper()
	syncer := &flakySyncer{}
	h := newSyncHandler(t, syncer)
	c.run(t, h, exchange{name: "a key on a window that syncs", method: "POST", path: "/v1/spend", header: map[string]string{"Idempotency-Key": "k"},
		body: `{"limit":"Synced","id":"a"}`, accepted: true, status: 400, code: "invalid_idempotency_key"})
	c.run(t, h, exchange{name: "hits to push", method: "POST", path: "/v1/spend", body: `{"limit":"Synced","id":"a"}`, accepted: true, status: 200})
	syncer.setDown(true)
	c.run(t, h, exchange{name: "a sync whose push fails", method: "POST", path: "/v1/admin/sync", accepted: true, status: 503, code: "sync_failed"})
	syncer.setDown(false)
	rec := c.run(t, h, exchange{name: "a sync that pushes", method: "POST", path: "/v1/admin/sync", accepted: true, status: 200})
	if !strings.Contains(rec.Body.String(), `"pushed":1`) {
		t.Errorf("a sync that pushes: %s", rec.Body)
	}
}
