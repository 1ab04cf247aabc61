package client_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/client"
)

// TopDenied lists the ids denied most, of one limit or of all, over
// either window the service keeps; another window is refused unsent.
func TestTopDenied(t *testing.T) {
	ctx := context.Background()
	s := newServer(t, serverOptions{})
	c := newClient(t, s, client.Options{})
	// Logins allows 3 at once: 5 spends of alice are 2 denials, 4 of bob 1.
	for id, n := range map[string]int{"alice": 5, "bob": 4} {
		for range n {
			if _, err := c.Spend(ctx, client.Transaction{Limit: "Logins", ID: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := client.TopDenied{Limit: "Logins", Window: 5 * time.Minute, IDs: []client.DeniedID{
		{ID: "alice", Denied: 2}, {ID: "bob", Denied: 1},
	}}
	for _, w := range []time.Duration{0, 5 * time.Minute} {
		if got, err := c.TopDenied(ctx, "Logins", w); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("TopDenied(Logins, %v) = %+v, %v; want %+v", w, got, err, want)
		}
	}
	got, err := c.TopDenied(ctx, "", time.Hour)
	if err != nil || got.Limit != "" || got.Window != time.Hour || len(got.IDs) != 2 || got.IDs[0] != (client.DeniedID{Limit: "Logins", ID: "alice", Denied: 2}) {
		t.Errorf("TopDenied of every limit over 1h = %+v, %v; want alice of Logins first, twice denied", got, err)
	}
	if _, err := c.TopDenied(ctx, "Logins", time.Minute); !errors.Is(err, client.ErrTopWindow) {
		t.Errorf("a 1m window: %v, want ErrTopWindow", err)
	}
	if _, err := c.TopDenied(ctx, "Nope", 0); !client.IsCode(err, client.CodeUnknownLimit) {
		t.Errorf("an unknown limit: %v, want unknown_limit", err)
	}
}

// Boxes pages through a penalty box: every boxed id once, with when it
// leaves on the service's clock.
func TestBoxes(t *testing.T) {
	ctx := context.Background()
	s := newServer(t, serverOptions{})
	c := newClient(t, s, client.Options{})
	// Lockout allows 2 at once and boxes for 10m the id a spend denies:
	// more ids than one page holds.
	const boxed = 130
	for i := range boxed {
		for range 3 {
			if _, err := c.Spend(ctx, client.Transaction{Limit: "Lockout", ID: fmt.Sprint("user-", i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.clock.Add(time.Minute)
	seen := map[string]int{}
	pages := 0
	for cursor := ""; ; {
		page, err := c.Boxes(ctx, "Lockout", cursor)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if page.Limit != "Lockout" || page.Local {
			t.Fatalf("page %d: limit %q, local %v", pages, page.Limit, page.Local)
		}
		for _, e := range page.Entries {
			seen[e.ID]++
			if !e.ExpiresAt.Equal(start.Add(10*time.Minute)) || e.ExpiresIn != 9*time.Minute {
				t.Errorf("%s leaves at %v, in %v; want %v, in 9m", e.ID, e.ExpiresAt, e.ExpiresIn, start.Add(10*time.Minute))
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != boxed || pages < 2 {
		t.Errorf("%d ids listed in %d pages, want %d in more than one", len(seen), pages, boxed)
	}
	if _, err := c.Boxes(ctx, "Logins", ""); !client.IsCode(err, client.CodeInvalidArgument) {
		t.Errorf("a limit without a box: %v, want invalid_argument", err)
	}
	if _, err := c.Boxes(ctx, "Lockout", "not-a-cursor"); !client.IsCode(err, client.CodeInvalidArgument) {
		t.Errorf("a cursor the listing did not give: %v, want invalid_argument", err)
	}
}

// ReloadStatus reads the last attempt and the load in use.
func TestReloadStatus(t *testing.T) {
	s := newServer(t, serverOptions{reload: func() error { return nil }})
	c := newClient(t, s, client.Options{})
	got, err := c.ReloadStatus(context.Background())
	want := client.ReloadStatus{
		LastAttempt: client.ReloadAttempt{At: time.Date(2026, 11, 22, 0, 5, 0, 0, time.UTC), Trigger: "SIGHUP", Problems: []string{"overrides.yaml:3: no such limit"}},
		InUse: client.ReloadAttempt{At: start, Trigger: "startup", OK: true, Files: []client.ReloadFile{
			{File: "defaults", Path: "defaults.yaml", Entries: "9"},
			{File: "overrides", Path: "overrides.yaml", Entries: "2"},
		}},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ReloadStatus = %+v, %v; want %+v", got, err, want)
	}
}
