package configfile

import (
	"testing"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/calendar"
)

// calendarDefaults declares calendar limits: a monthly quota in Paris
// with a penalty, and a daily one in UTC (no timezone).
const calendarDefaults = `APICallsPerMonth:
  enum: 130
  id: string
  algorithm: calendar
  count: 10000
  period: month
  timezone: Europe/Paris
  penalty: 1h
ExportsPerDay:
  enum: 131
  id: account
  algorithm: calendar
  count: 3
  period: day
`

const calendarOverrides = `- APICallsPerMonth:
    count: 1000000
    ids:
      - id: gold-plan
- ExportsPerDay:
    count: 50
    ids: [{id: 42}]
`

// TestConfigCalendar loads calendar limits: an override gives a count and
// takes its name's period, zone and penalty.
func TestConfigCalendar(t *testing.T) {
	c, err := Parse(dfile, []byte(calendarDefaults), ofile, []byte(calendarOverrides))
	if err != nil {
		t.Fatal(err)
	}
	api, _ := c.Lookup("APICallsPerMonth")
	exports, _ := c.Lookup("ExportsPerDay")
	cases := []struct {
		name       ratelimits.Name
		overrideID string
		count      int64
		unit       calendar.Unit
		zone       string
		override   bool
	}{
		{api.Name, "someone", 10000, calendar.Month, "Europe/Paris", false},
		{api.Name, "gold-plan", 1000000, calendar.Month, "Europe/Paris", true},
		{exports.Name, "7", 3, calendar.Day, "UTC", false},
		{exports.Name, "42", 50, calendar.Day, "UTC", true},
	}
	for _, tc := range cases {
		l, ok := c.Limit(tc.name, tc.overrideID)
		switch {
		case !ok:
			t.Errorf("%d/%s: no limit", tc.name, tc.overrideID)
		case l.Algorithm != ratelimits.Calendar || l.Count != tc.count || l.Burst != tc.count || l.Override != tc.override:
			t.Errorf("%d/%s = %+v, want count %d override %v", tc.name, tc.overrideID, l, tc.count, tc.override)
		case l.Calendar == nil || l.Calendar.Unit() != tc.unit || l.Calendar.Zone() != tc.zone:
			t.Errorf("%d/%s calendar = %v, want %s in %s", tc.name, tc.overrideID, l.Calendar, tc.unit, tc.zone)
		}
	}
	def, _ := c.Limit(api.Name, "someone")
	gold, _ := c.Limit(api.Name, "gold-plan")
	if def.Calendar != gold.Calendar {
		t.Error("an override has a calendar of its own: its period would be found apart from the default's")
	}
	if gold.Penalty != def.Penalty || def.Penalty == 0 {
		t.Errorf("penalties: default %s, override %s", def.Penalty, gold.Penalty)
	}
}

