package topdenied

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// memStore is a Store in memory: what each process last pushed.
type memStore struct {
	pushed map[string][]byte
	fail   bool
}

func (m *memStore) PushTop(_ context.Context, process string, payload []byte, _ time.Duration) error {
	m.pushed[process] = payload
	return nil
}

func (m *memStore) PullTops(context.Context) ([][]byte, error) {
	if m.fail {
		return nil, errors.New("connection refused")
	}
	var out [][]byte
	for _, p := range m.pushed {
		out = append(out, p)
	}
	return out, nil
}

func TestFleet(t *testing.T) {
	store := &memStore{pushed: map[string][]byte{}}
	ra, clk := newFake()
	rb := New(clk)
	fa, fb := NewFleet(ra, store, "a", time.Minute), NewFleet(rb, store, "b", time.Minute)
	for range 5 {
		ra.Denied("L", "x")
	}
	rb.Denied("L", "x")
	rb.Denied("M", "y")
	for _, f := range []*Fleet{fa, fb} {
		if err := f.Push(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ra.Denied("L", "x") // counted by a after its push: a sees it, b not yet
	store.pushed["junk"] = []byte("{not json")
	tests := []struct {
		f     *Fleet
		limit string
		w     Window
		want  string
	}{
		{fa, "L", Window5m, "[{L x 7 0}]"},
		{fb, "L", Window5m, "[{L x 6 0}]"},
		{fa, "", Window1h, "[{L x 7 0} {M y 1 0}]"},
	}
	for _, tt := range tests {
		got, err := tt.f.Top(context.Background(), tt.limit, tt.w)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != tt.want {
			t.Errorf("%s Top(%q, %v) = %v, want %s", tt.f.process, tt.limit, tt.w, got, tt.want)
		}
	}
	store.fail = true
	if _, err := fa.Top(context.Background(), "L", Window5m); err == nil {
		t.Error("a store that fails: no error")
	}
}

// Another process's push is read no larger than this one would push.
func TestFleetBoundsWhatItReads(t *testing.T) {
	store := &memStore{pushed: map[string][]byte{}}
	r, _ := newFake()
	var big []byte
	big = append(big, `{"process":"big","windows":{"5m":{"L":{"counters":[`...)
	for i := range 10 * Counters {
		if i > 0 {
			big = append(big, ',')
		}
		big = fmt.Appendf(big, `{"id":"%d","count":%d,"error":0}`, i, 10*Counters-i)
	}
	big = append(big, `],"floor":0,"total":1}}}}`...)
	store.pushed["big"] = big
	got, err := NewFleet(r, store, "a", time.Minute).Top(context.Background(), "L", Window5m)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxList {
		t.Fatalf("%d listed, want %d", len(got), MaxList)
	}
}
