package configfile

import (
	"errors"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/calendar"
)

// readCalendarLimit reads a calendar limit's count, period (a word of the
// calendar) and timezone (an IANA name, UTC when absent), and validates
// them with ratelimits.NewCalendarLimit.
func (s scope) readCalendarLimit(key *yaml.Node, fs map[string]field) (ratelimits.Limit, bool) {
	count, okCount := s.calendarCount(key, fs)
	unit, okUnit := s.calendarUnit(key, fs)
	cal, okZone := s.timezone(fs, unit, okUnit)
	if !okCount || !okUnit || !okZone {
		return ratelimits.Limit{}, false
	}
	lim, err := ratelimits.NewCalendarLimit(count, cal)
	if err != nil {
		s.add(key.Line, "%v", err)
		return ratelimits.Limit{}, false
	}
	return lim, true
}

// readCalendarOverride reads an override of a calendar limit: its count
// alone. The period and timezone belong to the name (an override takes
// its default's, ratelimits.NewConfig), and so does the penalty box.
func (s scope) readCalendarOverride(key *yaml.Node, fs map[string]field) (ratelimits.Limit, bool) {
	ok := true
	for _, name := range []string{"period", "penalty"} {
		if f, has := fs[name]; has {
			s.add(f.key.Line, "an override of a calendar limit gives count only: %s belongs to the limit name, so it is set in the defaults file (remove %s)", name, name)
			ok = false
		}
	}
	okFields := s.refuseForeignFields(fs, ratelimits.Calendar)
	count, okCount := s.calendarCount(key, fs)
	if !ok || !okFields || !okCount {
		return ratelimits.Limit{}, false
	}
	lim, err := ratelimits.NewCalendarLimit(count, nil)
	if err != nil {
		s.add(key.Line, "%v", err)
		return ratelimits.Limit{}, false
	}
	return lim, true
}

// calendarCount reads a calendar limit's count: an integer from 1 to
// 2^53 − 1.
func (s scope) calendarCount(key *yaml.Node, fs map[string]field) (int64, bool) {
	count, ok := s.positiveInt(key, fs, "count")
	if ok && count > calendar.MaxCount {
		s.add(fs["count"].val.Line, "count must be at most 2^53 − 1 (%d) on a calendar limit, got %d", int64(calendar.MaxCount), count)
		return 0, false
	}
	return count, ok
}

// calendarUnit reads a calendar limit's period: one of the four words. A
// duration is refused with the words, since it is a window's period.
func (s scope) calendarUnit(key *yaml.Node, fs map[string]field) (calendar.Unit, bool) {
	f, has := fs["period"]
	if !has {
		s.add(key.Line, "missing period: a calendar limit counts per %s", calendar.Units)
		return 0, false
	}
	if !isString(f.val) {
		s.add(f.val.Line, "a calendar limit's period must be %s, got %s", calendar.Units, describe(f.val))
		return 0, false
	}
	u, ok := calendar.ParseUnit(f.val.Value)
	if ok {
		return u, true
	}
	if _, err := time.ParseDuration(f.val.Value); err == nil {
		s.add(f.val.Line, "a calendar limit's period must be %s, got the duration %s: a period of fixed length is a window's (algorithm fixed-window)", calendar.Units, quoteShort(f.val.Value))
	} else {
		s.add(f.val.Line, "a calendar limit's period must be %s, got %s", calendar.Units, quoteShort(f.val.Value))
	}
	return 0, false
}

// timezone reads a calendar limit's timezone, an IANA zone name (UTC when
// absent), and returns the calendar of unit in it (nil when !okUnit). An
// unknown name is reported at its line.
func (s scope) timezone(fs map[string]field, unit calendar.Unit, okUnit bool) (*calendar.Calendar, bool) {
	zone := ""
	line := 0
	if f, has := fs["timezone"]; has {
		if !isString(f.val) || f.val.Value == "" {
			s.add(f.val.Line, "timezone must be an IANA zone name such as Europe/Paris or UTC, got %s", describe(f.val))
			return nil, false
		}
		zone, line = f.val.Value, f.val.Line
	}
	if !okUnit {
		// Checked with any unit, so that its problem is reported too.
		unit = calendar.Day
	}
	cal, err := calendar.New(unit, zone)
	switch {
	case errors.Is(err, calendar.ErrUnknownZone):
		s.add(line, "unknown timezone %s: want an IANA zone name such as Europe/Paris, America/New_York or UTC", quoteShort(zone))
		return nil, false
	case err != nil:
		s.add(line, "%v", err)
		return nil, false
	}
	return cal, okUnit
}
