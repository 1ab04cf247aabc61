package client

import (
	"encoding/json"
	"fmt"
	"time"
)

// LimitInfo describes one limit name the service knows, as GET /v1/limits
// lists it.
type LimitInfo struct {
	// Limit is the name; Enum its number.
	Limit string
	Enum  int
	// IDKind is the kind of id the name takes ("account", "ip",
	// "ipv6-range", "string", ...), which validates and canonicalises ids.
	IDKind string
	// Declared says the name comes from the defaults file rather than
	// being built in.
	Declared bool
	// Algorithm is how the name counts, its overrides included.
	Algorithm Algorithm
	// HasSyncRate says SyncRate is known: for a window or rate-counter
	// name, its sync_rate (see TransactionDecision.SyncRate).
	HasSyncRate bool
	SyncRate    time.Duration
	// Capacity, for a name with a penalty box, is how many entries each of
	// its counters and its box hold in process memory; 0 otherwise.
	Capacity int
	// Shadow says the name is a shadow limit, which never denies.
	Shadow bool
	// Default is the name's default limit, nil when it has none (it is then
	// unlimited but for the ids that have an override).
	Default *LimitSettings
	// Overrides counts the ids that have their own limit.
	Overrides int
}

// LimitSettings is a limit as the configuration files spell it. Which
// fields are set depends on the algorithm: a GCRA limit's Burst, Count and
// Period; a window limit's Count and Period; a calendar limit's Count,
// CalendarPeriod ("day", "week", "month" or "year") and Timezone; a rate
// counter's Window, Rate and Penalty; and the Penalty of any other limit
// that has one. The others are zero.
type LimitSettings struct {
	Burst          int64
	Count          int64
	Period         time.Duration
	CalendarPeriod string
	Timezone       string
	Window         time.Duration
	Rate           int64
	Penalty        time.Duration
}

type limitsJSON struct {
	Limits []limitJSON `json:"limits"`
}

type limitJSON struct {
	Limit     string        `json:"limit"`
	Enum      int           `json:"enum"`
	IDKind    string        `json:"id_kind"`
	Declared  bool          `json:"declared"`
	Algorithm string        `json:"algorithm"`
	SyncRate  *float64      `json:"sync_rate"`
	Capacity  int           `json:"capacity"`
	Shadow    bool          `json:"shadow"`
	Default   *settingsJSON `json:"default"`
	Overrides int           `json:"overrides"`
}

type settingsJSON struct {
	Burst    int64  `json:"burst"`
	Count    int64  `json:"count"`
	Period   string `json:"period"`
	Window   string `json:"window"`
	Rate     int64  `json:"rate"`
	Timezone string `json:"timezone"`
	Penalty  string `json:"penalty"`
}

// decodeLimits reads the answer of GET /v1/limits.
func decodeLimits(body []byte) ([]LimitInfo, error) {
	var b limitsJSON
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, err
	}
	out := make([]LimitInfo, len(b.Limits))
	for i, l := range b.Limits {
		info := LimitInfo{
			Limit:     l.Limit,
			Enum:      l.Enum,
			IDKind:    l.IDKind,
			Declared:  l.Declared,
			Algorithm: Algorithm(l.Algorithm),
			Capacity:  l.Capacity,
			Shadow:    l.Shadow,
			Overrides: l.Overrides,
		}
		if l.SyncRate != nil {
			info.HasSyncRate, info.SyncRate = true, seconds(*l.SyncRate)
		}
		if l.Default != nil {
			s, err := l.Default.settings()
			if err != nil {
				return nil, fmt.Errorf("limit %q: %w", l.Limit, err)
			}
			info.Default = &s
		}
		out[i] = info
	}
	return out, nil
}

func (j *settingsJSON) settings() (LimitSettings, error) {
	s := LimitSettings{Burst: j.Burst, Count: j.Count, Rate: j.Rate, Timezone: j.Timezone}
	period := j.Period
	if j.Timezone != "" {
		// A calendar limit's period is a word of the calendar.
		s.CalendarPeriod, period = j.Period, ""
	}
	for _, f := range []struct {
		name string
		text string
		into *time.Duration
	}{{"period", period, &s.Period}, {"window", j.Window, &s.Window}, {"penalty", j.Penalty, &s.Penalty}} {
		if f.text == "" {
			continue
		}
		d, err := time.ParseDuration(f.text)
		if err != nil {
			return LimitSettings{}, fmt.Errorf("%s: %w", f.name, err)
		}
		*f.into = d
	}
	return s, nil
}
