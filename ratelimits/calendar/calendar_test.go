package calendar

import (
	"archive/zip"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	c, err := New(Month, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Zone() != "UTC" || c.Unit() != Month || c.Location().String() != "UTC" {
		t.Errorf("New(Month, \"\") = %s %s %s", c.Unit(), c.Zone(), c.Location())
	}
	// Besides names no database has: files of a host's zone directory that
	// are not zones of Go's database, which would name another zone, or
	// none, on another host.
	for _, zone := range []string{"Europe/Pariss", "Local", "../etc/passwd", "Mars/Olympus",
		"localtime", "posixrules", "right/UTC", "posix/Europe/Paris", "Europe/Paris\nUTC", "UTC\n", "europe/paris"} {
		if _, err := New(Day, zone); !errors.Is(err, ErrUnknownZone) {
			t.Errorf("New(Day, %q) = %v, want ErrUnknownZone", zone, err)
		}
	}
	if _, err := New(0, "UTC"); err == nil {
		t.Error("New(0, UTC) accepted")
	}
}

func TestTagTellsCalendarsApart(t *testing.T) {
	seen := map[int64]string{}
	for _, u := range []Unit{Day, Week, Month, Year} {
		for _, zone := range []string{"UTC", "Europe/London", "Europe/Paris", "Africa/Abidjan"} {
			tag := Tag(u, zone)
			if tag <= 0 || tag >= 1<<61 {
				t.Errorf("Tag(%s, %s) = %d, out of range", u, zone, tag)
			}
			if prev, dup := seen[tag]; dup {
				t.Errorf("Tag(%s, %s) = Tag of %s", u, zone, prev)
			}
			seen[tag] = u.String() + "/" + zone
		}
	}
}

// At answers from the period it keeps while now is inside it, and finds
// the next one when now leaves it, as Find does.
func TestAtKeepsThePeriod(t *testing.T) {
	c, err := New(Day, "Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 3, 29, 12, 0, 0, 0, time.UTC).UnixMilli()
	p := c.At(day)
	if kept := c.current.Load(); kept == nil || *kept != p {
		t.Fatalf("At kept %v, want %v", kept, p)
	}
	kept := c.current.Load()
	for _, now := range []int64{p.Start, day, p.End - 1} {
		if got := c.At(now); got != p || c.current.Load() != kept {
			t.Errorf("At(%s) = %v, found again", utc(now), got)
		}
	}
	for _, now := range []int64{p.End, p.Start - 1, day + 400*86_400_000} {
		if got, want := c.At(now), Find(Day, c.Location(), now); got != want {
			t.Errorf("At(%s) = %v, want %v", utc(now), got, want)
		}
	}
}

func TestAtConcurrently(t *testing.T) {
	c, err := New(Day, "America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				now := base + int64((i*7+g)%48)*3_600_000
				if got, want := c.At(now), Find(Day, c.Location(), now); got != want {
					t.Errorf("At(%s) = %v, want %v", utc(now), got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkAt is a decision's cost of finding its period inside the one
// kept.
func BenchmarkAt(b *testing.B) {
	c, err := New(Month, "Europe/Paris")
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := 0; b.Loop(); i++ {
		c.At(now + int64(i&1023))
	}
}

// zoneinfo holds exactly the zones of the Go release the tests run on (its
// lib/time/zoneinfo.zip, from which time/tzdata is made), and each of them
// loads. Their rules may differ between releases; the names only change
// when a zone is added or removed, which a copy from the release brings.
func TestZoneDatabaseIsGos(t *testing.T) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	gos, err := zip.OpenReader(filepath.Join(strings.TrimSpace(string(out)), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		t.Fatalf("Go's zone database: %v", err)
	}
	defer gos.Close()
	ours, err := zip.NewReader(strings.NewReader(zoneinfo), int64(len(zoneinfo)))
	if err != nil {
		t.Fatal(err)
	}
	names := func(files []*zip.File) []string {
		var zones []string
		for _, f := range files {
			if !strings.HasSuffix(f.Name, "/") {
				zones = append(zones, f.Name)
			}
		}
		slices.Sort(zones)
		return zones
	}
	if a, b := names(ours.File), names(gos.File); !slices.Equal(a, b) {
		t.Fatalf("zoneinfo.zip has %d zones, Go's database %d: copy it again (see zoneinfo)", len(a), len(b))
	}
	for _, zone := range names(ours.File) {
		if _, err := New(Day, zone); err != nil {
			t.Errorf("New(Day, %q): %v", zone, err)
		}
	}
}

// A zone's rules are the binary's, whatever the host's zone files say:
// here $ZONEINFO, which time.LoadLocation reads first, gives Paris Tokyo's
// rules. It runs in a process of its own, as the time package reads
// $ZONEINFO once.
func TestHostZoneFilesDoNotMatter(t *testing.T) {
	if os.Getenv("CALENDAR_TEST_HOST_ZONES") == "" {
		tokyo, ok := zoneData("Asia/Tokyo")
		if !ok {
			t.Fatal("no Asia/Tokyo in zoneinfo")
		}
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "Europe"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "Europe", "Paris"), tokyo, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestHostZoneFilesDoNotMatter$", "-test.count=1")
		cmd.Env = append(os.Environ(), "CALENDAR_TEST_HOST_ZONES=1", "ZONEINFO="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("with Paris as Tokyo in $ZONEINFO: %v\n%s", err, out)
		}
		return
	}
	// The test's premise: the time package reads $ZONEINFO first.
	if loc, err := time.LoadLocation("Europe/Paris"); err != nil {
		t.Fatal(err)
	} else if _, offset := time.Date(2026, 3, 7, 12, 0, 0, 0, loc).Zone(); offset != 9*3600 {
		t.Fatalf("time.LoadLocation(Europe/Paris) under $ZONEINFO: offset %d, want Tokyo's 32400", offset)
	}
	c, err := New(Day, "Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	p := c.At(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC).UnixMilli())
	if want := time.Date(2026, 3, 6, 23, 0, 0, 0, time.UTC).UnixMilli(); p.Start != want {
		t.Errorf("Paris's day of 2026-03-07 starts at %s, want %s", time.UnixMilli(p.Start).UTC(), time.UnixMilli(want).UTC())
	}
}

// zoneData returns the zone file of name in zoneinfo.
func zoneData(name string) ([]byte, bool) {
	db, err := zip.NewReader(strings.NewReader(zoneinfo), int64(len(zoneinfo)))
	if err != nil {
		return nil, false
	}
	data, err := fs.ReadFile(db, name)
	return data, err == nil
}

// testZone returns the zone named name of the binary's database, as New
// reads it.
func testZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, ok := loadZone(name)
	if !ok {
		t.Fatalf("no zone %q", name)
	}
	return loc
}
