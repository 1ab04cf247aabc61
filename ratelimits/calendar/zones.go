package calendar

import (
	"archive/zip"
	_ "embed"
	"io"
	"strings"
	"time"
)

// zoneinfo is Go's zone database: $GOROOT/lib/time/zoneinfo.zip, from
// which time/tzdata is made, copied here (TestZoneDatabaseIsGos holds its
// names to the toolchain's; copy it again with each Go release):
//
//	cp "$(go env GOROOT)/lib/time/zoneinfo.zip" ratelimits/calendar/
//
// A zone's rules are read from it alone. time.LoadLocation would prefer
// $ZONEINFO and the host's own files, which may be older or newer than the
// binary's: two processes of one service on two hosts would then disagree
// on when a period starts, and count one quota under two keys.
//
//go:embed zoneinfo.zip
var zoneinfo string

// loadZone returns the zone named name of zoneinfo, ok false when it has
// none of that name. It runs when a configuration is loaded, not per
// decision.
func loadZone(name string) (loc *time.Location, ok bool) {
	db, err := zip.NewReader(strings.NewReader(zoneinfo), int64(len(zoneinfo)))
	if err != nil {
		return nil, false
	}
	// The names are exact: "europe/paris", "Local", "../x" or a
	// directory name find nothing.
	f, err := db.Open(name)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || info.IsDir() {
		return nil, false
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, false
	}
	loc, err = time.LoadLocationFromTZData(name, []byte(data))
	return loc, err == nil
}
