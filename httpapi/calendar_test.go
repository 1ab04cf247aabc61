package httpapi_test

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/internal/vectors"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

const calendarDefaults = `
APICallsPerMonth:
  enum: 130
  id: string
  algorithm: calendar
  count: 10
  period: month
  timezone: Europe/Paris
ExportsPerDay:
  enum: 131
  id: string
  algorithm: calendar
  count: 3
  period: day
  timezone: America/New_York
`

// newCalendarServer serves calendar limits from the model source on a
// fake clock at now.
func newCalendarServer(t *testing.T, now time.Time) *server {
	t.Helper()
	cfg, err := configfile.Parse("defaults.yaml", []byte(calendarDefaults), "overrides.yaml", []byte("- APICallsPerMonth:\n    count: 1000\n    ids: [{id: gold}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(now)
	l, err := ratelimits.NewLimiter(cfg, vectors.NewModelSource(), clk)
	if err != nil {
		t.Fatal(err)
	}
	return &server{t: t, h: httpapi.New(httpapi.Options{Limiter: l}), clock: clk}
}

// A calendar decision has the period word, the zone and the period's end;
// its headers give the period's length in seconds (Paris's December: 31
// days).
func TestCalendarSpendAnswerAndHeaders(t *testing.T) {
	s := newCalendarServer(t, time.Date(2026, 12, 31, 22, 0, 0, 0, time.UTC))
	rec := s.post("/v1/spend", `{"limit":"APICallsPerMonth","id":"alice","cost":4}`)
	body := rec.Body.String()
	got := decode[wire.BatchResponse](t, rec)
	want := wire.DecisionResponse{Limit: "APICallsPerMonth", ID: "alice", Allowed: true, Remaining: 6, ResetInMS: 3_600_000,
		Burst: 10, Count: 10, Period: "month", Algorithm: "calendar", Timezone: "Europe/Paris", PeriodEnd: "2026-12-31T23:00:00.000Z"}
	if rec.Code != 200 || len(got.Decisions) != 1 || got.Decisions[0] != want {
		t.Fatalf("%d %+v\nwant decision %+v", rec.Code, got, want)
	}
	if !strings.Contains(body, `"algorithm":"calendar","timezone":"Europe/Paris","period_end":"2026-12-31T23:00:00.000Z"}`) {
		t.Errorf("body %s", body)
	}
	for name, want := range map[string]string{"RateLimit-Policy": `"APICallsPerMonth";q=10;w=2678400`, "RateLimit": `"APICallsPerMonth";r=6;t=3600`, "Retry-After": ""} {
		if h := rec.Header().Get(name); h != want {
			t.Errorf("%s = %q; want %q", name, h, want)
		}
	}
	// 7 more do not fit: denied until the month ends, an hour on.
	rec = s.post("/v1/spend", `{"limit":"APICallsPerMonth","id":"alice","cost":7}`)
	if got := decode[wire.BatchResponse](t, rec); got.Allowed || got.RetryInMS != 3_600_000 || got.Remaining != 6 || rec.Header().Get("Retry-After") != "3600" {
		t.Fatalf("denied spend: %+v, Retry-After %q", got, rec.Header().Get("Retry-After"))
	}
	// In January the count starts again; the gold override shares the zone.
	s.clock.Add(time.Hour)
	rec = s.post("/v1/spend", `{"transactions":[{"limit":"APICallsPerMonth","id":"alice","cost":10},{"limit":"APICallsPerMonth","id":"gold","cost":10}]}`)
	got = decode[wire.BatchResponse](t, rec)
	if !got.Allowed || got.Decisions[0].PeriodEnd != "2027-01-31T23:00:00.000Z" || got.Decisions[1].Remaining != 990 || !got.Decisions[1].Override || got.Decisions[1].Timezone != "Europe/Paris" {
		t.Fatalf("January: %+v", got)
	}
}

// The day of New York's clock change is 25 hours long: w says so.
func TestCalendarHeadersOnAClockChange(t *testing.T) {
	s := newCalendarServer(t, time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	rec := s.post("/v1/spend", `{"limit":"ExportsPerDay","id":"bob","cost":3}`)
	if h := rec.Header().Get("RateLimit-Policy"); h != `"ExportsPerDay";q=3;w=90000` {
		t.Errorf("RateLimit-Policy = %q", h)
	}
	got := decode[wire.BatchResponse](t, rec)
	// The day ends at 05:00 UTC on 2 November: 17 hours on.
	if got.Decisions[0].PeriodEnd != "2026-11-02T05:00:00.000Z" || got.RetryInMS != 17*3_600_000 || got.Decisions[0].Remaining != 0 {
		t.Fatalf("%+v", got)
	}
}

// GET /v1/limits shows a calendar name's period word and zone.
func TestCalendarLimits(t *testing.T) {
	s := newCalendarServer(t, start)
	got := decode[wire.LimitsResponse](t, s.get("/v1/limits"))
	found := 0
	for _, l := range got.Limits {
		if l.Limit != "APICallsPerMonth" {
			continue
		}
		found++
		if l.Algorithm != "calendar" || l.Default == nil || *l.Default != (wire.LimitSettings{Count: 10, Period: "month", Timezone: "Europe/Paris"}) || l.Overrides != 1 || l.SyncRate != nil {
			t.Errorf("%+v default %+v", l, l.Default)
		}
	}
	if found != 1 {
		t.Fatalf("APICallsPerMonth listed %d times", found)
	}
	view := decode[wire.DecisionResponse](t, s.get("/v1/limits/APICallsPerMonth/alice"))
	if view.Period != "month" || view.Timezone != "Europe/Paris" || view.PeriodEnd != "2026-11-30T23:00:00.000Z" || view.SyncRate != nil {
		t.Errorf("subscriber view %+v", view)
	}
}

// Every calendar vector through the handler, on the memory source.
func TestCalendarVectorsOverHTTP(t *testing.T) {
	f, err := vectors.Calendar()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configfile.Parse("defaults.yaml", f.Defaults, "overrides.yaml", f.Overrides)
	if err != nil {
		t.Fatal(err)
	}
	begin, err := f.StartTime(start)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(begin)
	l, err := ratelimits.NewLimiter(cfg, memory.New(0), clk)
	if err != nil {
		t.Fatal(err)
	}
	vectors.Run(t, f, &handlerDriver{h: httpapi.New(httpapi.Options{Limiter: l}), clock: clk}, time.Millisecond)
}

// BenchmarkSpendHandlerCalendar spends one hit of a monthly calendar
// limit and of a GCRA limit of the same count, over 10,000 ids, through
// the handler on the memory source: a calendar decision's cost beside a
// GCRA one's.
func BenchmarkSpendHandlerCalendar(b *testing.B) {
	const defaults = calendarDefaults + `
PerKey:
  enum: 132
  id: string
  burst: 1000000000
  count: 1000000000
  period: 720h
`
	for _, limit := range []string{"PerKey", "APICallsPerMonth"} {
		b.Run(limit, func(b *testing.B) {
			cfg, err := configfile.Parse("d", []byte(strings.Replace(defaults, "count: 10\n", "count: 1000000000\n", 1)), "o", nil)
			if err != nil {
				b.Fatal(err)
			}
			l, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.New())
			if err != nil {
				b.Fatal(err)
			}
			h := httpapi.New(httpapi.Options{Limiter: l})
			bodies := make([]string, 10_000)
			for i := range bodies {
				bodies[i] = `{"limit":"` + limit + `","id":"key-` + strconv.Itoa(i) + `","cost":1}`
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				req := httptest.NewRequest("POST", "/v1/spend", strings.NewReader(bodies[i%len(bodies)]))
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				i++
			}
		})
	}
}
