// Package syncpush is what a sync carries between the local layer
// (source/local), which counts hits in process memory for limits whose
// sync_rate is not 0, and a shared source (Redis) that adds up every
// process's hits: the pushes, and the interfaces a source offers to take
// them. The domain knows none of it: the layer and the source settle it.
package syncpush

import (
	"context"

	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// WindowSyncer is what a shared source offers the local layer of window
// limits whose sync_rate is above 0.
type WindowSyncer interface {
	// SyncWindows adds each push's hits to the stored counter of its key
	// (atomically: hits pushed by any number of processes add up), then
	// fills each push's Total with the stored counter as it is at now
	// (unix ns), after the add. Pushes with no hits only read.
	//
	// A source may split a sync into several calls (Redis: one per hash
	// slot, a few hundred counters each), some of which can fail while
	// others take effect. It therefore sets each push's Applied when its
	// hits were certainly added, and clears it otherwise, also when the
	// sync fails as a whole: the caller pushes again only the pushes not
	// Applied. Returning nil means every push was applied. A failed sync
	// that certainly changed nothing wraps ErrNotApplied. A push not
	// Applied may still have taken effect (its call timed out after it
	// was sent): pushing it again may count its hits twice, the documented
	// price of the mode, which never loses a hit this way.
	SyncWindows(ctx context.Context, now int64, pushes []Window) error
}

// RateSyncer is what a shared source offers the local layer of
// rate-counter limits, and of the boxes of limits, whose sync_rate is
// above 0.
type RateSyncer interface {
	// SyncRates adds each push's hits, second by second, to the stored
	// counter of its Key (hits of seconds it no longer keeps are dropped),
	// and stores its box entry as the later of the stored expiry and
	// BoxExpires; then it fills Total and TotalBox with what is stored.
	// Applied and failures are as for WindowSyncer.SyncWindows.
	SyncRates(ctx context.Context, now int64, pushes []Rate) error
}

// BoxLog is what a shared source offers so that a box entry made in one
// process reaches the others, also those that never counted its id: the
// entries that RateSyncer.SyncRates stored, for each limit, in the order
// they were stored.
type BoxLog interface {
	// ReadBoxLog returns at most limit entries of the box log of the limit
	// name ("<enum>:", the start of its box entries' keys) stored after
	// cursor ("" for the oldest kept), and the cursor after them (cursor
	// itself when there are none). A log keeps its latest entries only:
	// a reader that falls far behind misses the oldest.
	ReadBoxLog(ctx context.Context, name, cursor string, limit int) ([]BoxEntry, string, error)
}

// BoxEntry is one entry of a box log: a box entry's key and the expiry
// (unix ns) a push stored for it.
type BoxEntry struct {
	Box     string
	Expires int64
}

// Rate is one rate counter's part in a sync, or one box entry's, or both
// (a rate-counter limit's counter and box entry of one id).
type Rate struct {
	Key  string              // the counter's key, "" for a box entry alone
	Hits ratecounter.Counter // counted since the last successful push
	// Box is the box entry's key, "" for none; BoxExpires an expiry (unix
	// ns) set since the last push, 0 to only read.
	Box        string
	BoxExpires int64
	// Total and TotalBox are what is stored after the push (TotalBox 0
	// when the id is not boxed), meaningful only when Applied is set.
	Total    ratecounter.Counter
	TotalBox int64
	Applied  bool
}

// Window is one window counter's part in a sync: the hits counted since
// the last successful push and, after the call, the totals the source
// holds.
type Window struct {
	Key    string
	Period int64 // the limit's window, in ms
	Start  int64 // unix ms when the window Hits counts began
	Hits   int64
	// PrevHits are hits of the window before, still worth adding: a
	// sliding window weighs them until Start+Period.
	PrevHits int64
	// Total is the stored counter after the add, as window.Counter.At
	// reads it at now, meaningful only when Applied is set.
	Total   window.Counter
	Applied bool
}
