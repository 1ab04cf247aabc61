package calendar

import (
	"archive/zip"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "time/tzdata" // the zones of a host without a zone database
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

// zones.txt lists exactly the zones of the Go release the tests run on
// (its lib/time/zoneinfo.zip, from which time/tzdata is made), and each of
// them loads.
func TestZoneNamesAreGos(t *testing.T) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	z, err := zip.OpenReader(filepath.Join(strings.TrimSpace(string(out)), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		t.Fatalf("Go's zone database: %v", err)
	}
	defer z.Close()
	var gos []string
	for _, f := range z.File {
		if !strings.HasSuffix(f.Name, "/") {
			gos = append(gos, f.Name)
		}
	}
	slices.Sort(gos)
	ours := strings.Split(strings.TrimSuffix(zoneNames, "\n"), "\n")
	if !slices.Equal(ours, gos) {
		t.Fatalf("zones.txt has %d names, Go's database %d: make it again (see zoneNames)", len(ours), len(gos))
	}
	for _, zone := range ours {
		if _, err := New(Day, zone); err != nil {
			t.Errorf("New(Day, %q): %v", zone, err)
		}
	}
}
