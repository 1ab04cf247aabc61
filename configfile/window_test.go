package configfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
)

// windowDefaults declares window limits beside GCRA ones: a declared
// sliding window with a sync_rate, a declared fixed window counted
// locally, a built-in name made a fixed window, and a GCRA limit that
// names its algorithm.
const windowDefaults = `APIRequestsPerConsumer:
  enum: 120
  id: string
  algorithm: sliding-window
  count: 100
  period: 1m
  sync_rate: 0.5
Uploads:
  enum: 121
  id: account
  algorithm: fixed-window
  count: 10
  period: 1h
  sync_rate: -1
CertificatesPerDomain:
  algorithm: fixed-window
  count: 50
  period: 168h
NewOrdersPerAccount:
  algorithm: gcra
  burst: 5
  count: 5
  period: 1s
`

const windowOverrides = `- APIRequestsPerConsumer:
    count: 1000
    period: 1m
    ids:
      - id: gold
- CertificatesPerDomain:
    count: 500
    period: 24h
    ids:
      - id: example.com
- NewOrdersPerAccount:
    burst: 50
    count: 50
    period: 1s
    ids: [{id: 42}]
`

func mustWindow(t *testing.T, alg ratelimits.Algorithm, count int64, period, syncRate time.Duration, override bool) ratelimits.Limit {
	t.Helper()
	l, err := ratelimits.NewWindowLimit(alg, count, period)
	if err != nil {
		t.Fatal(err)
	}
	l.SyncRate, l.Override = syncRate, override
	return l
}

// TestConfigWindows loads window limits and their overrides: an override
// takes its name's algorithm and sync_rate from the defaults file.
func TestConfigWindows(t *testing.T) {
	c, err := Parse(dfile, []byte(windowDefaults), ofile, []byte(windowOverrides))
	if err != nil {
		t.Fatal(err)
	}
	api, _ := c.Lookup("APIRequestsPerConsumer")
	uploads, _ := c.Lookup("Uploads")
	cases := []struct {
		name       ratelimits.Name
		overrideID string
		want       ratelimits.Limit
	}{
		{api.Name, "anyone", mustWindow(t, ratelimits.SlidingWindow, 100, time.Minute, 500*time.Millisecond, false)},
		{api.Name, "gold", mustWindow(t, ratelimits.SlidingWindow, 1000, time.Minute, 500*time.Millisecond, true)},
		{uploads.Name, "7", mustWindow(t, ratelimits.FixedWindow, 10, time.Hour, -time.Second, false)},
		{ratelimits.CertificatesPerDomain, "example.org", mustWindow(t, ratelimits.FixedWindow, 50, 168*time.Hour, 0, false)},
		{ratelimits.CertificatesPerDomain, "example.com", mustWindow(t, ratelimits.FixedWindow, 500, 24*time.Hour, 0, true)},
		{ratelimits.NewOrdersPerAccount, "1", mustLimit(t, 5, 5, time.Second, false)},
		{ratelimits.NewOrdersPerAccount, "42", mustLimit(t, 50, 50, time.Second, true)},
	}
	for _, tc := range cases {
		if got, ok := c.Limit(tc.name, tc.overrideID); !ok || got != tc.want {
			t.Errorf("Limit(%d, %q) = %+v, %v; want %+v", tc.name, tc.overrideID, got, ok, tc.want)
		}
	}
	for name, want := range map[ratelimits.Name]ratelimits.Algorithm{
		api.Name: ratelimits.SlidingWindow, uploads.Name: ratelimits.FixedWindow,
		ratelimits.CertificatesPerDomain: ratelimits.FixedWindow, ratelimits.NewOrdersPerAccount: ratelimits.GCRA,
	} {
		if got := c.Algorithm(name); got != want {
			t.Errorf("Algorithm(%d) = %v; want %v", name, got, want)
		}
	}
}

