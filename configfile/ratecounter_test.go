package configfile

import (
	"strconv"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
)

// erlDefaults declares a rate counter with every optional field, a minimal
// one, a GCRA limit and a fixed window with penalties, and a built-in GCRA
// limit without one.
const erlDefaults = `RequestsPerClientIP:
  enum: 130
  id: ip
  algorithm: rate-counter
  window: 10s
  rate: 100
  penalty: 15m
  capacity: 5000
  sync_rate: -1
BurstPerIP:
  enum: 131
  id: ip
  algorithm: rate-counter
  window: 1s
  rate: 10
  penalty: 1m
SustainedPerIP:
  enum: 132
  id: ip
  algorithm: rate-counter
  window: 1m
  rate: 70000000
  penalty: 1h
  sync_rate: 0.5
Logins:
  enum: 133
  id: account
  burst: 5
  count: 5
  period: 15m
  penalty: 15m
  capacity: 1000
Uploads:
  enum: 134
  id: string
  algorithm: fixed-window
  count: 2
  period: 1m
  penalty: 90s
NewOrdersPerAccount:
  burst: 5
  count: 5
  period: 1s
`

const erlOverrides = `- RequestsPerClientIP:
    window: 60s
    rate: 20
    penalty: 59m59s
    ids:
      - id: 2001:DB8::7
- Logins:
    burst: 10
    count: 10
    period: 15m
    ids: [{id: 42}]
- Logins:
    burst: 1
    count: 1
    period: 1h
    penalty: 24h
    ids: [{id: 43}]
- Uploads:
    count: 5
    period: 1m
    penalty: 1s
    ids: [{id: gold}]
- NewOrdersPerAccount:
    burst: 50
    count: 50
    period: 1s
    ids: [{id: 7}]
- CertificatesPerDomainPerAccount:
    burst: 3
    count: 3
    period: 1h
    penalty: 2h
    ids: [{id: 9}]
`

