package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// testBoxListing lists a box by pages, for a source that implements
// ratelimits.BoxLister (skipped for one that does not): every entry in
// the box from the first page to the last is listed, with its expiry and
// its id as boxed (ids with braces, tildes and colons, and the empty id,
// included); entries past their expiry and another limit's box entries
// are not; entries come and go between pages; a page never holds more
// than asked for; a cursor the source did not make is refused.
func testBoxListing(t *testing.T, newSource Factory) {
	src := open(t, newSource)
	lister, ok := src.(ratelimits.BoxLister)
	if !ok {
		t.Skip("the source does not list boxes")
	}
	ctx := context.Background()
	now := erlBase + 30*sec
	const enum, other = "4242", "424"
	box := func(id string, action bucket.BoxAction, until int64) {
		t.Helper()
		c := boxCall(enum+":"+id, action, until)
		var res bucket.CallResult
		if err := src.Call(ctx, now, &c, &res); err != nil {
			t.Fatalf("box %q: %v", id, err)
		}
	}
	want := map[string]int64{}
	ids := []string{"", "}x", "~y", "a}b", "c:d", "{e}", "*", "192.0.2.1", "a-long-id-that-is-not-held-inline"}
	for i := range 240 {
		ids = append(ids, fmt.Sprintf("id%03d", i))
	}
	for i, id := range ids {
		exp := now + int64(i+2)*sec
		box(id, bucket.BoxReplace, exp)
		want[id] = exp
	}
	// Another limit's entries, and entries that expire before the listing.
	for i := range 20 {
		c := boxCall(fmt.Sprintf("%s:id%03d", other, i), bucket.BoxReplace, now+60*sec)
		var res bucket.CallResult
		if err := src.Call(ctx, now, &c, &res); err != nil {
			t.Fatal(err)
		}
		box(fmt.Sprintf("gone%d", i), bucket.BoxReplace, now+sec/2)
	}
	now += sec // the "gone" entries are out of the box now

	if _, err := lister.ListBox(ctx, now, enum, "not-a-cursor", 7); !errors.Is(err, ratelimits.ErrInvalidCursor) {
		t.Fatalf("a made-up cursor: %v, want ErrInvalidCursor", err)
	}
	seen := map[string]int64{}
	removed := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 500 {
			t.Fatal("the listing does not end")
		}
		page, err := lister.ListBox(ctx, now, enum, cursor, 7)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		if len(page.Entries) > 7 {
			t.Fatalf("page %d holds %d entries, asked for 7", pages, len(page.Entries))
		}
		for _, e := range page.Entries {
			exp, ok := want[e.ID]
			if !ok {
				t.Fatalf("page %d lists %q, never boxed under this limit (or out of the box)", pages, e.ID)
			}
			if e.Expires != exp {
				t.Fatalf("page %d lists %q until %d, boxed until %d", pages, e.ID, e.Expires, exp)
			}
			seen[e.ID] = e.Expires
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
		// Between pages: some entries leave the box, one is added.
		if pages%3 == 0 {
			id := ids[(pages*37)%len(ids)]
			if !removed[id] {
				box(id, bucket.BoxRemove, 0)
				removed[id] = true
			}
			add := fmt.Sprintf("new%d", pages)
			box(add, bucket.BoxReplace, now+90*sec)
			want[add] = now + 90*sec
		}
	}
	for _, id := range ids {
		if _, ok := seen[id]; !ok && !removed[id] {
			t.Errorf("%q was in the box throughout and never listed", id)
		}
	}
	// A limit nothing was boxed under lists nothing (in pages that may
	// each end at the bound of its work before the listing ends).
	cursor = ""
	for pages := 0; ; pages++ {
		page, err := lister.ListBox(ctx, now, "4343", cursor, 7)
		if err != nil || len(page.Entries) != 0 || pages > 100 {
			t.Fatalf("an empty box, page %d: %+v, %v; want no entries", pages, page, err)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
}
