package memory

import (
	"context"
	"math"
	"strconv"
	"strings"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory/internal/table"
)

// scanPerEntry bounds the positions one page looks at, per entry asked
// for: a box of mostly expired entries (not yet forgotten) ends a page
// early rather than holding its name's lock through all of them.
const scanPerEntry = 4

// cursorPrefix starts every cursor of this source, so that a cursor of
// another source (or none at all) is refused rather than misread.
const cursorPrefix = "m1."

// ListBox implements ratelimits.BoxLister. Entries are listed from the end
// of the name's box table toward its start, a page under the name's lock
// at a time; the cursor is the position the next page starts before,
// which stays valid while entries come and go (table.Boxes.Page).
func (s *Source) ListBox(_ context.Context, now int64, enum, cursor string, max int) (ratelimits.BoxPage, error) {
	before := math.MaxInt
	if cursor != "" {
		n, err := strconv.ParseUint(strings.TrimPrefix(cursor, cursorPrefix), 10, 31)
		if !strings.HasPrefix(cursor, cursorPrefix) || err != nil || n == 0 {
			return ratelimits.BoxPage{}, ratelimits.ErrInvalidCursor
		}
		before = int(n)
	}
	g := s.groups.find(enum)
	if g == nil {
		return ratelimits.BoxPage{}, nil // nothing was ever boxed under this name
	}
	buf := make([]table.BoxEntry, 0, max)
	g.mu.Lock()
	buf, next := g.boxes.Page(before, now, max, max*scanPerEntry, buf)
	g.mu.Unlock()
	page := ratelimits.BoxPage{Entries: make([]ratelimits.BoxEntry, len(buf))}
	for i, e := range buf {
		page.Entries[i] = ratelimits.BoxEntry{ID: strings.TrimPrefix(e.Key, enum+":"), Expires: e.Expires}
	}
	if next > 0 {
		page.Next = cursorPrefix + strconv.Itoa(next)
	}
	return page, nil
}
