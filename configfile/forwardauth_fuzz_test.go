package configfile_test

import (
	"errors"
	"testing"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/forwardauth"
	"github.com/limiter-dev/limiter/ratelimits"
)

// FuzzParseForwardAuth feeds arbitrary forward-auth files to the loader:
// it never panics, a failure is always an *Error with at least one
// problem, and the rules it accepts are ones the handler can serve: each
// found by a valid name, naming known limits once each, with an id source
// that reads back as itself when written as the file spells it, a cost of
// at least 1, a 4xx deny status, and an expose value that reads back as
// itself.
func FuzzParseForwardAuth(f *testing.F) {
	f.Add([]byte("trusted_proxies: [127.0.0.1/32, \"::1/128\"]\nrules:\n  api:\n    limits:\n      - limit: APIRequestsPerKey\n        id: header:x-api-key\n      - limit: RequestsPerClientIP\n        id: client_ip\n    cost: 1\n    missing: deny\n    deny_status: 429\n    expose: deciding\n"))
	f.Add([]byte("rules:\n  a.b-c_d:\n    limits: [{limit: NewOrdersPerAccount, id: const:7}, {limit: APIRequestsPerConsumer, id: cookie:s}]\n    missing: client_ip\n    deny_status: 403\n    expose: none\n"))
	f.Add([]byte("rules:\n  x: {limits: [{limit: RequestsPerRange, id: client_ip}, {limit: PasswordResetsPerIP, id: host}], missing: allow, cost: 3, expose: all}\n  y: {limits: [{limit: RequestsPerDomain, id: path}, {limit: APIRequestsPerKey, id: method}], expose: deciding}\n"))
	f.Add([]byte("trusted_proxies: [10.1.2.3/8, fe80::1%eth0, ::ffff:10.0.0.0/104, 2001:db8::1]\nrules: {}\n"))
	f.Add([]byte("rules:\n  api: &r\n    limits: [{limit: APIRequestsPerKey, id: 'const:a:b'}]\n  api2: *r\n  ..: {limits: []}\n"))
	f.Add([]byte("rules:\n  api:\n    <<: {cost: 2}\n    limits: [{limit: APIRequestsPerKey, id: client_ip, cost: 1}]\n    deny_status: 429.5\n    expose: None\n"))
	f.Add([]byte("- {"))
	f.Add([]byte(""))
	cfg, err := configfile.Parse("defaults.yaml", []byte(faDefaults), "overrides.yaml", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := configfile.ParseForwardAuth("forward-auth.yaml", data, cfg)
		if err != nil {
			var ce *configfile.Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 || !errors.Is(err, ratelimits.ErrInvalidConfig) || rs != nil {
				t.Fatalf("error %v is not an *Error with problems (rules %v)", err, rs)
			}
			return
		}
		for _, p := range rs.TrustedProxies() {
			if !p.IsValid() || p.Masked() != p || p.Addr().Zone() != "" {
				t.Fatalf("trusted proxy %v is not a valid masked prefix", p)
			}
		}
		names := rs.Names()
		if len(names) != rs.Count() {
			t.Fatalf("Names() = %q for %d rules", names, rs.Count())
		}
		for _, name := range names {
			r, ok := rs.Rule(name)
			if !ok || r.Name != name || !forwardauth.ValidName(name) {
				t.Fatalf("rule %q: found %v as %q", name, ok, r.Name)
			}
			if len(r.Limits) == 0 || r.Cost < 1 || r.DenyStatus < 400 || r.DenyStatus > 499 || r.Missing.String() == "" {
				t.Fatalf("rule %q cannot be served: %+v", name, *r)
			}
			if again, ok := forwardauth.ParseExpose(r.Expose.String()); !ok || again != r.Expose {
				t.Fatalf("rule %q: expose %v does not read back from %q", name, r.Expose, r.Expose.String())
			}
			seen := map[string]bool{}
			for _, e := range r.Limits {
				if _, known := cfg.Lookup(e.Limit); !known || seen[e.Limit] {
					t.Fatalf("rule %q: limit %q unknown or given twice", name, e.Limit)
				}
				seen[e.Limit] = true
				again, err := forwardauth.ParseSource(e.Source.String())
				if err != nil || again != e.Source {
					t.Fatalf("rule %q: source %+v reads back from %q as %+v, %v", name, e.Source, e.Source.String(), again, err)
				}
			}
		}
	})
}