// The largest counts whose product with the period fits in 2^53 − 1 load.
func TestConfigWindowBounds(t *testing.T) {
	for _, d := range []string{"count: 284836\n  period: 8784h", "count: 9007199254740\n  period: 1s", "count: 1\n  period: 1s"} {
		defaults := "L:\n  enum: 100\n  id: string\n  algorithm: fixed-window\n  " + d + "\n"
		if _, err := Parse(dfile, []byte(defaults), ofile, nil); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
}

// TestConfigSyncRate reads sync_rate as seconds, integer or not: negative
// (even below a nanosecond) stays negative, 0.001 is the least period.
func TestConfigSyncRate(t *testing.T) {
	for text, want := range map[string]time.Duration{
		"0": 0, "-1": -time.Second, "-0.25": -250 * time.Millisecond, "-1e-12": -1, "0.001": time.Millisecond,
		"1e-3": time.Millisecond, "2": 2 * time.Second, "0.0015": 1500 * time.Microsecond, "3600": time.Hour,
	} {
		defaults := "L:\n  enum: 100\n  id: string\n  algorithm: sliding-window\n  count: 1\n  period: 1s\n  sync_rate: " + text + "\n"
		c, err := Parse(dfile, []byte(defaults), ofile, nil)
		if err != nil {
			t.Errorf("sync_rate %s: %v", text, err)
			continue
		}
		if got := c.SyncRate(100); got != want {
			t.Errorf("sync_rate %s = %v; want %v", text, got, want)
		}
	}
}

// TestConfigBadWindows: every rule of a window limit, and of sync_rate and
// algorithm, names its file, line and limit.
func TestConfigBadWindows(t *testing.T) {
	const api = "API"
	head := "API:\n  enum: 120\n  id: string\n" // lines 1 to 3
	sliding := head + "  algorithm: sliding-window\n"
	cases := []struct {
		desc     string
		defaults string
		want     []wantProblem
	}{
		{"burst on a window", sliding + "  burst: 5\n  count: 5\n  period: 1m\n",
			[]wantProblem{{dfile, 5, api, "burst is not a field of a sliding-window limit"}}},
		{"burst on a fixed window", head + "  algorithm: fixed-window\n  count: 5\n  period: 1m\n  burst: 5\n",
			[]wantProblem{{dfile, 7, api, "burst is not a field of a fixed-window limit"}}},
		{"period not whole seconds", sliding + "  count: 5\n  period: 1500ms\n",
			[]wantProblem{{dfile, 6, api, "a window's period must be a whole number of seconds, got 1.5s"}}},
		{"period below a second", sliding + "  count: 5\n  period: 1ms\n",
			[]wantProblem{{dfile, 6, api, "whole number of seconds"}}},
		{"period beyond 8784h", sliding + "  count: 5\n  period: 8785h\n",
			[]wantProblem{{dfile, 6, api, "a window's period must be from 1s to 8784h, got 8785h0m0s"}}},
		{"period 0", sliding + "  count: 5\n  period: 0s\n",
			[]wantProblem{{dfile, 6, api, "period must be greater than 0"}}},
		{"count 0", sliding + "  count: 0\n  period: 1m\n",
			[]wantProblem{{dfile, 5, api, "count must be greater than 0, got 0"}}},
		{"count negative", sliding + "  count: -3\n  period: 1m\n",
			[]wantProblem{{dfile, 5, api, "count must be greater than 0, got -3"}}},
		{"count × period over 2^53 − 1", sliding + "  count: 9007199254741\n  period: 1s\n",
			[]wantProblem{{dfile, 1, api, "count 9007199254741 × period 1000ms exceeds 2^53 − 1"}}},
		{"one count more than 8784h allows", sliding + "  count: 284837\n  period: 8784h\n",
			[]wantProblem{{dfile, 1, api, "exceeds 2^53 − 1"}}},
		{"missing count and period", sliding,
			[]wantProblem{{dfile, 1, api, "missing count"}, {dfile, 1, api, "missing period"}}},
		{"sync_rate between 0 and 0.001", sliding + "  count: 5\n  period: 1m\n  sync_rate: 0.0005\n",
			[]wantProblem{{dfile, 7, api, "sync_rate 0.0005 is between 0 and 0.001"}}},
		{"sync_rate just below 0.001", sliding + "  count: 5\n  period: 1m\n  sync_rate: 0.000999\n",
			[]wantProblem{{dfile, 7, api, "is between 0 and 0.001"}}},
		{"sync_rate on a gcra limit", head + "  burst: 5\n  count: 5\n  period: 1m\n  sync_rate: 1\n",
			[]wantProblem{{dfile, 7, api, "sync_rate applies to window and rate-counter limits (sliding-window, fixed-window, rate-counter), not to gcra"}}},
		{"sync_rate 0 on an explicit gcra limit", head + "  algorithm: gcra\n  burst: 5\n  count: 5\n  period: 1m\n  sync_rate: 0\n",
			[]wantProblem{{dfile, 8, api, "sync_rate applies to window and rate-counter limits"}}},
		{"sync_rate not a number", sliding + "  count: 5\n  period: 1m\n  sync_rate: fast\n",
			[]wantProblem{{dfile, 7, api, `sync_rate must be a number of seconds (such as -1, 0 or 0.5), got the string "fast"`}}},
		{"sync_rate a duration", sliding + "  count: 5\n  period: 1m\n  sync_rate: 1s\n",
			[]wantProblem{{dfile, 7, api, "sync_rate must be a number of seconds"}}},
		{"sync_rate NaN", sliding + "  count: 5\n  period: 1m\n  sync_rate: .nan\n",
			[]wantProblem{{dfile, 7, api, "sync_rate .nan is out of range"}}},
		{"sync_rate infinite", sliding + "  count: 5\n  period: 1m\n  sync_rate: -.inf\n",
			[]wantProblem{{dfile, 7, api, "out of range"}}},
		{"sync_rate beyond a duration", sliding + "  count: 5\n  period: 1m\n  sync_rate: 1e10\n",
			[]wantProblem{{dfile, 7, api, "sync_rate 1e10 is out of range: it must be a number of seconds from -9223372036 to 9223372036"}}},
		{"unknown algorithm", head + "  algorithm: sliding\n  count: 5\n  period: 1m\n",
			[]wantProblem{{dfile, 4, api, `unknown algorithm "sliding": want gcra, sliding-window, fixed-window, rate-counter, calendar or concurrency`}}},
		{"empty algorithm", head + "  algorithm: \"\"\n  burst: 5\n  count: 5\n  period: 1m\n",
			[]wantProblem{{dfile, 4, api, `unknown algorithm ""`}}},
		{"a rate counter with a window's fields", head + "  algorithm: rate-counter\n  count: 5\n  period: 1m\n",
			[]wantProblem{{dfile, 1, api, "missing window"}, {dfile, 1, api, "missing rate"}, {dfile, 1, api, "missing penalty"},
				{dfile, 5, api, "count is not a field of a rate-counter limit: a rate-counter limit allows rate hits per second over its window (remove count)"},
				{dfile, 6, api, "period is not a field of a rate-counter limit"}}},
		{"algorithm not a string", head + "  algorithm: 2\n  count: 5\n  period: 1m\n",
			[]wantProblem{{dfile, 4, api, "algorithm must be gcra, sliding-window, fixed-window, rate-counter, calendar or concurrency, got the integer 2"}}},
		{"an unknown algorithm's other fields are still checked", head + "  algorithm: token-bucket\n  burst: 0\n  count: 5\n  period: 1 minute\n",
			[]wantProblem{{dfile, 4, api, "unknown algorithm"}, {dfile, 5, api, "burst must be greater than 0"}, {dfile, 7, api, "is not a valid duration"}}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			_, err := Parse(dfile, []byte(c.defaults), ofile, nil)
			checkProblems(t, err, c.want)
		})
	}
}

