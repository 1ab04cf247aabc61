package configfile

import (
	"math"

	"gopkg.in/yaml.v3"

	"github.com/limiter-dev/limiter/ratelimits"
)

// withPenalty adds the optional penalty of a GCRA or window limit to lim
// (read when ok): a Go duration from ratelimits.MinPenalty to
// ratelimits.MaxPenalty, exact. Without the field lim is returned as is.
// The penalty is checked also when the rest of the limit has problems.
func (s scope) withPenalty(key *yaml.Node, fs map[string]field, lim ratelimits.Limit, ok bool) (ratelimits.Limit, bool) {
	f, has := fs["penalty"]
	if !has {
		return lim, true
	}
	d, okValue := s.durationValue(f.val, "penalty")
	if !okValue {
		return lim, false
	}
	if d < ratelimits.MinPenalty || d > ratelimits.MaxPenalty {
		s.add(f.val.Line, "penalty must be from 1s to 24h, got %s", d)
		return lim, false
	}
	if !ok {
		return lim, true
	}
	boxed, err := lim.WithPenalty(d)
	if err != nil {
		s.add(key.Line, "%v", err)
		return lim, false
	}
	return boxed, true
}

// capacity reads a defaults entry's optional capacity: how many entries
// each of the limit's rate counters and its penalty box hold in process
// memory, an integer > 0 (0 returned when absent: the default). It belongs
// to limits with a box, a rate-counter limit or one with a penalty (known
// from the fields: the penalty's own problems are reported apart).
func (s scope) capacity(fs map[string]field, alg ratelimits.Algorithm) (int, bool) {
	f, has := fs["capacity"]
	if !has {
		return 0, true
	}
	if _, penalty := fs["penalty"]; alg != ratelimits.RateCounter && !penalty {
		s.add(f.key.Line, "capacity applies to limits with a penalty box (algorithm rate-counter, or a penalty), and this %s limit has none: remove capacity, or give the limit a penalty", alg)
		return 0, false
	}
	return s.capacityValue(f.val)
}

// capacityValue reads a capacity's value: an integer > 0 that fits an int.
func (s scope) capacityValue(n *yaml.Node) (int, bool) {
	v, ok := s.positiveValue(n, "capacity")
	if !ok {
		return 0, false
	}
	if v > math.MaxInt {
		s.add(n.Line, "capacity %d is out of range: it must be at most %d", v, math.MaxInt)
		return 0, false
	}
	return int(v), true
}
