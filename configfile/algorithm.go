package configfile

import (
	"math"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/calendar"
)

// algorithms lists what the algorithm field accepts, for messages.
const algorithms = "gcra, sliding-window, fixed-window, rate-counter, calendar or concurrency"

// origin is where a name's algorithm was set: the defaults entry's
// algorithm field (or its key, when the entry has none and is GCRA), or
// the first override of a built-in name without a default.
type origin struct {
	alg  ratelimits.Algorithm
	file string
	line int
}

// algorithm reads a defaults entry's algorithm; without the field the
// limit is GCRA. line is where the algorithm was set.
func (s scope) algorithm(key *yaml.Node, fs map[string]field) (alg ratelimits.Algorithm, line int, ok bool) {
	f, has := fs["algorithm"]
	if !has {
		return ratelimits.GCRA, key.Line, true
	}
	n := f.val
	if !isString(n) {
		s.add(n.Line, "algorithm must be %s, got %s", algorithms, describe(n))
		return 0, 0, false
	}
	switch alg, err := ratelimits.ParseAlgorithm(n.Value); {
	case err != nil || n.Value == "":
		s.add(n.Line, "unknown algorithm %s: want %s", quoteShort(n.Value), algorithms)
	default:
		return alg, n.Line, true
	}
	return 0, 0, false
}

// readLimit reads a limit of algorithm alg and validates it: burst, count
// and period with ratelimits.NewLimit for GCRA, count and period with
// ratelimits.NewWindowLimit for a window, window, rate and penalty with
// ratelimits.NewRateCounterLimit for a rate counter; a GCRA or window limit
// may add a penalty (Limit.WithPenalty). The fields of other algorithms are
// refused. key is the limit's name node, where missing fields and rules
// that tie fields together are reported.
func (s scope) readLimit(key *yaml.Node, fs map[string]field, alg ratelimits.Algorithm) (ratelimits.Limit, bool) {
	okFields := s.refuseForeignFields(fs, alg)
	var lim ratelimits.Limit
	var ok bool
	switch {
	case alg == ratelimits.Concurrency:
		return s.readConcurrencyLimit(key, fs, okFields)
	case alg == ratelimits.RateCounter:
		return s.readRateCounterLimit(key, fs, okFields)
	case alg == ratelimits.Calendar:
		lim, ok = s.readCalendarLimit(key, fs)
	case alg.Windowed():
		lim, ok = s.readWindowLimit(key, fs, alg)
	default:
		lim, ok = s.readGCRALimit(key, fs)
	}
	lim, okPenalty := s.withPenalty(key, fs, lim, ok)
	return lim, ok && okPenalty && okFields
}

// fieldAlgorithms says which algorithms each limit field belongs to.
var fieldAlgorithms = []struct {
	name    string
	belongs func(ratelimits.Algorithm) bool
}{
	{"burst", func(a ratelimits.Algorithm) bool { return a == ratelimits.GCRA }},
	{"count", notRateCounter},
	{"period", notRateCounter},
	{"window", isRateCounter},
	{"rate", isRateCounter},
	{"timezone", isCalendar},
}

func isCalendar(a ratelimits.Algorithm) bool { return a == ratelimits.Calendar }

func isRateCounter(a ratelimits.Algorithm) bool  { return a == ratelimits.RateCounter }
func notRateCounter(a ratelimits.Algorithm) bool { return a != ratelimits.RateCounter }

// limitShape says what a limit of algorithm a is made of.
func limitShape(a ratelimits.Algorithm) string {
	switch {
	case a == ratelimits.Concurrency:
		return "a concurrency limit has count (slots) and period (a lease's time to live)"
	case a == ratelimits.RateCounter:
		return "a rate-counter limit allows rate hits per second over its window"
	case a == ratelimits.Calendar:
		return "a calendar limit allows count hits per day, week, month or year of its timezone"
	case a.Windowed():
		return "a window allows count hits per period"
	}
	return "a gcra limit has burst, count and period"
}

// refuseForeignFields reports each field given that belongs to other
// algorithms than alg: a burst on a window, a count on a rate counter, a
// rate on a GCRA limit.
func (s scope) refuseForeignFields(fs map[string]field, alg ratelimits.Algorithm) bool {
	ok := true
	for _, fa := range fieldAlgorithms {
		f, has := fs[fa.name]
		if !has || fa.belongs(alg) {
			continue
		}
		s.add(f.key.Line, "%s is not a field of a %s limit: %s (remove %s)", fa.name, alg, limitShape(alg), fa.name)
		ok = false
	}
	return ok
}

