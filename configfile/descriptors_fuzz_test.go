package configfile_test

import (
	"errors"
	"testing"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/ratelimits"
)

// FuzzParseDescriptors feeds arbitrary descriptors files to the loader: it
// never panics, a failure is always an *Error with at least one problem,
// and the rules it accepts name only limits the configuration knows, with
// no empty key.
func FuzzParseDescriptors(f *testing.F) {
	f.Add([]byte("- domain: edge\n  descriptors:\n    - keys: [remote_address]\n      limit: NewRegistrationsPerIPAddress\n"))
	f.Add([]byte("- domain: a\n  descriptors:\n    - {keys: [x, y], limit: NewOrdersPerAccount}\n    - {keys: [y, x], limit: NewOrdersPerAccount}\n- domain: b\n  descriptors: [{keys: [x], limit: Nope}]\n"))
	f.Add([]byte("domain: edge\ndescriptors:\n  - key: k\n    value: v\n    rate_limit: {unit: second, requests_per_unit: 1}\n"))
	f.Add([]byte("- domain: &d e\n  descriptors: &r [{keys: [''], limit: x}]\n- domain: *d\n  descriptors: *r\n"))
	f.Add([]byte("[]"))
	f.Add([]byte("- {"))
	cfg, err := configfile.Parse("defaults.yaml", []byte("NewOrdersPerAccount:\n  burst: 5\n  count: 5\n  period: 1h\n"), "", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := configfile.ParseDescriptors("descriptors.yaml", data, cfg)
		if err != nil {
			var ce *configfile.Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 || !errors.Is(err, ratelimits.ErrInvalidConfig) {
				t.Fatalf("error %v is not an *Error with problems", err)
			}
			return
		}
		for _, d := range rules.Domains() {
			for _, r := range rules.Rules(d) {
				if _, ok := cfg.Lookup(r.Limit); !ok {
					t.Fatalf("domain %q: a rule names the unknown limit %q", d, r.Limit)
				}
				for _, k := range r.Keys {
					if k == "" {
						t.Fatalf("domain %q: a rule has an empty key: %q", d, r.Keys)
					}
				}
			}
		}
	})
}
