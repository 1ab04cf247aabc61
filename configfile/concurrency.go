package configfile

import (
	"time"

	"gopkg.in/yaml.v3"

	"github.com/limiter-dev/limiter/ratelimits"
)

// readConcurrencyLimit reads a concurrency limit's count (slots, 1 to
// ratelimits.MaxLeaseCount) and period (a lease's time to live, 1s to
// 24h), both required, and validates them with
// ratelimits.NewConcurrencyLimit. A penalty is refused: an acquire that
// finds no free slot says when one frees, and boxing the id would only
// hide that. okFields says the limit's other fields passed; the limit is
// built only when they did.
func (s scope) readConcurrencyLimit(key *yaml.Node, fs map[string]field, okFields bool) (ratelimits.Limit, bool) {
	count, okCount := s.positiveInt(key, fs, "count")
	if okCount && count > ratelimits.MaxLeaseCount {
		s.add(fs["count"].val.Line, "a concurrency limit's count must be from 1 to %d, got %d", ratelimits.MaxLeaseCount, count)
		okCount = false
	}
	period, okPeriod := s.leasePeriod(key, fs)
	okPenalty := true
	if f, has := fs["penalty"]; has {
		s.add(f.key.Line, "penalty is not a field of a concurrency limit: %s, and a denied acquire already says when a slot frees (remove penalty)", limitShape(ratelimits.Concurrency))
		okPenalty = false
	}
	if !okFields || !okCount || !okPeriod || !okPenalty {
		return ratelimits.Limit{}, false
	}
	lim, err := ratelimits.NewConcurrencyLimit(count, period)
	if err != nil {
		s.add(key.Line, "%v", err)
		return ratelimits.Limit{}, false
	}
	return lim, true
}

// leasePeriod reads a concurrency limit's period: a duration of whole
// milliseconds from ratelimits.MinLeasePeriod to ratelimits.MaxLeasePeriod.
func (s scope) leasePeriod(key *yaml.Node, fs map[string]field) (time.Duration, bool) {
	return s.boundedPeriod(key, fs, periodBounds{time.Millisecond, "milliseconds", ratelimits.MinLeasePeriod, ratelimits.MaxLeasePeriod,
		"a concurrency limit's period (a lease's time to live)", "1s to 24h"})
}
