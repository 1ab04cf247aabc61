package calendar

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// ErrUnknownZone is the error of a zone name the zone database does not
// know.
var ErrUnknownZone = errors.New("unknown time zone")

// Calendar is the periods of one unit in one zone, with the current one
// kept: a decision inside the period last found costs one atomic load and
// two comparisons, no zone lookup. It is safe for concurrent use; a limit
// (and every override of its name) shares one.
type Calendar struct {
	unit Unit
	zone string
	loc  *time.Location
	tag  int64
	// current is the period last found; it is replaced, never changed, so
	// a reader holds a consistent one without a lock.
	current atomic.Pointer[Period]
}

// New returns the calendar of unit u in the IANA zone named zone ("" is
// UTC), with the rules of the zone database built into the binary
// (zoneinfo), whatever the host's says, so that a name means the same
// periods on every host. An unknown zone wraps ErrUnknownZone.
func New(u Unit, zone string) (*Calendar, error) {
	if u < Day || u > Year {
		return nil, fmt.Errorf("calendar: unit %d is not day, week, month or year", u)
	}
	if zone == "" {
		zone = "UTC"
	}
	loc, ok := loadZone(zone)
	if !ok {
		return nil, fmt.Errorf("%w %q: want an IANA zone name such as Europe/Paris or UTC", ErrUnknownZone, zone)
	}
	return &Calendar{unit: u, zone: zone, loc: loc, tag: Tag(u, zone)}, nil
}

// Unit returns the calendar's unit.
func (c *Calendar) Unit() Unit { return c.unit }

// Zone returns the calendar's zone name.
func (c *Calendar) Zone() string { return c.zone }

// Location returns the calendar's zone.
func (c *Calendar) Location() *time.Location { return c.loc }

// Tag identifies the calendar's unit and zone in a stored counter: a
// counter kept under another tag belongs to another calendar and counts
// nothing here.
func (c *Calendar) Tag() int64 { return c.tag }

// At returns the period holding nowMs. Inside the period last found it
// answers from it; otherwise it finds the period (Find) and keeps it.
func (c *Calendar) At(nowMs int64) Period {
	if p := c.current.Load(); p != nil && p.Contains(nowMs) {
		return *p
	}
	p := Find(c.unit, c.loc, nowMs)
	c.current.Store(&p)
	return p
}

// Tag is the identity of unit u in zone: a positive number below 2^61,
// from the 64-bit FNV-1a hash of the unit's word and the zone's name. It
// is the same in every process, so a counter's identity does not depend
// on which process stored it.
func Tag(u Unit, zone string) int64 {
	h := uint64(14695981039346656037)
	for _, s := range [...]string{u.String(), "/", zone} {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
	}
	return int64(h>>3) | 1
}
