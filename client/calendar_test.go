package client

import (
	"net/http"
	"testing"
	"time"
)

// A calendar limit's decision and settings carry its period word, zone
// and period end; its period is no duration.
func TestDecodeCalendar(t *testing.T) {
	body := `{"allowed":true,"remaining":6,"retry_in_ms":0,"reset_in_ms":3600000,"decisions":[` +
		`{"limit":"APICallsPerMonth","id":"alice","allowed":true,"remaining":6,"retry_in_ms":0,"reset_in_ms":3600000,"unlimited":false,` +
		`"burst":10,"count":10,"period":"month","override":false,"algorithm":"calendar","timezone":"Europe/Paris","period_end":"2026-12-31T23:00:00.000Z"}]}`
	d, err := decodeDecision([]byte(body), http.Header{})
	if err != nil {
		t.Fatal(err)
	}
	td := d.Decisions[0]
	want := time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC)
	if td.Algorithm != Calendar || td.CalendarPeriod != "month" || td.Timezone != "Europe/Paris" || !td.PeriodEnd.Equal(want) || td.Period != 0 || td.Count != 10 {
		t.Errorf("decision %+v", td)
	}
	limits, err := decodeLimits([]byte(`{"limits":[{"limit":"APICallsPerMonth","enum":130,"id_kind":"string","declared":true,"algorithm":"calendar",` +
		`"default":{"count":10,"period":"month","timezone":"Europe/Paris"},"overrides":0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := limits[0].Default; s == nil || *s != (LimitSettings{Count: 10, CalendarPeriod: "month", Timezone: "Europe/Paris"}) {
		t.Errorf("settings %+v", s)
	}
}
