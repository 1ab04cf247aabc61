package calendar

import (
	"testing"
	"time"
)

// ms reads an RFC 3339 instant as unix ms.
func ms(t *testing.T, s string) int64 {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UnixMilli()
}

// utc writes unix ms as RFC 3339 in UTC, for messages.
func utc(v int64) string { return time.UnixMilli(v).UTC().Format("2006-01-02T15:04:05.000Z") }

func TestFind(t *testing.T) {
	tests := []struct {
		name       string
		zone       string
		unit       Unit
		now        string
		start, end string
	}{
		// Europe/Paris: clocks go forward at 02:00 on 29 March 2026 and
		// back at 03:00 on 25 October.
		{"Paris, the 23-hour day of spring", "Europe/Paris", Day, "2026-03-29T12:00:00Z", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"},
		{"Paris, the 25-hour day of autumn", "Europe/Paris", Day, "2026-10-25T12:00:00Z", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z"},
		{"Paris, in the repeated hour", "Europe/Paris", Day, "2026-10-25T00:30:00Z", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z"},
		{"Paris, the month of the spring change", "Europe/Paris", Month, "2026-03-15T00:00:00Z", "2026-02-28T23:00:00Z", "2026-03-31T22:00:00Z"},
		{"Paris, the last millisecond of March", "Europe/Paris", Month, "2026-03-31T21:59:59.999Z", "2026-02-28T23:00:00Z", "2026-03-31T22:00:00Z"},
		{"Paris, the first millisecond of April", "Europe/Paris", Month, "2026-03-31T22:00:00Z", "2026-03-31T22:00:00Z", "2026-04-30T22:00:00Z"},
		{"Paris, a year", "Europe/Paris", Year, "2026-07-01T00:00:00Z", "2025-12-31T23:00:00Z", "2026-12-31T23:00:00Z"},
		{"Paris, the week of the spring change", "Europe/Paris", Week, "2026-03-29T10:00:00Z", "2026-03-22T23:00:00Z", "2026-03-29T22:00:00Z"},
		// America/New_York: forward at 02:00 on 8 March 2026, back at 02:00 on 1 November.
		{"New York, the 23-hour day", "America/New_York", Day, "2026-03-08T12:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"},
		{"New York, the 25-hour day", "America/New_York", Day, "2026-11-01T12:00:00Z", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z"},
		{"New York, the evening before midnight UTC", "America/New_York", Day, "2026-11-02T04:59:59.999Z", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z"},
		// Asia/Kolkata: UTC+05:30 all year.
		{"Kolkata, a day", "Asia/Kolkata", Day, "2026-06-15T12:00:00Z", "2026-06-14T18:30:00Z", "2026-06-15T18:30:00Z"},
		{"Kolkata, February of a leap year", "Asia/Kolkata", Month, "2028-02-29T12:00:00Z", "2028-01-31T18:30:00Z", "2028-02-29T18:30:00Z"},
		// Australia/Lord_Howe: half an hour of daylight saving, forward at
		// 02:00 on 4 October 2026, back at 02:00 on 5 April.
		{"Lord Howe, the 23.5-hour day", "Australia/Lord_Howe", Day, "2026-10-04T00:00:00Z", "2026-10-03T13:30:00Z", "2026-10-04T13:00:00Z"},
		{"Lord Howe, the 24.5-hour day", "Australia/Lord_Howe", Day, "2026-04-05T00:00:00Z", "2026-04-04T13:00:00Z", "2026-04-05T13:30:00Z"},
		// America/Santiago skips local midnight: on 3 September 2023 the
		// clocks went from 23:59:59 to 01:00.
		{"Santiago, the day before the skipped midnight", "America/Santiago", Day, "2023-09-02T12:00:00Z", "2023-09-02T04:00:00Z", "2023-09-03T04:00:00Z"},
		{"Santiago, the day that starts at 01:00", "America/Santiago", Day, "2023-09-03T12:00:00Z", "2023-09-03T04:00:00Z", "2023-09-04T03:00:00Z"},
		{"Santiago, the week that starts at 01:00 on a Sunday's eve", "America/Santiago", Week, "2023-09-03T12:00:00Z", "2023-08-28T04:00:00Z", "2023-09-04T03:00:00Z"},
		// America/Havana skips midnight in March and repeats it in November.
		{"Havana, the day that starts after the gap", "America/Havana", Day, "2024-03-10T12:00:00Z", "2024-03-10T05:00:00Z", "2024-03-11T04:00:00Z"},
		{"Havana, midnight twice: the earlier", "America/Havana", Day, "2024-11-03T04:30:00Z", "2024-11-03T04:00:00Z", "2024-11-04T05:00:00Z"},
		{"Havana, midnight twice: after the second", "America/Havana", Day, "2024-11-03T05:30:00Z", "2024-11-03T04:00:00Z", "2024-11-04T05:00:00Z"},
		// Asia/Beirut sets clocks back from 24:00 to 23:00: 23:00 happens twice.
		{"Beirut, the 25-hour day", "Asia/Beirut", Day, "2023-10-28T21:30:00Z", "2023-10-27T21:00:00Z", "2023-10-28T22:00:00Z"},
		// Pacific/Apia skipped 30 December 2011 altogether.
		{"Apia, the day before the skipped day", "Pacific/Apia", Day, "2011-12-30T09:00:00Z", "2011-12-29T10:00:00Z", "2011-12-30T10:00:00Z"},
		{"Apia, the day after it", "Pacific/Apia", Day, "2011-12-30T10:00:00Z", "2011-12-30T10:00:00Z", "2011-12-31T10:00:00Z"},
		// UTC: month and year ends, leap years, ISO weeks.
		{"UTC, the last millisecond of January", "UTC", Month, "2026-01-31T23:59:59.999Z", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"},
		{"UTC, the first of February", "UTC", Month, "2026-02-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"},
		{"UTC, February of a leap year", "UTC", Month, "2024-02-29T23:59:59.999Z", "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"UTC, February 29", "UTC", Day, "2024-02-29T12:00:00Z", "2024-02-29T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"UTC, a leap year", "UTC", Year, "2024-12-31T23:59:59.999Z", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z"},
		{"UTC, 2100 is no leap year", "UTC", Month, "2100-02-28T12:00:00Z", "2100-02-01T00:00:00Z", "2100-03-01T00:00:00Z"},
		{"UTC, the ISO week across new year", "UTC", Week, "2026-01-01T00:00:00Z", "2025-12-29T00:00:00Z", "2026-01-05T00:00:00Z"},
		{"UTC, a Sunday ends its week", "UTC", Week, "2026-01-04T23:59:59.999Z", "2025-12-29T00:00:00Z", "2026-01-05T00:00:00Z"},
		{"UTC, a Monday starts one", "UTC", Week, "2026-01-05T00:00:00Z", "2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z"},
		// Past 2037 Go computes changes from each zone's rule, year by year.
		{"New York, the last day of 2040", "America/New_York", Day, "2040-12-31T12:00:00Z", "2040-12-31T05:00:00Z", "2041-01-01T05:00:00Z"},
		{"Paris, the year 2041", "Europe/Paris", Year, "2040-12-31T23:30:00Z", "2040-12-31T23:00:00Z", "2041-12-31T23:00:00Z"},
		{"Paris, the 23-hour day of 2041", "Europe/Paris", Day, "2041-03-31T12:00:00Z", "2041-03-30T23:00:00Z", "2041-03-31T22:00:00Z"},
		{"UTC, before 1970", "UTC", Day, "1969-12-31T12:00:00Z", "1969-12-31T00:00:00Z", "1970-01-01T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc := testZone(t, tt.zone)
			got := Find(tt.unit, loc, ms(t, tt.now))
			want := Period{Start: ms(t, tt.start), End: ms(t, tt.end)}
			if got != want {
				t.Errorf("Find(%s, %s, %s) = [%s, %s), want [%s, %s)", tt.unit, tt.zone, tt.now, utc(got.Start), utc(got.End), utc(want.Start), utc(want.End))
			}
		})
	}
}

func TestParseUnit(t *testing.T) {
	for _, u := range []Unit{Day, Week, Month, Year} {
		if got, ok := ParseUnit(u.String()); !ok || got != u {
			t.Errorf("ParseUnit(%q) = %v, %v", u.String(), got, ok)
		}
	}
	for _, s := range []string{"", "Day", "720h", "1d", "quarter"} {
		if _, ok := ParseUnit(s); ok {
			t.Errorf("ParseUnit(%q) accepted", s)
		}
	}
}