// TestConfigBadWindowOverrides: an override of a window limit gives count
// and period only, under the same rules as the default.
func TestConfigBadWindowOverrides(t *testing.T) {
	const api = "APIRequestsPerConsumer"
	head := "- APIRequestsPerConsumer:\n" // line 1
	ids := "    ids: [{id: gold}]\n"
	cases := []struct {
		desc      string
		overrides string
		want      []wantProblem
	}{
		{"burst", head + "    burst: 5\n    count: 5\n    period: 1m\n" + ids,
			[]wantProblem{{ofile, 2, api, "burst is not a field of a sliding-window limit"}}},
		{"algorithm", head + "    algorithm: sliding-window\n    count: 5\n    period: 1m\n" + ids,
			[]wantProblem{{ofile, 2, api, "an override cannot set algorithm: it belongs to the limit name"}}},
		{"sync_rate", head + "    count: 5\n    period: 1m\n    sync_rate: 1\n" + ids,
			[]wantProblem{{ofile, 4, api, "an override cannot set sync_rate: it belongs to the limit name"}}},
		{"period not whole seconds", head + "    count: 5\n    period: 90500ms\n" + ids,
			[]wantProblem{{ofile, 3, api, "a window's period must be a whole number of seconds"}}},
		{"period too long", head + "    count: 5\n    period: 10000h\n" + ids,
			[]wantProblem{{ofile, 3, api, "from 1s to 8784h"}}},
		{"count 0", head + "    count: 0\n    period: 1m\n" + ids,
			[]wantProblem{{ofile, 2, api, "count must be greater than 0"}}},
		{"count × period", head + "    count: 150119987580\n    period: 1m\n" + ids,
			[]wantProblem{{ofile, 1, api, "exceeds 2^53 − 1"}}},
		{"missing period", head + "    count: 5\n" + ids,
			[]wantProblem{{ofile, 1, api, "missing period"}}},
		{"a gcra override of a built-in made a window", "- CertificatesPerDomain:\n    burst: 5\n    count: 5\n    period: 1h\n    ids: [{id: example.com}]\n",
			[]wantProblem{{ofile, 2, "CertificatesPerDomain", "burst is not a field of a fixed-window limit"}}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			_, err := Parse(dfile, []byte(windowDefaults), ofile, []byte(c.overrides))
			checkProblems(t, err, c.want)
		})
	}

	// With the name's algorithm broken in the defaults file, its
	// overrides are checked only for what every algorithm requires.
	broken := "API:\n  enum: 120\n  id: string\n  algorithm: slidng-window\n  count: 5\n  period: 1m\n"
	_, err := Parse(dfile, []byte(broken), ofile, []byte("- API:\n    count: 10\n    period: 1m\n    ids: [{id: a}]\n- API:\n    count: 0\n    period: 1m\n    ids: [{id: b}]\n"))
	checkProblems(t, err, []wantProblem{{dfile, 4, "API", "unknown algorithm"}, {ofile, 6, "API", "count must be greater than 0"}})
}

