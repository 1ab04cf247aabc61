package calendar

import (
	"math/rand/v2"
	"testing"
	"time"
)

// bruteStart finds, by scanning, the first instant (unix ms) whose local
// date in loc is day or later: minute by minute from well before day's
// midnight UTC, then second by second back over the last minute (zone
// changes fall on whole seconds). It shares no code with Find.
func bruteStart(loc *time.Location, day time.Time) int64 {
	reached := func(t time.Time) bool {
		ly, lm, ld := t.In(loc).Date()
		return !time.Date(ly, lm, ld, 0, 0, 0, 0, time.UTC).Before(day)
	}
	t := day.Add(-40 * time.Hour)
	for !reached(t) {
		t = t.Add(time.Minute)
	}
	for reached(t.Add(-time.Second)) {
		t = t.Add(-time.Second)
	}
	return t.UnixMilli()
}

// localDay is the local date of unix ms now in loc, as midnight UTC.
func localDay(loc *time.Location, now int64) time.Time {
	y, m, d := time.UnixMilli(now).In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// bruteFirstDays returns the first day of the period of u holding the
// local date day, and that of the next period, by stepping one day
// at a time.
func bruteFirstDays(u Unit, day time.Time) (first, next time.Time) {
	starts := func(t time.Time) bool {
		switch u {
		case Week:
			return t.Weekday() == time.Monday
		case Month:
			return t.Day() == 1
		case Year:
			return t.YearDay() == 1
		}
		return true
	}
	first = day
	for !starts(first) {
		first = first.AddDate(0, 0, -1)
	}
	next = day.AddDate(0, 0, 1)
	for !starts(next) {
		next = next.AddDate(0, 0, 1)
	}
	return first, next
}

// TestFindMatchesBruteForce holds Find to a brute-force search over
// random instants in zones with every kind of change: a period starts
// at the first instant of its first day, ends at the next one's, and
// holds the instant.
func TestFindMatchesBruteForce(t *testing.T) {
	zones := []string{"UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe",
		"America/Santiago", "America/Havana", "Asia/Beirut", "America/Asuncion", "America/St_Johns", "Asia/Kathmandu", "Pacific/Chatham"}
	rng := rand.New(rand.NewPCG(1, 2))
	from := time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	to := time.Date(2045, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	n := 400
	if testing.Short() {
		n = 50
	}
	for range n {
		zone := zones[rng.IntN(len(zones))]
		loc := testZone(t, zone)
		u := Unit(1 + rng.IntN(4))
		now := from + rng.Int64N(to-from)
		got := Find(u, loc, now)
		if !got.Contains(now) {
			t.Fatalf("Find(%s, %s, %s) = [%s, %s) does not hold it", u, zone, utc(now), utc(got.Start), utc(got.End))
		}
		first, next := bruteFirstDays(u, localDay(loc, now))
		want := Period{Start: bruteStart(loc, first), End: bruteStart(loc, next)}
		if want.End <= now {
			// The local date went back over midnight: the instant is in
			// the period that began at the first midnight.
			first, next = bruteFirstDays(u, next)
			want = Period{Start: bruteStart(loc, first), End: bruteStart(loc, next)}
		}
		if got != want {
			t.Fatalf("Find(%s, %s, %s) = [%s, %s), brute force [%s, %s)", u, zone, utc(now), utc(got.Start), utc(got.End), utc(want.Start), utc(want.End))
		}
	}
}

// TestFindAroundEveryChange runs the brute force at each zone change of
// the test zones in 2023 and 2024, a millisecond either side of it and of
// the periods' bounds, where random instants rarely fall.
func TestFindAroundEveryChange(t *testing.T) {
	for _, zone := range []string{"Europe/Paris", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "America/Havana", "Asia/Beirut", "America/Asuncion"} {
		loc := testZone(t, zone)
		for at := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC); at.Year() < 2025; {
			_, end := at.In(loc).ZoneBounds()
			if end.IsZero() {
				break
			}
			if !end.After(at) {
				// Past a zone's table, where Go computes the changes from
				// its rule year by year, ZoneBounds may answer an end that
				// is not after at (late in December; see nextChange).
				at = at.Add(time.Hour)
				continue
			}
			at = end
			for _, u := range []Unit{Day, Week} {
				for _, now := range []int64{end.UnixMilli() - 1, end.UnixMilli()} {
					p := Find(u, loc, now)
					for _, probe := range []int64{p.Start - 1, p.Start, p.End - 1, p.End} {
						q := Find(u, loc, probe)
						first, next := bruteFirstDays(u, localDay(loc, probe))
						want := Period{Start: bruteStart(loc, first), End: bruteStart(loc, next)}
						if want.End <= probe {
							first, next = bruteFirstDays(u, next)
							want = Period{Start: bruteStart(loc, first), End: bruteStart(loc, next)}
						}
						if q != want {
							t.Errorf("Find(%s, %s, %s) = [%s, %s), brute force [%s, %s)", u, zone, utc(probe), utc(q.Start), utc(q.End), utc(want.Start), utc(want.End))
						}
					}
				}
			}
		}
	}
}