// readWindowLimit reads a window limit's count and period and validates
// them with ratelimits.NewWindowLimit.
func (s scope) readWindowLimit(key *yaml.Node, fs map[string]field, alg ratelimits.Algorithm) (ratelimits.Limit, bool) {
	count, okCount := s.positiveInt(key, fs, "count")
	period, okPeriod := s.windowPeriod(key, fs)
	if !okCount || !okPeriod {
		return ratelimits.Limit{}, false
	}
	lim, err := ratelimits.NewWindowLimit(alg, count, period)
	if err != nil {
		s.add(key.Line, "%v", err)
		return ratelimits.Limit{}, false
	}
	return lim, true
}

// checkFields checks what a limit's fields must be whatever its algorithm,
// for a limit whose algorithm is not known (its defaults entry's algorithm
// has problems): each field given is checked on its own (burst and count
// integers > 0, period a duration > 0, window, rate and penalty within the
// widest range any algorithm allows). Which fields are missing depends on
// the algorithm, so it is not reported.
func (s scope) checkFields(fs map[string]field) {
	for _, name := range []string{"burst", "count"} {
		if f, has := fs[name]; has {
			s.positiveValue(f.val, name)
		}
	}
	if f, has := fs["period"]; has {
		if _, word := calendar.ParseUnit(f.val.Value); !word || !isString(f.val) {
			s.periodValue(f.val)
		}
	}
	if f, has := fs["window"]; has {
		s.rateWindowValue(f.val)
	}
	if f, has := fs["rate"]; has {
		s.rateValue(f.val)
	}
	if f, has := fs["penalty"]; has {
		if d, ok := s.durationValue(f.val, "penalty"); ok && (d < ratelimits.MinPenalty || d > ratelimits.MaxPenalty) {
			s.add(f.val.Line, "penalty must be from 1s to 24h (1m to 1h on a rate-counter limit), got %s", d)
		}
	}
}

// windowPeriod reads a window limit's period: a duration of whole seconds
// from ratelimits.MinWindowPeriod to ratelimits.MaxWindowPeriod.
func (s scope) windowPeriod(key *yaml.Node, fs map[string]field) (time.Duration, bool) {
	return s.boundedPeriod(key, fs, periodBounds{time.Second, "seconds", ratelimits.MinWindowPeriod, ratelimits.MaxWindowPeriod,
		"a window's period", "1s to 8784h"})
}

// periodBounds is what a limit's period must be: a whole number of unit
// (named units) from min to max (written span); what names it in messages.
type periodBounds struct {
	unit     time.Duration
	units    string
	min, max time.Duration
	what     string
	span     string
}

// boundedPeriod reads a period field held to b.
func (s scope) boundedPeriod(key *yaml.Node, fs map[string]field, b periodBounds) (time.Duration, bool) {
	d, ok := s.period(key, fs)
	if !ok {
		return 0, false
	}
	line := fs["period"].val.Line
	switch {
	case d%b.unit != 0:
		s.add(line, "%s must be a whole number of %s, got %s", b.what, b.units, d)
		return 0, false
	case d < b.min || d > b.max:
		s.add(line, "%s must be from %s, got %s", b.what, b.span, d)
		return 0, false
	}
	return d, true
}

// maxSyncRateSeconds is the largest sync_rate, either sign, that a
// time.Duration holds.
const maxSyncRateSeconds = math.MaxInt64 / int64(time.Second)

// syncRate reads a defaults entry's sync_rate, a number of seconds: below
// 0 the limit counts in each process alone, 0 (the default) on the source,
// 0.001 or more in each process, synced with the source that often. It
// belongs to window and rate-counter limits only: a GCRA decision is made
// on the source.
func (s scope) syncRate(fs map[string]field, alg ratelimits.Algorithm) (time.Duration, bool) {
	f, has := fs["sync_rate"]
	if !has {
		return 0, true
	}
	n := f.val
	if !alg.Windowed() && alg != ratelimits.RateCounter {
		s.add(f.key.Line, "sync_rate applies to window and rate-counter limits (sliding-window, fixed-window, rate-counter), not to %s: remove it, or give the limit one of those algorithms", alg)
		return 0, false
	}
	var v float64
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") || n.Decode(&v) != nil {
		s.add(n.Line, "sync_rate must be a number of seconds (such as -1, 0 or 0.5), got %s", describe(n))
		return 0, false
	}
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > float64(maxSyncRateSeconds):
		s.add(n.Line, "sync_rate %s is out of range: it must be a number of seconds from -%d to %d", n.Value, maxSyncRateSeconds, maxSyncRateSeconds)
		return 0, false
	case v > 0 && v < ratelimits.MinSyncRate.Seconds():
		s.add(n.Line, "sync_rate %s is between 0 and 0.001: use a negative number (count in each process alone), 0 (count on the source, exactly) or 0.001 or more (sync every that many seconds)", n.Value)
		return 0, false
	}
	d := time.Duration(math.Round(v * float64(time.Second)))
	if v < 0 && d == 0 {
		d = -1 // below a nanosecond, still negative: local counting
	}
	return d, true
}
