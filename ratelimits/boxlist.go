package ratelimits

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MaxBoxPage is the most entries one page of a box listing holds, so that
// an answer, and the time a source holds a lock or a connection for it,
// stay small whatever the box holds.
const MaxBoxPage = 100

// BoxEntry is an id in a penalty box and when it leaves it (unix ns).
type BoxEntry struct {
	ID      string
	Expires int64
}

// BoxPage is one page of a box listing: at most the entries asked for, and
// the cursor of the next page ("" when the listing is complete). A page
// may hold fewer entries than asked for, even none, and still have a
// next: a source bounds the work of one page as well as its size.
type BoxPage struct {
	Entries []BoxEntry
	Next    string
}

// BoxLister is what a Source offers, besides the Source interface, to list
// a penalty box: the entries of the box of the limit whose key prefix is
// enum ("<enum>:" without its colon) that are in the box at now.
//
// cursor is "" for a first page, or a Next from the same source. A cursor
// is opaque to callers and must survive what happens between pages:
// every entry in the box from a listing's first page to its last is
// listed at least once; one listed twice, or added or removed meanwhile,
// may appear or not. A cursor a source cannot read wraps
// ErrInvalidCursor. It is an interface of its own, not a method of
// Source, since a listing is an operator's view, not part of a decision:
// a source that cannot list still decides.
type BoxLister interface {
	ListBox(ctx context.Context, now int64, enum, cursor string, max int) (BoxPage, error)
}

// LocalBoxLister is what a Source that keeps the boxes of limits whose
// sync_rate is not 0 in this process's memory (the local layer in front of
// a shared source) offers besides BoxLister: it lists the entries this
// process holds for the limit at syncRate, and never waits on I/O.
type LocalBoxLister interface {
	ListLocalBox(now int64, enum string, syncRate time.Duration, cursor string, max int) (BoxPage, error)
}

// ErrInvalidCursor refuses a cursor its source did not make: malformed,
// or made by another kind of source. It wraps ErrInvalidArgument, so
// callers answer it as a client error.
var ErrInvalidCursor = fmt.Errorf("%w: the cursor is not one this listing gave", ErrInvalidArgument)

// ErrNoBoxListing is the error of a listing from a source that does not
// implement BoxLister.
var ErrNoBoxListing = errors.New("this source cannot list penalty boxes")

// BoxListing is a page of a limit's box as Limiter.ListBox answers it.
type BoxListing struct {
	BoxPage
	// Now is the time the page was listed at (unix ns), from which each
	// entry's time left is counted.
	Now int64
	// Local says the entries came from this process's memory (a limit
	// whose sync_rate is not 0 on a shared source), so another process
	// may list others.
	Local bool
}

// ListBox lists a page of at most max (1 to MaxBoxPage) entries of the
// penalty box of the limit named limit, from cursor ("" for the first
// page). A limit whose sync_rate is not 0 on a source that counts such
// limits in this process's memory (LocalBoxLister) keeps its box there,
// and the listing comes from there; any other from the source. Errors wrap ErrUnknownLimit, ErrNoBox or
// ErrInvalidArgument (ErrInvalidCursor among them) for the caller's
// mistakes, ErrNoBoxListing, or ErrSourceUnavailable.
func (l *Limiter) ListBox(ctx context.Context, limit, cursor string, max int) (BoxListing, error) {
	if max < 1 || max > MaxBoxPage {
		return BoxListing{}, fmt.Errorf("%w: a page of %d entries, want 1 to %d", ErrInvalidArgument, max, MaxBoxPage)
	}
	cfg := l.config.Load()
	info, ok := cfg.Lookup(limit)
	if !ok {
		return BoxListing{}, fmt.Errorf("%w %q", ErrUnknownLimit, limit)
	}
	if !cfg.HasBox(info.Name) {
		return BoxListing{}, fmt.Errorf("%w: %s has neither algorithm rate-counter nor a penalty", ErrNoBox, limit)
	}
	enum := strings.TrimSuffix(info.BucketKey(""), ":")
	cursor, ok = sourceCursor(enum, cursor)
	if !ok {
		return BoxListing{}, ErrInvalidCursor
	}
	now := l.now()
	if local, ok := l.source.(LocalBoxLister); ok {
		if sync := cfg.SyncRate(info.Name); sync != 0 {
			page, err := local.ListLocalBox(now, enum, sync, cursor, max)
			page.Next = limitCursor(enum, page.Next)
			return BoxListing{BoxPage: page, Now: now, Local: true}, err
		}
	}
	lister, ok := l.source.(BoxLister)
	if !ok {
		return BoxListing{}, ErrNoBoxListing
	}
	page, err := lister.ListBox(ctx, now, enum, cursor, max)
	if err != nil {
		if errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrNoBoxListing) {
			return BoxListing{}, err
		}
		return BoxListing{}, sourceFailure(err)
	}
	page.Next = limitCursor(enum, page.Next)
	return BoxListing{BoxPage: page, Now: now}, nil
}

// A cursor ListBox answers is the source's behind the enum of the limit
// listed and a dot, so that the cursor of one limit's listing, given with
// another limit, is refused (ErrInvalidCursor): a source's cursor is a
// position that means something in any box of that source, and read in
// another box it would go on from there, leaving out entries.

// limitCursor is the cursor ListBox answers for a source's next.
func limitCursor(enum, next string) string {
	if next == "" {
		return ""
	}
	return enum + "." + next
}

// sourceCursor is the source's cursor in a cursor given to ListBox for the
// limit of enum; ok is false when it is not one limitCursor made for it.
func sourceCursor(enum, cursor string) (string, bool) {
	if cursor == "" {
		return "", true
	}
	rest, ok := strings.CutPrefix(cursor, enum+".")
	return rest, ok && rest != ""
}
