package configfile

import (
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
)

// leaseDefaults declares a concurrency limit; leaseOverrides gives one
// account more slots and longer leases.
const leaseDefaults = `ExportsInFlightPerAccount:
  enum: 140
  id: account
  algorithm: concurrency
  count: 3
  period: 10m
`

const leaseOverrides = `- ExportsInFlightPerAccount:
    count: 8
    period: 1h
    ids: [{id: 42}]
`

func mustLease(t *testing.T, count int64, period time.Duration, override bool) ratelimits.Limit {
	t.Helper()
	l, err := ratelimits.NewConcurrencyLimit(count, period)
	if err != nil {
		t.Fatal(err)
	}
	l.Override = override
	return l
}

func TestConfigConcurrency(t *testing.T) {
	c, err := Parse(dfile, []byte(leaseDefaults), ofile, []byte(leaseOverrides))
	if err != nil {
		t.Fatal(err)
	}
	info, ok := c.Lookup("ExportsInFlightPerAccount")
	if !ok || c.Algorithm(info.Name) != ratelimits.Concurrency {
		t.Fatalf("ExportsInFlightPerAccount: known %v, algorithm %s", ok, c.Algorithm(info.Name))
	}
	if l, ok := c.Limit(info.Name, "7"); !ok || l != mustLease(t, 3, 10*time.Minute, false) {
		t.Errorf("default = %+v, %v", l, ok)
	}
	if l, ok := c.Limit(info.Name, "42"); !ok || l != mustLease(t, 8, time.Hour, true) {
		t.Errorf("override = %+v, %v", l, ok)
	}
}

func TestConfigBadConcurrency(t *testing.T) {
	const name = "ExportsInFlightPerAccount"
	const head = name + ":\n  enum: 140\n  id: account\n  algorithm: concurrency\n"
	cases := []struct {
		desc     string
		defaults string
		want     []wantProblem
	}{
		{"burst", head + "  burst: 3\n  count: 3\n  period: 1m\n",
			[]wantProblem{{dfile, 5, name, "burst is not a field of a concurrency limit"}}},
		{"sync_rate", head + "  count: 3\n  period: 1m\n  sync_rate: 1\n",
			[]wantProblem{{dfile, 7, name, "sync_rate applies to window and rate-counter limits"}}},
		{"penalty", head + "  count: 3\n  period: 1m\n  penalty: 1m\n",
			[]wantProblem{{dfile, 7, name, "penalty is not a field of a concurrency limit"}}},
		{"count 0", head + "  count: 0\n  period: 1m\n",
			[]wantProblem{{dfile, 5, name, "count must be greater than 0"}}},
		{"count above 10,000", head + "  count: 10001\n  period: 1m\n",
			[]wantProblem{{dfile, 5, name, "count must be from 1 to 10000, got 10001"}}},
		{"period below 1s", head + "  count: 3\n  period: 999ms\n",
			[]wantProblem{{dfile, 6, name, "must be from 1s to 24h, got 999ms"}}},
		{"period above 24h", head + "  count: 3\n  period: 25h\n",
			[]wantProblem{{dfile, 6, name, "must be from 1s to 24h, got 25h0m0s"}}},
		{"period of a fraction of a millisecond", head + "  count: 3\n  period: 1.0005s\n",
			[]wantProblem{{dfile, 6, name, "whole number of milliseconds"}}},
		{"missing period", head + "  count: 3\n",
			[]wantProblem{{dfile, 1, name, "missing period"}}},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := Parse(dfile, []byte(tc.defaults), ofile, nil)
			checkProblems(t, err, tc.want)
		})
	}
}

func TestConfigBadConcurrencyOverride(t *testing.T) {
	const name = "ExportsInFlightPerAccount"
	_, err := Parse(dfile, []byte(leaseDefaults), ofile, []byte("- "+name+":\n    burst: 8\n    count: 8\n    period: 1h\n    ids: [{id: 42}]\n"))
	checkProblems(t, err, []wantProblem{{ofile, 2, name, "burst is not a field of a concurrency limit"}})
}

// Neither Envoy nor a proxy releases what a request acquired: a rule
// naming a concurrency limit is refused at the rule's line.
func TestRulesRefuseConcurrencyLimits(t *testing.T) {
	cfg, err := Parse(dfile, []byte(leaseDefaults), ofile, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ParseDescriptors(xfile, []byte("- domain: edge\n  descriptors:\n    - keys: [account]\n      limit: ExportsInFlightPerAccount\n"), cfg)
	checkProblems(t, err, []wantProblem{{xfile, 3, "ExportsInFlightPerAccount", "a descriptor rule cannot name a concurrency limit"}})
	const faFile = "forward-auth.yaml"
	_, err = ParseForwardAuth(faFile, []byte("rules:\n  exports:\n    limits:\n      - limit: ExportsInFlightPerAccount\n        id: header:X-Account\n"), cfg)
	checkProblems(t, err, []wantProblem{{faFile, 2, "ExportsInFlightPerAccount", "names a concurrency limit"}})
}
