package vectors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/calendar"
)

// limitJSON is a limit of a vectors file's defaults or overrides, in the
// configuration files' spelling (JSON is YAML).
type limitJSON struct {
	Enum      *int            `json:"enum"`
	ID        string          `json:"id"`
	Algorithm string          `json:"algorithm"`
	Burst     int64           `json:"burst"`
	Count     int64           `json:"count"`
	Period    string          `json:"period"`
	Timezone  string          `json:"timezone"`
	Window    string          `json:"window"`
	Rate      int64           `json:"rate"`
	Penalty   string          `json:"penalty"`
	Capacity  int             `json:"capacity"`
	SyncRate  *float64        `json:"sync_rate"`
	IDs       []overrideIDRef `json:"ids"`
}

type overrideIDRef struct {
	ID      string `json:"id"`
	Comment string `json:"comment"`
}

// Config builds the file's configuration in code, with the ratelimits
// constructors, from the same fields the configuration files have. It is
// the reference the configuration loader is compared with, and lets the
// vectors run at the library level whatever the loader accepts.
func (f *File) Config() (*ratelimits.Config, error) {
	var defaults map[string]limitJSON
	if err := strictJSON(f.Defaults, &defaults); err != nil {
		return nil, fmt.Errorf("vectors: defaults: %w", err)
	}
	var overrides []map[string]limitJSON
	if len(bytes.TrimSpace(f.Overrides)) > 0 {
		if err := strictJSON(f.Overrides, &overrides); err != nil {
			return nil, fmt.Errorf("vectors: overrides: %w", err)
		}
	}
	var declared []ratelimits.NameInfo
	algorithms := map[string]ratelimits.Algorithm{}
	limits := map[string]ratelimits.Limit{}
	for _, name := range slices.Sorted(maps.Keys(defaults)) {
		lj := defaults[name]
		if lj.Enum != nil {
			kind, ok := ratelimits.ParseIDKind(lj.ID)
			if !ok {
				return nil, fmt.Errorf("vectors: %s: id kind %q", name, lj.ID)
			}
			declared = append(declared, ratelimits.NameInfo{Name: ratelimits.Name(*lj.Enum), Limit: name, Kind: kind, Declared: true})
		}
		alg, err := ratelimits.ParseAlgorithm(lj.Algorithm)
		if err != nil {
			return nil, fmt.Errorf("vectors: %s: %w", name, err)
		}
		algorithms[name] = alg
		l, err := lj.limit(alg)
		if err != nil {
			return nil, fmt.Errorf("vectors: %s: %w", name, err)
		}
		if lj.SyncRate != nil {
			l.SyncRate = time.Duration(*lj.SyncRate * float64(time.Second))
		}
		l.Capacity = lj.Capacity
		limits[name] = l
	}
	var ovs []ratelimits.Override
	for _, entry := range overrides {
		for name, lj := range entry {
			alg, ok := algorithms[name]
			if !ok {
				return nil, fmt.Errorf("vectors: override of %s, which has no default here", name)
			}
			l, err := lj.limit(alg)
			if err != nil {
				return nil, fmt.Errorf("vectors: override of %s: %w", name, err)
			}
			for _, id := range lj.IDs {
				ovs = append(ovs, ratelimits.Override{Limit: name, ID: id.ID, Effective: l})
			}
		}
	}
	return ratelimits.NewConfig(declared, limits, ovs)
}

// limit makes the limit lj spells, of algorithm alg.
func (lj limitJSON) limit(alg ratelimits.Algorithm) (ratelimits.Limit, error) {
	dur := func(field, s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", field, err)
		}
		return d, nil
	}
	if alg == ratelimits.RateCounter {
		window, err := dur("window", lj.Window)
		if err != nil {
			return ratelimits.Limit{}, err
		}
		penalty, err := dur("penalty", lj.Penalty)
		if err != nil {
			return ratelimits.Limit{}, err
		}
		return ratelimits.NewRateCounterLimit(window, lj.Rate, penalty)
	}
	if alg == ratelimits.Calendar {
		return lj.calendarLimit()
	}
	period, err := dur("period", lj.Period)
	if err != nil {
		return ratelimits.Limit{}, err
	}
	var l ratelimits.Limit
	if alg.Windowed() {
		l, err = ratelimits.NewWindowLimit(alg, lj.Count, period)
	} else {
		l, err = ratelimits.NewLimit(lj.Burst, lj.Count, period)
	}
	if err != nil || lj.Penalty == "" {
		return l, err
	}
	penalty, err := dur("penalty", lj.Penalty)
	if err != nil {
		return ratelimits.Limit{}, err
	}
	return l.WithPenalty(penalty)
}

// calendarLimit makes the calendar limit lj spells. An override (no
// period) takes its name's calendar in ratelimits.NewConfig.
func (lj limitJSON) calendarLimit() (ratelimits.Limit, error) {
	var cal *calendar.Calendar
	if lj.Period != "" {
		u, ok := calendar.ParseUnit(lj.Period)
		if !ok {
			return ratelimits.Limit{}, fmt.Errorf("period %q: want %s", lj.Period, calendar.Units)
		}
		var err error
		if cal, err = calendar.New(u, lj.Timezone); err != nil {
			return ratelimits.Limit{}, err
		}
	}
	l, err := ratelimits.NewCalendarLimit(lj.Count, cal)
	if err != nil || lj.Penalty == "" {
		return l, err
	}
	penalty, err := time.ParseDuration(lj.Penalty)
	if err != nil {
		return ratelimits.Limit{}, fmt.Errorf("penalty: %w", err)
	}
	return l.WithPenalty(penalty)
}

// strictJSON decodes data into v, refusing fields v does not have.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