func mustRateCounter(t *testing.T, window time.Duration, rate int64, penalty time.Duration) ratelimits.Limit {
	t.Helper()
	l, err := ratelimits.NewRateCounterLimit(window, rate, penalty)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func withPenalty(t *testing.T, l ratelimits.Limit, penalty time.Duration) ratelimits.Limit {
	t.Helper()
	l, err := l.WithPenalty(penalty)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// set returns l with the fields a Config fills in from the name.
func set(l ratelimits.Limit, override bool, syncRate time.Duration, capacity int) ratelimits.Limit {
	l.Override, l.SyncRate, l.Capacity = override, syncRate, capacity
	return l
}

// TestConfigRateCountersAndPenalties loads rate counters and penalties with
// their overrides: a rate-counter override gives its own window, rate and
// penalty; a GCRA or window override without a penalty keeps its default's,
// one with a penalty has its own; sync_rate and capacity are the name's.
func TestConfigRateCountersAndPenalties(t *testing.T) {
	c, err := Parse(dfile, []byte(erlDefaults), ofile, []byte(erlOverrides))
	if err != nil {
		t.Fatal(err)
	}
	const rc, burst, sustained, logins, uploads = 130, 131, 132, 133, 134
	gcra := func(b, n int64, p time.Duration) ratelimits.Limit { return mustLimit(t, b, n, p, false) }
	cases := []struct {
		name       ratelimits.Name
		overrideID string
		want       ratelimits.Limit
	}{
		{rc, "192.0.2.1", set(mustRateCounter(t, 10*time.Second, 100, 15*time.Minute), false, -time.Second, 5000)},
		{rc, "2001:db8::7", set(mustRateCounter(t, time.Minute, 20, 59*time.Minute+59*time.Second), true, -time.Second, 5000)},
		{burst, "192.0.2.1", mustRateCounter(t, time.Second, 10, time.Minute)},
		{sustained, "192.0.2.1", set(mustRateCounter(t, time.Minute, 70_000_000, time.Hour), false, 500*time.Millisecond, 0)},
		{logins, "1", set(withPenalty(t, gcra(5, 5, 15*time.Minute), 15*time.Minute), false, 0, 1000)},
		{logins, "42", set(withPenalty(t, gcra(10, 10, 15*time.Minute), 15*time.Minute), true, 0, 1000)},
		{logins, "43", set(withPenalty(t, gcra(1, 1, time.Hour), 24*time.Hour), true, 0, 1000)},
		{uploads, "anyone", withPenalty(t, mustWindow(t, ratelimits.FixedWindow, 2, time.Minute, 0, false), 90*time.Second)},
		{uploads, "gold", withPenalty(t, mustWindow(t, ratelimits.FixedWindow, 5, time.Minute, 0, true), time.Second)},
		{ratelimits.NewOrdersPerAccount, "1", gcra(5, 5, time.Second)},
		{ratelimits.NewOrdersPerAccount, "7", set(gcra(50, 50, time.Second), true, 0, 0)},
		{ratelimits.CertificatesPerDomainPerAccount, "9", set(withPenalty(t, gcra(3, 3, time.Hour), 2*time.Hour), true, 0, 0)},
	}
	for _, tc := range cases {
		if got, ok := c.Limit(tc.name, tc.overrideID); !ok || got != tc.want {
			t.Errorf("Limit(%d, %q) = %+v, %v; want %+v", tc.name, tc.overrideID, got, ok, tc.want)
		}
	}
	for _, tc := range []struct {
		name     ratelimits.Name
		alg      ratelimits.Algorithm
		box      bool
		capacity int
	}{
		{rc, ratelimits.RateCounter, true, 5000},
		{burst, ratelimits.RateCounter, true, ratelimits.DefaultCapacity},
		{logins, ratelimits.GCRA, true, 1000},
		{uploads, ratelimits.FixedWindow, true, ratelimits.DefaultCapacity},
		{ratelimits.NewOrdersPerAccount, ratelimits.GCRA, false, ratelimits.DefaultCapacity},
		{ratelimits.CertificatesPerDomainPerAccount, ratelimits.GCRA, true, ratelimits.DefaultCapacity},
		{ratelimits.CertificatesPerDomain, ratelimits.GCRA, false, ratelimits.DefaultCapacity},
	} {
		if alg, box, capacity := c.Algorithm(tc.name), c.HasBox(tc.name), c.Capacity(tc.name); alg != tc.alg || box != tc.box || capacity != tc.capacity {
			t.Errorf("name %d: algorithm %v, box %v, capacity %d; want %v, %v, %d", tc.name, alg, box, capacity, tc.alg, tc.box, tc.capacity)
		}
	}
	if got := c.SyncRate(sustained); got != 500*time.Millisecond {
		t.Errorf("SyncRate(%d) = %v; want 500ms", sustained, got)
	}
}

// Every window a rate is read over loads, written either way Go's
// durations allow, and so do the ends of each range.
func TestConfigRateCounterBounds(t *testing.T) {
	for _, tc := range []struct {
		window, penalty string
		rate            int64
		wantWindow      time.Duration
	}{
		{"1s", "1m", 10, time.Second},
		{"1000ms", "60s", 70_000_000, time.Second},
		{"10s", "1h", 100, 10 * time.Second},
		{"60s", "30m30s", 10, time.Minute},
		{"1m", "3600s", 10, time.Minute},
	} {
		defaults := "R:\n  enum: 100\n  id: ip\n  algorithm: rate-counter\n  window: " + tc.window +
			"\n  rate: " + strconv.FormatInt(tc.rate, 10) + "\n  penalty: " + tc.penalty + "\n"
		c, err := Parse(dfile, []byte(defaults), ofile, nil)
		if err != nil {
			t.Errorf("window %s, rate %d, penalty %s: %v", tc.window, tc.rate, tc.penalty, err)
			continue
		}
		if l, _ := c.Default(100); l.Period != tc.wantWindow || l.Rate != tc.rate || l.Burst != tc.rate*int64(tc.wantWindow/time.Second) {
			t.Errorf("window %s, rate %d: %+v", tc.window, tc.rate, l)
		}
	}
	for _, p := range []string{"1s", "24h", "1440m", "90s", "1.5s"} {
		defaults := "L:\n  enum: 100\n  id: string\n  burst: 1\n  count: 1\n  period: 1s\n  penalty: " + p + "\n"
		c, err := Parse(dfile, []byte(defaults), ofile, nil)
		want, _ := time.ParseDuration(p)
		if err != nil {
			t.Errorf("penalty %s: %v", p, err)
		} else if l, _ := c.Default(100); l.Penalty != want {
			t.Errorf("penalty %s = %v, not exact", p, l.Penalty)
		}
	}
}

// TestConfigBadRateCounters: every rule of a rate-counter limit names its
// file, line and limit, and all of a limit's problems are reported at once.
func TestConfigBadRateCounters(t *testing.T) {
	const rc = "RC"
	head := "RC:\n  enum: 130\n  id: ip\n  algorithm: rate-counter\n" // lines 1 to 4
	good := head + "  window: 10s\n  rate: 100\n  penalty: 15m\n"     // lines 5 to 7
	cases := []struct {
		desc     string
		defaults string
		want     []wantProblem
	}{
		{"window 30s", head + "  window: 30s\n  rate: 100\n  penalty: 15m\n",
			[]wantProblem{{dfile, 5, rc, "window must be 1s, 10s or 60s, got 30s"}}},
		{"window 0s", head + "  window: 0s\n  rate: 100\n  penalty: 15m\n",
			[]wantProblem{{dfile, 5, rc, "window must be 1s, 10s or 60s, got 0s"}}},
		{"window 10.5s", head + "  window: 10.5s\n  rate: 100\n  penalty: 15m\n",
			[]wantProblem{{dfile, 5, rc, "got 10.5s"}}},
		{"window not a duration", head + "  window: ten seconds\n  rate: 100\n  penalty: 15m\n",
			[]wantProblem{{dfile, 5, rc, `window "ten seconds" is not a valid duration: use 1s, 10s or 60s`}}},
		{"window a number", head + "  window: 10\n  rate: 100\n  penalty: 15m\n",
			[]wantProblem{{dfile, 5, rc, "window must be a duration, 1s, 10s or 60s, got the integer 10"}}},
		{"rate below 10", head + "  window: 10s\n  rate: 9\n  penalty: 15m\n",
			[]wantProblem{{dfile, 6, rc, "rate must be from 10 to 70000000 hits per second, got 9"}}},
		{"rate above 70,000,000", head + "  window: 10s\n  rate: 70000001\n  penalty: 15m\n",
			[]wantProblem{{dfile, 6, rc, "got 70000001"}}},
		{"rate fractional", head + "  window: 10s\n  rate: 10.5\n  penalty: 15m\n",
			[]wantProblem{{dfile, 6, rc, "rate must be an integer, got the number 10.5"}}},
		{"rate quoted", head + "  window: 10s\n  rate: \"100\"\n  penalty: 15m\n",
			[]wantProblem{{dfile, 6, rc, `rate must be an integer, got the string "100"`}}},
		{"rate beyond int64", head + "  window: 10s\n  rate: 99999999999999999999\n  penalty: 15m\n",
			[]wantProblem{{dfile, 6, rc, "rate 99999999999999999999 is out of range"}}},
		{"penalty below 1m", head + "  window: 10s\n  rate: 100\n  penalty: 59s\n",
			[]wantProblem{{dfile, 7, rc, "a rate-counter limit's penalty must be from 1m to 1h (it is rounded to the nearest minute), got 59s"}}},
		{"penalty above 1h", head + "  window: 10s\n  rate: 100\n  penalty: 61m\n",
			[]wantProblem{{dfile, 7, rc, "got 1h1m0s"}}},
		{"penalty a GCRA limit could have", head + "  window: 10s\n  rate: 100\n  penalty: 24h\n",
			[]wantProblem{{dfile, 7, rc, "from 1m to 1h"}}},
		{"penalty a number", head + "  window: 10s\n  rate: 100\n  penalty: 15\n",
			[]wantProblem{{dfile, 7, rc, "penalty must be a duration such as 90s, 15m or 1h, got the integer 15"}}},
		{"penalty not a duration", head + "  window: 10s\n  rate: 100\n  penalty: a while\n",
			[]wantProblem{{dfile, 7, rc, `penalty "a while" is not a valid duration`}}},
		{"missing everything", head,
			[]wantProblem{{dfile, 1, rc, "missing window"}, {dfile, 1, rc, "missing rate"}, {dfile, 1, rc, "missing penalty"}}},
		{"burst", good + "  burst: 5\n",
			[]wantProblem{{dfile, 8, rc, "burst is not a field of a rate-counter limit: a rate-counter limit allows rate hits per second over its window (remove burst)"}}},
		{"a GCRA limit's fields beside good ones", head + "  burst: 5\n  window: 10s\n  count: 5\n  rate: 100\n  period: 1m\n  penalty: 15m\n",
			[]wantProblem{{dfile, 5, rc, "burst is not a field"}, {dfile, 7, rc, "count is not a field"}, {dfile, 9, rc, "period is not a field"}}},
		{"capacity 0", good + "  capacity: 0\n",
			[]wantProblem{{dfile, 8, rc, "capacity must be greater than 0, got 0"}}},
		{"capacity negative", good + "  capacity: -5\n",
			[]wantProblem{{dfile, 8, rc, "capacity must be greater than 0, got -5"}}},
		{"capacity not an integer", good + "  capacity: lots\n",
			[]wantProblem{{dfile, 8, rc, `capacity must be an integer, got the string "lots"`}}},
		{"capacity beyond int64", good + "  capacity: 9223372036854775808\n",
			[]wantProblem{{dfile, 8, rc, "capacity 9223372036854775808 is out of range"}}},
		{"sync_rate between 0 and 0.001", good + "  sync_rate: 0.0001\n",
			[]wantProblem{{dfile, 8, rc, "sync_rate 0.0001 is between 0 and 0.001"}}},
		{"every problem at once", head + "  window: 5s\n  rate: 5\n  penalty: 2h\n  capacity: 0\n  sync_rate: x\n  count: 1\n",
			[]wantProblem{{dfile, 5, rc, "window must be"}, {dfile, 6, rc, "rate must be"}, {dfile, 7, rc, "penalty must be"},
				{dfile, 8, rc, "capacity must be"}, {dfile, 9, rc, "sync_rate must be"}, {dfile, 10, rc, "count is not a field"}}},
		{"a rate counter without a name still checks its fields", "Nameless:\n  algorithm: rate-counter\n  window: 2s\n  rate: 100\n  penalty: 1m\n",
			[]wantProblem{{dfile, 1, "Nameless", "unknown limit name"}, {dfile, 3, "Nameless", "window must be 1s, 10s or 60s"}}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			_, err := Parse(dfile, []byte(c.defaults), ofile, nil)
			checkProblems(t, err, c.want)
		})
	}
}

// TestConfigBadPenalties: the penalty and capacity of GCRA and window
// limits, and the fields of rate counters given to them.
func TestConfigBadPenalties(t *testing.T) {
	const l = "L"
	gcra := "L:\n  enum: 130\n  id: string\n  burst: 5\n  count: 5\n  period: 1m\n"                 // lines 1 to 6
	fixed := "L:\n  enum: 130\n  id: string\n  algorithm: fixed-window\n  count: 5\n  period: 1m\n" // lines 1 to 6
	cases := []struct {
		desc     string
		defaults string
		want     []wantProblem
	}{
		{"penalty 0s", gcra + "  penalty: 0s\n",
			[]wantProblem{{dfile, 7, l, "penalty must be from 1s to 24h, got 0s"}}},
		{"penalty below 1s", gcra + "  penalty: 999ms\n",
			[]wantProblem{{dfile, 7, l, "penalty must be from 1s to 24h, got 999ms"}}},
		{"penalty above 24h", fixed + "  penalty: 24h0m1s\n",
			[]wantProblem{{dfile, 7, l, "penalty must be from 1s to 24h, got 24h0m1s"}}},
		{"penalty negative", fixed + "  penalty: -15m\n",
			[]wantProblem{{dfile, 7, l, "got -15m0s"}}},
		{"penalty a number", gcra + "  penalty: 900\n",
			[]wantProblem{{dfile, 7, l, "penalty must be a duration such as 90s, 15m or 1h, got the integer 900"}}},
		{"penalty not a duration", gcra + "  penalty: 15 minutes\n",
			[]wantProblem{{dfile, 7, l, `penalty "15 minutes" is not a valid duration: use Go syntax such as 90s, 15m or 1h`}}},
		{"penalty checked beside a broken limit", "L:\n  enum: 130\n  id: string\n  burst: 0\n  count: 5\n  period: 1m\n  penalty: 25h\n",
			[]wantProblem{{dfile, 4, l, "burst must be greater than 0"}, {dfile, 7, l, "penalty must be from 1s to 24h"}}},
		{"capacity without a penalty", gcra + "  capacity: 1000\n",
			[]wantProblem{{dfile, 7, l, "capacity applies to limits with a penalty box (algorithm rate-counter, or a penalty), and this gcra limit has none"}}},
		{"capacity on a window without a penalty", fixed + "  capacity: 1000\n",
			[]wantProblem{{dfile, 7, l, "this fixed-window limit has none"}}},
		{"capacity 0 with a penalty", gcra + "  penalty: 1m\n  capacity: 0\n",
			[]wantProblem{{dfile, 8, l, "capacity must be greater than 0, got 0"}}},
		{"capacity with a bad penalty: only the penalty", gcra + "  penalty: 2d\n  capacity: 10\n",
			[]wantProblem{{dfile, 7, l, `penalty "2d" is not a valid duration`}}},
		{"window on a gcra limit", gcra + "  window: 10s\n",
			[]wantProblem{{dfile, 7, l, "window is not a field of a gcra limit: a gcra limit has burst, count and period (remove window)"}}},
		{"rate on a window", fixed + "  rate: 100\n",
			[]wantProblem{{dfile, 7, l, "rate is not a field of a fixed-window limit: a window allows count hits per period (remove rate)"}}},
		{"an unknown algorithm's fields are each checked", "L:\n  enum: 130\n  id: string\n  algorithm: token-bucket\n  window: 30s\n  rate: 5\n  penalty: 25h\n  capacity: 0\n",
			[]wantProblem{{dfile, 4, l, "unknown algorithm"}, {dfile, 5, l, "window must be 1s, 10s or 60s"}, {dfile, 6, l, "rate must be from 10"},
				{dfile, 7, l, "penalty must be from 1s to 24h (1m to 1h on a rate-counter limit), got 25h0m0s"}, {dfile, 8, l, "capacity must be greater than 0"}}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			_, err := Parse(dfile, []byte(c.defaults), ofile, nil)
			checkProblems(t, err, c.want)
		})
	}

	// A box belongs to the name: an override may change the penalty's
	// length, not give one to a name whose default has none.
	_, err := Parse(dfile, []byte(gcra), ofile, []byte("- L:\n    burst: 5\n    count: 5\n    period: 1m\n    penalty: 1m\n    ids: [{id: a}]\n"))
	checkProblems(t, err, []wantProblem{{ofile, 5, l, "penalty on an override of a limit whose default has none"}})

	// With an unknown algorithm, no field is missing: a rate counter
	// without burst, count and period may be what was meant.
	_, err = Parse(dfile, []byte("L:\n  enum: 130\n  id: ip\n  algorithm: rate_counter\n  window: 10s\n  rate: 10\n  penalty: 59s\n"), ofile, nil)
	checkProblems(t, err, []wantProblem{{dfile, 4, l, `unknown algorithm "rate_counter"`}})
}

