package local

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
)

// scanPerEntry bounds the positions one page looks at, per entry asked
// for, as the memory source's listing does: a table lock is held briefly.
const scanPerEntry = 4

// cursorPrefix starts every cursor of the local layer's listings.
const cursorPrefix = "l1."

// ListBox lists, for Front's ListLocalBox, the box entries this
// process holds for the limit (what it decides with: its own boxings and,
// above 0, the expiries the cycles read back for ids it holds), listed
// from the end of the limit's box table toward its start, a page under
// the table's lock at a time. The cursor is a position, which stays valid
// while entries come and go (boundedtable.Expiry.Page says why).
func (l *Layer) ListBox(now int64, enum string, syncRate time.Duration, cursor string, max int) (ratelimits.BoxPage, error) {
	before := math.MaxInt
	if cursor != "" {
		n, err := strconv.ParseUint(strings.TrimPrefix(cursor, cursorPrefix), 10, 31)
		if !strings.HasPrefix(cursor, cursorPrefix) || err != nil || n == 0 {
			return ratelimits.BoxPage{}, ratelimits.ErrInvalidCursor
		}
		before = int(n)
	}
	if syncRate <= 0 {
		syncRate = -1
	}
	g := (*l.groups.Load())[syncRate]
	if g == nil {
		return ratelimits.BoxPage{}, nil
	}
	t := (*g.tables.Load())[enum+":"]
	if t == nil {
		return ratelimits.BoxPage{}, nil
	}
	var page ratelimits.BoxPage
	t.mu.Lock()
	next := t.boxes.Page(before, now, max, max*scanPerEntry, func(p int) {
		b := *t.boxes.At(p)
		page.Entries = append(page.Entries, ratelimits.BoxEntry{ID: strings.TrimPrefix(b.key, enum+":"), Expires: b.expires()})
	})
	t.mu.Unlock()
	if next > 0 {
		page.Next = cursorPrefix + strconv.Itoa(next)
	}
	return page, nil
}

// ListLocalBox implements ratelimits.LocalBoxLister with the layer's own
// box entries (Layer.ListBox).
func (f *Front) ListLocalBox(now int64, enum string, syncRate time.Duration, cursor string, max int) (ratelimits.BoxPage, error) {
	return f.layer.ListBox(now, enum, syncRate, cursor, max)
}

// ListBox implements ratelimits.BoxLister with the source behind the
// layer, for the limits it does not count, bounded by SourceTimeout as
// every call to that source is: a store that hangs answers an operator's
// listing with an error in time, not a wait.
func (f *Front) ListBox(ctx context.Context, now int64, enum, cursor string, max int) (ratelimits.BoxPage, error) {
	lister, ok := f.inner.(ratelimits.BoxLister)
	if !ok {
		return ratelimits.BoxPage{}, ratelimits.ErrNoBoxListing
	}
	ctx, cancel := f.innerContext(ctx)
	defer cancel()
	return lister.ListBox(ctx, now, enum, cursor, max)
}
