package configfile_test

import (
	"errors"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// FuzzParseConfig feeds arbitrary files to the loader: it never panics, a
// failure is always an *Error with at least one problem, and a
// configuration it accepts only holds limits their algorithm can use, with
// penalties and capacities in range.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("NewOrdersPerAccount:\n  burst: 5\n  count: 5\n  period: 1h\n"), []byte("[]"))
	f.Add([]byte("L:\n  enum: 101\n  id: ip\n  burst: 2\n  count: 3\n  period: 1s\n"),
		[]byte("- L:\n    burst: 1\n    count: 1\n    period: 1ms\n    ids:\n      - id: ::ffff:10.0.0.1\n      - id: 10.0.0.2\n"))
	f.Add([]byte("A: &x {burst: 1, count: 1, period: 1s}\nB: *x\n"), []byte(""))
	f.Add([]byte("{"), []byte("- {"))
	f.Add([]byte("A: &a [*a]\nB: &b\n  <<: [*b, {count: 1}]\n"), []byte("- NewOrdersPerAccount: &o\n    <<: *o\n    ids: [*o]\n"))
	f.Add([]byte("X:\n  burst: 9223372036854775807\n  count: 1\n  period: 2562047h\n"), []byte("- CertificatesPerFQDNSet:\n    burst: 1\n    count: 1\n    period: 1s\n    ids: [{id: 'a.example,b.example'}]\n"))
	f.Add([]byte("W:\n  enum: 120\n  id: string\n  algorithm: sliding-window\n  count: 100\n  period: 1m\n  sync_rate: 0.5\n"),
		[]byte("- W:\n    count: 1000\n    period: 1m\n    ids: [{id: gold}]\n"))
	f.Add([]byte("CertificatesPerDomain:\n  algorithm: fixed-window\n  count: 284836\n  period: 8784h\n  sync_rate: -1e-12\n"),
		[]byte("- CertificatesPerDomain:\n    burst: 1\n    count: 1\n    period: 1s\n    ids: [{id: example.com}]\n"))
	f.Add([]byte("R:\n  enum: 306\n  id: ip\n  algorithm: rate-counter\n  window: 10s\n  rate: 10\n"), []byte(""))
	f.Add([]byte("R:\n  enum: 306\n  id: ip\n  algorithm: rate-counter\n  window: 10s\n  rate: 100\n  penalty: 15m\n  capacity: 1000\n  sync_rate: 1\n"),
		[]byte("- R:\n    window: 60s\n    rate: 70000000\n    penalty: 1h\n    ids: [{id: 2001:DB8::7}]\n"))
	f.Add([]byte("L:\n  enum: 304\n  id: string\n  burst: 3\n  count: 3\n  period: 1m\n  penalty: 15m\nW:\n  enum: 305\n  id: string\n  algorithm: fixed-window\n  count: 2\n  period: 1m\n  penalty: 90s\n  capacity: 5\n"),
		[]byte("- L:\n    burst: 1\n    count: 1\n    period: 1s\n    penalty: 24h\n    ids: [{id: a}]\n- NewOrdersPerAccount:\n    burst: 1\n    count: 1\n    period: 1s\n    penalty: 1s\n    ids: [{id: 1}]\n"))
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
			l, ok := cfg.Default(n.Name)
			if !ok {
				continue
			}
			if l.Algorithm != cfg.Algorithm(n.Name) || l.SyncRate != cfg.SyncRate(n.Name) {
				t.Fatalf("%s: the default's algorithm or sync_rate is not the name's: %+v", n.Limit, l)
			}
			if !usable(l) {
				t.Fatalf("accepted an unusable default for %s: %+v", n.Limit, l)
			}
			if l.HasBox() && !cfg.HasBox(n.Name) || cfg.Capacity(n.Name) <= 0 {
				t.Fatalf("%s: box %v, capacity %d for the default %+v", n.Limit, cfg.HasBox(n.Name), cfg.Capacity(n.Name), l)
			}
		}
	})
}

// usable reports whether l is a limit its algorithm's arithmetic can use,
// with a penalty and a capacity in range.
func usable(l ratelimits.Limit) bool {
	syncRateOK := l.SyncRate <= 0 || l.SyncRate >= ratelimits.MinSyncRate
	switch {
	case l.Algorithm == ratelimits.RateCounter:
		w := int64(l.Period / time.Second)
		return (w == 1 || w == 10 || w == 60) && l.Period%time.Second == 0 &&
			l.Rate >= ratelimits.MinRate && l.Rate <= ratelimits.MaxRate && l.Burst == l.Rate*w && l.Count == l.Burst &&
			l.Penalty >= ratelimits.MinTTL && l.Penalty <= ratelimits.MaxTTL && l.Capacity >= 0 && syncRateOK
	case l.Penalty != 0 && (l.Penalty < ratelimits.MinPenalty || l.Penalty > ratelimits.MaxPenalty):
		return false
	case l.Capacity < 0 || l.Capacity > 0 && l.Penalty == 0:
		return false
	case !l.Algorithm.Windowed():
		return l.SyncRate == 0 && l.EmissionInterval() > 0 && l.BurstOffset() >= l.EmissionInterval()
	}
	ms := l.Period.Milliseconds()
	return l.Count >= 1 && l.Burst == l.Count && l.Period%time.Second == 0 &&
		l.Period >= ratelimits.MinWindowPeriod && l.Period <= ratelimits.MaxWindowPeriod &&
		l.Count <= window.MaxProduct/ms && syncRateOK
}