// TestConfigBadERLOverrides: an override of a rate counter gives window,
// rate and penalty under the default's rules; one of a GCRA or window
// limit may give a penalty; none gives capacity.
func TestConfigBadERLOverrides(t *testing.T) {
	const rc, logins, uploads = "RequestsPerClientIP", "Logins", "Uploads"
	ids := "    ids: [{id: 192.0.2.1}]\n"
	rcHead := "- RequestsPerClientIP:\n" // line 1
	cases := []struct {
		desc      string
		overrides string
		want      []wantProblem
	}{
		{"rate counter without a penalty", rcHead + "    window: 10s\n    rate: 10\n" + ids,
			[]wantProblem{{ofile, 1, rc, "missing penalty"}}},
		{"rate counter without anything", rcHead + ids,
			[]wantProblem{{ofile, 1, rc, "missing window"}, {ofile, 1, rc, "missing rate"}, {ofile, 1, rc, "missing penalty"}}},
		{"rate counter out of range", rcHead + "    window: 5s\n    rate: 100000000\n    penalty: 2h\n" + ids,
			[]wantProblem{{ofile, 2, rc, "window must be 1s, 10s or 60s, got 5s"}, {ofile, 3, rc, "rate must be from 10 to 70000000"},
				{ofile, 4, rc, "a rate-counter limit's penalty must be from 1m to 1h"}}},
		{"rate counter with a GCRA limit's fields", rcHead + "    burst: 5\n    count: 5\n    period: 1s\n    window: 10s\n    rate: 10\n    penalty: 1m\n" + ids,
			[]wantProblem{{ofile, 2, rc, "burst is not a field of a rate-counter limit"}, {ofile, 3, rc, "count is not a field"}, {ofile, 4, rc, "period is not a field"}}},
		{"capacity", rcHead + "    window: 10s\n    rate: 10\n    penalty: 1m\n    capacity: 5\n" + ids,
			[]wantProblem{{ofile, 5, rc, "an override cannot set capacity: it belongs to the limit name"}}},
		{"algorithm", rcHead + "    algorithm: rate-counter\n    window: 10s\n    rate: 10\n    penalty: 1m\n" + ids,
			[]wantProblem{{ofile, 2, rc, "an override cannot set algorithm"}}},
		{"gcra penalty out of range", "- Logins:\n    burst: 1\n    count: 1\n    period: 1s\n    penalty: 48h\n    ids: [{id: 1}]\n",
			[]wantProblem{{ofile, 5, logins, "penalty must be from 1s to 24h, got 48h0m0s"}}},
		{"gcra with a rate counter's fields", "- Logins:\n    burst: 1\n    count: 1\n    period: 1s\n    window: 1s\n    rate: 10\n    ids: [{id: 1}]\n",
			[]wantProblem{{ofile, 5, logins, "window is not a field of a gcra limit"}, {ofile, 6, logins, "rate is not a field of a gcra limit"}}},
		{"window penalty 0", "- Uploads:\n    count: 1\n    period: 1m\n    penalty: 0s\n    ids: [{id: gold}]\n",
			[]wantProblem{{ofile, 4, uploads, "penalty must be from 1s to 24h, got 0s"}}},
		{"gcra override of a built-in name without a default", "- CertificatesPerDomainPerAccount:\n    burst: 1\n    count: 1\n    period: 1h\n    penalty: 0.5s\n    ids: [{id: 9}]\n",
			[]wantProblem{{ofile, 5, "CertificatesPerDomainPerAccount", "penalty must be from 1s to 24h, got 500ms"}}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			_, err := Parse(dfile, []byte(erlDefaults), ofile, []byte(c.overrides))
			checkProblems(t, err, c.want)
		})
	}

	// A rate counter whose defaults entry is broken: its override's
	// fields are checked each on its own, and none is missing.
	broken := "RC:\n  enum: 130\n  id: ip\n  algorithm: rate-counters\n  window: 10s\n  rate: 10\n  penalty: 1m\n"
	_, err := Parse(dfile, []byte(broken), ofile, []byte("- RC:\n    window: 10s\n    rate: 10\n    penalty: 1m\n    ids: [{id: 192.0.2.1}]\n- RC:\n    window: 10s\n    rate: 1\n    penalty: 1m\n    ids: [{id: 192.0.2.2}]\n"))
	checkProblems(t, err, []wantProblem{{dfile, 4, "RC", "unknown algorithm"}, {ofile, 8, "RC", "rate must be from 10"}})
}

