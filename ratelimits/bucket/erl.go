package bucket

import (
	"time"

	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// A Call is one of Fastly's Edge Rate Limiting calls, as a source sees it:
// up to two rate counters of one entry, each given hits and perhaps
// checked against a limit, and one penalty box entry, read or changed.
// check_rate is one counter and BoxWhenAbove, check_rates two and
// BoxWhenAbove, ratecounter_increment one counter and BoxNone, a lookup one
// counter with Delta 0, and penaltybox_add, _has and remove a box alone.
// A source applies a whole Call in one atomic step (ApplyCall).
type Call struct {
	// Counters are the rate counters, of distinct keys.
	Counters []CounterCheck
	// Box is the box entry's key ("" with BoxNone); a source keeps box
	// entries apart from counters, so it may equal a counter's key.
	Box    string
	Action BoxAction
	// Until is the expiry (unix ns) BoxWhenAbove and BoxReplace give.
	Until int64
	// BoxCapacity bounds the box's entries in process memory (see
	// Op.Capacity).
	BoxCapacity int
	// BoxSyncRate is the sync_rate of the box's limit (see Op.SyncRate).
	BoxSyncRate time.Duration
}

// CounterCheck is one rate counter's part in a Call.
type CounterCheck struct {
	Key string
	// Delta is how many hits are added to the second holding now.
	Delta int64
	// Limit is checked after the hits are added; a zero Window checks
	// nothing.
	Limit ratecounter.Limit
	// Capacity bounds the counter's entries in process memory (see
	// Op.Capacity).
	Capacity int
	// SyncRate is the counter's limit's sync_rate (see Op.SyncRate).
	SyncRate time.Duration
}

// BoxAction is what a Call does to its box entry.
type BoxAction uint8

const (
	// BoxNone: the call has no box.
	BoxNone BoxAction = iota
	// BoxRead reads the entry and changes nothing.
	BoxRead
	// BoxWhenAbove boxes the entry until Until, when a counter's rate goes
	// above its limit; an expiry already later is kept.
	BoxWhenAbove
	// BoxReplace sets the entry's expiry to Until, later or earlier.
	BoxReplace
	// BoxRemove takes the entry out of the box.
	BoxRemove
	// BoxExtend boxes the entry until Until whatever the counters say; an
	// expiry already later is kept. A call whose counters live elsewhere
	// (another store) ends with it when one of them went above.
	BoxExtend
)

// CallResult is what a Call leaves: each counter after its hits were
// added, whether its rate went above its limit, and the box entry's expiry
// (0 when the entry is not in the box, after the call). Removed says that
// BoxRemove took out an entry that was in the box.
type CallResult struct {
	Counters [2]ratecounter.Counter
	Above    [2]bool
	Expires  int64
	Removed  bool
}

// MaxCallCounters is how many counters one Call may name.
const MaxCallCounters = 2

// ApplyCall applies call at now to the stored counters (len(call.Counters)
// of them, updated in place) and the box entry's stored expiry box (0 when
// none), and fills res. It returns the box entry to store and whether to
// store it: an expiry not after now, 0 after BoxRemove, means delete. A
// counter is to be stored when its Delta is above 0.
func ApplyCall(now int64, call *Call, counters []ratecounter.Counter, box int64, res *CallResult) (newBox int64, writeBox bool) {
	s := ratecounter.Second(now)
	above := false
	for i := range call.Counters {
		cc := &call.Counters[i]
		counters[i].Add(s, cc.Delta)
		res.Counters[i] = counters[i]
		res.Above[i] = cc.Limit.Window > 0 && cc.Limit.Above(counters[i].Window(s, cc.Limit.Window))
		above = above || res.Above[i]
	}
	newBox = box
	switch call.Action {
	case BoxWhenAbove:
		if above {
			newBox = max(box, call.Until)
		}
	case BoxExtend:
		newBox = max(box, call.Until)
	case BoxReplace:
		newBox = call.Until
	case BoxRemove:
		res.Removed = box > now
		newBox = 0
	}
	writeBox = newBox != box
	if newBox > now {
		res.Expires = newBox
	}
	return newBox, writeBox
}
