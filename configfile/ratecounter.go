package configfile

import (
	"time"

	"gopkg.in/yaml.v3"

	"github.com/limiter-dev/limiter/ratelimits"
)

// readRateCounterLimit reads a rate-counter limit's window, rate and
// penalty, all required, and validates them with
// ratelimits.NewRateCounterLimit. okFields says the limit's other fields
// passed; the limit is built only when they did.
func (s scope) readRateCounterLimit(key *yaml.Node, fs map[string]field, okFields bool) (ratelimits.Limit, bool) {
	window, okWindow := s.requiredField(key, fs, "window", s.rateWindowValue)
	rate, okRate := s.requiredField(key, fs, "rate", s.rateValue)
	penalty, okPenalty := s.requiredField(key, fs, "penalty", s.ttlPenaltyValue)
	if !okFields || !okWindow || !okRate || !okPenalty {
		return ratelimits.Limit{}, false
	}
	lim, err := ratelimits.NewRateCounterLimit(time.Duration(window), rate, time.Duration(penalty))
	if err != nil {
		s.add(key.Line, "%v", err)
		return ratelimits.Limit{}, false
	}
	return lim, true
}

// requiredField reads the required field name with read, reporting it at
// key when it is missing. Durations travel as int64 nanoseconds.
func (s scope) requiredField(key *yaml.Node, fs map[string]field, name string, read func(*yaml.Node) (int64, bool)) (int64, bool) {
	f, ok := fs[name]
	if !ok {
		s.add(key.Line, "missing %s", name)
		return 0, false
	}
	return read(f.val)
}

// rateWindowValue reads a rate-counter window: a Go duration of 1s, 10s or
// 60s, the windows Fastly reads rates over.
func (s scope) rateWindowValue(n *yaml.Node) (int64, bool) {
	if !isString(n) {
		s.add(n.Line, "window must be a duration, 1s, 10s or 60s, got %s", describe(n))
		return 0, false
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		s.add(n.Line, "window %s is not a valid duration: use 1s, 10s or 60s", quoteShort(n.Value))
		return 0, false
	}
	if d != time.Second && d != 10*time.Second && d != time.Minute {
		s.add(n.Line, "window must be 1s, 10s or 60s, got %s", d)
		return 0, false
	}
	return int64(d), true
}

// rateValue reads a rate-counter limit's rate: an integer number of hits
// per second from ratelimits.MinRate to ratelimits.MaxRate.
func (s scope) rateValue(n *yaml.Node) (int64, bool) {
	v, ok := s.int64Value(n, "rate")
	if !ok {
		return 0, false
	}
	if v < ratelimits.MinRate || v > ratelimits.MaxRate {
		s.add(n.Line, "rate must be from %d to %d hits per second, got %d", ratelimits.MinRate, ratelimits.MaxRate, v)
		return 0, false
	}
	return v, true
}

// ttlPenaltyValue reads a rate-counter limit's penalty: a TTL as the ERL
// calls take it, from ratelimits.MinTTL to ratelimits.MaxTTL as given (it
// is rounded to the minute when an id is boxed).
func (s scope) ttlPenaltyValue(n *yaml.Node) (int64, bool) {
	d, ok := s.durationValue(n, "penalty")
	if !ok {
		return 0, false
	}
	if d < ratelimits.MinTTL || d > ratelimits.MaxTTL {
		s.add(n.Line, "a rate-counter limit's penalty must be from 1m to 1h (it is rounded to the nearest minute), got %s", d)
		return 0, false
	}
	return int64(d), true
}

// durationValue reads the value of field name as a Go duration string.
func (s scope) durationValue(n *yaml.Node, name string) (time.Duration, bool) {
	if !isString(n) {
		s.add(n.Line, "%s must be a duration such as 90s, 15m or 1h, got %s", name, describe(n))
		return 0, false
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		s.add(n.Line, "%s %s is not a valid duration: use Go syntax such as 90s, 15m or 1h", name, quoteShort(n.Value))
		return 0, false
	}
	return d, true
}