// A reload may not move a name to or from rate-counter; changing a rate
// counter's numbers, penalty or capacity, or giving a GCRA limit a
// penalty, is no change of algorithm.
func TestConfigReloadRateCounters(t *testing.T) {
	running, err := Parse(dfile, []byte(erlDefaults), ofile, []byte(erlOverrides))
	if err != nil {
		t.Fatal(err)
	}
	same := "RequestsPerClientIP:\n  enum: 130\n  id: ip\n  algorithm: rate-counter\n  window: 60s\n  rate: 10\n  penalty: 1h\n  capacity: 10\n" +
		"NewOrdersPerAccount:\n  burst: 5\n  count: 5\n  period: 1s\n  penalty: 1h\n"
	if _, err := ParseReload(running, dfile, []byte(same), ofile, nil); err != nil {
		t.Errorf("new numbers, the same algorithms: %v", err)
	}
	cases := []struct {
		desc     string
		defaults string
		want     []wantProblem
	}{
		{"rate counter to sliding window", "RequestsPerClientIP:\n  enum: 130\n  id: ip\n  algorithm: sliding-window\n  count: 100\n  period: 10s\n",
			[]wantProblem{{dfile, 4, "RequestsPerClientIP", "the algorithm of enum 130 cannot change from rate-counter to sliding-window on a reload"}}},
		{"rate counter to gcra, renamed", "Clients:\n  enum: 130\n  id: ip\n  burst: 5\n  count: 5\n  period: 1s\n  penalty: 15m\n",
			[]wantProblem{{dfile, 1, "Clients", "(named RequestsPerClientIP in the running configuration) cannot change from rate-counter to gcra"}}},
		{"gcra with a penalty to rate counter", "Logins:\n  enum: 133\n  id: account\n  algorithm: rate-counter\n  window: 1s\n  rate: 10\n  penalty: 15m\n",
			[]wantProblem{{dfile, 4, "Logins", "cannot change from gcra to rate-counter"}}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			_, err := ParseReload(running, dfile, []byte(c.defaults), ofile, nil)
			checkProblems(t, err, c.want)
		})
	}
}