// TestConfigReloadKeepsAlgorithms: a reload that changes the algorithm of
// an enum is refused with a problem at the line that sets the new
// algorithm (the algorithm field, the entry's key when it has none, or a
// built-in name's first override); one that keeps them loads.
func TestConfigReloadKeepsAlgorithms(t *testing.T) {
	running, err := Parse(dfile, []byte(windowDefaults), ofile, []byte(windowOverrides))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseReload(running, dfile, []byte(windowDefaults), ofile, nil); err != nil {
		t.Errorf("the same algorithms: %v", err)
	}
	renumbered := "APIRequestsPerConsumer:\n  enum: 122\n  id: string\n  burst: 5\n  count: 5\n  period: 1m\n"
	if _, err := ParseReload(running, dfile, []byte(renumbered), ofile, nil); err != nil {
		t.Errorf("a new enum for a new algorithm: %v", err)
	}
	cases := []struct {
		desc                string
		defaults, overrides string
		want                []wantProblem
	}{
		{"sliding to fixed", "APIRequestsPerConsumer:\n  enum: 120\n  id: string\n  algorithm: fixed-window\n  count: 100\n  period: 1m\n", "",
			[]wantProblem{{dfile, 4, "APIRequestsPerConsumer", "the algorithm of enum 120 cannot change from sliding-window to fixed-window on a reload"}}},
		{"sliding to gcra, without an algorithm field", "Consumers:\n  enum: 120\n  id: string\n  burst: 5\n  count: 5\n  period: 1m\n", "",
			[]wantProblem{{dfile, 1, "Consumers", "the algorithm of enum 120 (named APIRequestsPerConsumer in the running configuration) cannot change from sliding-window to gcra"}}},
		{"gcra to a window", "NewOrdersPerAccount:\n  algorithm: sliding-window\n  count: 5\n  period: 1s\n", "",
			[]wantProblem{{dfile, 2, "NewOrdersPerAccount", "declare a new name with a new enum instead"}}},
		{"a window to gcra by an override alone", "NewOrdersPerAccount:\n  burst: 5\n  count: 5\n  period: 1s\n",
			"- CertificatesPerDomain:\n    burst: 5\n    count: 5\n    period: 1h\n    ids: [{id: example.com}]\n",
			[]wantProblem{{ofile, 1, "CertificatesPerDomain", "cannot change from fixed-window to gcra"}}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			_, err := ParseReload(running, dfile, []byte(c.defaults), ofile, []byte(c.overrides))
			checkProblems(t, err, c.want)
		})
	}
	t.Run("every change, in file order", func(t *testing.T) {
		defaults := "NewOrdersPerAccount:\n  algorithm: fixed-window\n  count: 5\n  period: 1s\nAPIRequestsPerConsumer:\n  enum: 120\n  id: string\n  algorithm: fixed-window\n  count: 100\n  period: 1m\n"
		_, err := ParseReload(running, dfile, []byte(defaults), ofile, nil)
		checkProblems(t, err, []wantProblem{
			{dfile, 2, "NewOrdersPerAccount", "from gcra to fixed-window"},
			{dfile, 8, "APIRequestsPerConsumer", "from sliding-window to fixed-window"},
		})
		if !errors.Is(err, ratelimits.ErrInvalidConfig) {
			t.Errorf("%v is not an ErrInvalidConfig", err)
		}
	})
}

func writeTemp(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
