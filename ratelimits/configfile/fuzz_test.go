package configfile_test

import (
	"errors"
	"testing"

	"github.com/limiter-dev/limiter/ratelimits/configfile"
)

// FuzzParseConfig feeds arbitrary files to the loader: it never panics, a
// failure is always an *Error with at least one problem, and a
// configuration it accepts only holds limits GCRA can use.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("NewOrdersPerAccount:\n  burst: 5\n  count: 5\n  period: 1h\n"), []byte("[]"))
	f.Add([]byte("L:\n  enum: 101\n  id: ip\n  burst: 2\n  count: 3\n  period: 1s\n"),
		[]byte("- L:\n    burst: 1\n    count: 1\n    period: 1ms\n    ids:\n      - id: ::ffff:10.0.0.1\n      - id: 10.0.0.2\n"))
	f.Add([]byte("A: &x {burst: 1, count: 1, period: 1s}\nB: *x\n"), []byte(""))
	f.Add([]byte("{"), []byte("- {"))
	f.Add([]byte("X:\n  burst: 9223372036854775807\n  count: 1\n  period: 2562047h\n"), []byte("- CertificatesPerFQDNSet:\n    burst: 1\n    count: 1\n    period: 1s\n    ids: [{id: 'a.example,b.example'}]\n"))
	f.Fuzz(func(t *testing.T, defaults, overrides []byte) {
		cfg, err := configfile.Parse("defaults.yaml", defaults, "overrides.yaml", overrides)
		if err != nil {
			var ce *configfile.Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error %v is not an *Error with problems", err)
			}
			return
		}
		for _, n := range cfg.Names() {
			if l, ok := cfg.Default(n.Name); ok && (l.EmissionInterval() <= 0 || l.BurstOffset() < l.EmissionInterval()) {
				t.Fatalf("accepted an unusable default for %s: %+v", n.Limit, l)
			}
		}
	})
}