func TestConfigBadCalendars(t *testing.T) {
	const api = "API"
	head := "API:\n  enum: 130\n  id: string\n  algorithm: calendar\n" // lines 1 to 4
	cases := []struct {
		desc     string
		defaults string
		want     []wantProblem
	}{
		{"a duration for period", head + "  count: 5\n  period: 720h\n",
			[]wantProblem{{dfile, 6, api, `a calendar limit's period must be day, week, month or year, got the duration "720h"`}}},
		{"another word for period", head + "  count: 5\n  period: quarter\n",
			[]wantProblem{{dfile, 6, api, `a calendar limit's period must be day, week, month or year, got "quarter"`}}},
		{"period not a string", head + "  count: 5\n  period: 30\n",
			[]wantProblem{{dfile, 6, api, "a calendar limit's period must be day, week, month or year, got the integer 30"}}},
		{"an unknown timezone", head + "  count: 5\n  period: day\n  timezone: Europe/Pariss\n",
			[]wantProblem{{dfile, 7, api, `unknown timezone "Europe/Pariss": want an IANA zone name`}}},
		{"Local is no zone name", head + "  count: 5\n  period: day\n  timezone: Local\n",
			[]wantProblem{{dfile, 7, api, `unknown timezone "Local"`}}},
		{"timezone not a string", head + "  count: 5\n  period: day\n  timezone: 1\n",
			[]wantProblem{{dfile, 7, api, "timezone must be an IANA zone name such as Europe/Paris or UTC, got the integer 1"}}},
		{"burst", head + "  count: 5\n  period: day\n  burst: 5\n",
			[]wantProblem{{dfile, 7, api, "burst is not a field of a calendar limit: a calendar limit allows count hits per day, week, month or year of its timezone (remove burst)"}}},
		{"sync_rate", head + "  count: 5\n  period: day\n  sync_rate: 1\n",
			[]wantProblem{{dfile, 7, api, "sync_rate applies to window and rate-counter limits (sliding-window, fixed-window, rate-counter), not to calendar"}}},
		{"count 0", head + "  count: 0\n  period: day\n",
			[]wantProblem{{dfile, 5, api, "count must be greater than 0, got 0"}}},
		{"count above 2^53 − 1", head + "  count: 9007199254740992\n  period: day\n",
			[]wantProblem{{dfile, 5, api, "count must be at most 2^53 − 1 (9007199254740991) on a calendar limit, got 9007199254740992"}}},
		{"missing count and period", head,
			[]wantProblem{{dfile, 1, api, "missing count"}, {dfile, 1, api, "missing period: a calendar limit counts per day, week, month or year"}}},
		{"timezone on a gcra limit", "API:\n  enum: 130\n  id: string\n  burst: 5\n  count: 5\n  period: 1m\n  timezone: UTC\n",
			[]wantProblem{{dfile, 7, api, "timezone is not a field of a gcra limit"}}},
		{"a bad period and a bad timezone, both", head + "  count: 5\n  period: fortnight\n  timezone: Nowhere/Town\n",
			[]wantProblem{{dfile, 6, api, "got \"fortnight\""}, {dfile, 7, api, "unknown timezone"}}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			_, err := Parse(dfile, []byte(c.defaults), ofile, nil)
			checkProblems(t, err, c.want)
		})
	}
}

// TestConfigBadCalendarOverrides: an override of a calendar limit gives a
// count alone.
func TestConfigBadCalendarOverrides(t *testing.T) {
	const api = "APICallsPerMonth"
	head := "- APICallsPerMonth:\n" // line 1
	ids := "    ids: [{id: gold}]\n"
	cases := []struct {
		desc      string
		overrides string
		want      []wantProblem
	}{
		{"period", head + "    count: 5\n    period: year\n" + ids,
			[]wantProblem{{ofile, 3, api, "an override of a calendar limit gives count only: period belongs to the limit name"}}},
		{"timezone", head + "    count: 5\n    timezone: UTC\n" + ids,
			[]wantProblem{{ofile, 3, api, "an override cannot set timezone: it belongs to the limit name"}}},
		{"penalty", head + "    count: 5\n    penalty: 1m\n" + ids,
			[]wantProblem{{ofile, 3, api, "an override of a calendar limit gives count only: penalty belongs to the limit name"}}},
		{"burst", head + "    burst: 5\n    count: 5\n" + ids,
			[]wantProblem{{ofile, 2, api, "burst is not a field of a calendar limit"}}},
		{"count 0", head + "    count: 0\n" + ids,
			[]wantProblem{{ofile, 2, api, "count must be greater than 0"}}},
		{"missing count", head + ids,
			[]wantProblem{{ofile, 1, api, "missing count"}}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			_, err := Parse(dfile, []byte(calendarDefaults), ofile, []byte(c.overrides))
			checkProblems(t, err, c.want)
		})
	}
}

// Descriptor rules and forward-auth rules may name a calendar limit: it
// counts like any other.
func TestCalendarInRules(t *testing.T) {
	c, err := Parse(dfile, []byte(calendarDefaults), ofile, []byte(calendarOverrides))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseDescriptors("descriptors.yaml", []byte("- domain: api\n  descriptors:\n    - keys: [api_key]\n      limit: APICallsPerMonth\n"), c); err != nil {
		t.Errorf("descriptors: %v", err)
	}
	rules := "rules:\n  api:\n    limits:\n      - limit: APICallsPerMonth\n        id: header:X-Api-Key\n"
	if _, err := ParseForwardAuth("forward-auth.yaml", []byte(rules), c); err != nil {
		t.Errorf("forward-auth: %v", err)
	}
}
