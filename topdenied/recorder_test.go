package topdenied

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jmhodges/clock"
)

func newFake() (*Recorder, clock.FakeClock) {
	clk := clock.NewFake()
	clk.Set(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	return New(clk), clk
}

func top(t *testing.T, r *Recorder, limit string, w Window) []Entry {
	t.Helper()
	got, err := r.Top(context.Background(), limit, w)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestParseWindow(t *testing.T) {
	tests := []struct {
		in      string
		want    Window
		ok      bool
		seconds int
	}{
		{"5m", Window5m, true, 300},
		{"1h", Window1h, true, 3600},
		{"", 0, false, 0},
		{"5M", 0, false, 0},
		{"300s", 0, false, 0},
		{"60m", 0, false, 0},
	}
	for _, tt := range tests {
		w, ok := ParseWindow(tt.in)
		if ok != tt.ok || (ok && (w != tt.want || w.Seconds() != tt.seconds || w.String() != tt.in)) {
			t.Errorf("ParseWindow(%q) = %v, %v", tt.in, w, ok)
		}
	}
}

// The windows slide by whole buckets on the service's clock.
func TestWindowsSlide(t *testing.T) {
	tests := []struct {
		name    string
		after   time.Duration // from the denials to the read
		want5m  uint64
		want1h  uint64
		listed1 bool
	}{
		{"at once", 0, 3, 3, true},
		{"4 minutes on", 4 * time.Minute, 3, 3, true},
		{"6 minutes on: out of 5m", 6 * time.Minute, 0, 3, true},
		{"59 minutes on", 59 * time.Minute, 0, 3, true},
		{"65 minutes on: out of 1h", 65 * time.Minute, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, clk := newFake()
			for range 3 {
				r.Denied("L", "alice")
			}
			clk.Add(tt.after)
			for w, want := range map[Window]uint64{Window5m: tt.want5m, Window1h: tt.want1h} {
				got := top(t, r, "L", w)
				if want == 0 {
					if len(got) != 0 {
						t.Errorf("%v: %v, want none", w, got)
					}
					continue
				}
				if len(got) != 1 || got[0] != (Entry{"L", "alice", want, 0}) {
					t.Errorf("%v: %v, want alice %d", w, got, want)
				}
			}
		})
	}
}

func TestTopOrderAndLimits(t *testing.T) {
	r, _ := newFake()
	for i, id := range []string{"a", "b", "b", "c", "c", "c"} {
		r.Denied("L1", id)
		if i%2 == 0 {
			r.Denied("L2", "x")
		}
	}
	tests := []struct {
		limit string
		want  string
	}{
		{"L1", "[{L1 c 3 0} {L1 b 2 0} {L1 a 1 0}]"},
		{"L2", "[{L2 x 3 0}]"},
		{"", "[{L1 c 3 0} {L2 x 3 0} {L1 b 2 0} {L1 a 1 0}]"},
		{"Nobody", "[]"},
	}
	for _, tt := range tests {
		if got := fmt.Sprint(top(t, r, tt.limit, Window5m)); got != tt.want && !(tt.want == "[]" && got == "[]") {
			t.Errorf("Top(%q) = %s, want %s", tt.limit, got, tt.want)
		}
	}
}

// A million distinct ids, spread over a window's buckets, leave the
// sketches at their bound.
func TestMemoryBounded(t *testing.T) {
	r, clk := newFake()
	buf := make([]byte, 0, 24)
	n := 1_000_000
	if raceEnabled {
		n = 200_000
	}
	for i := range n {
		if i%(n/5) == 0 {
			clk.Add(time.Minute)
		}
		buf = strconv.AppendInt(append(buf[:0], "id-"...), int64(i), 10)
		r.Denied("L", string(buf))
	}
	if n, bound := r.Size(), MaxSizePerLimit(); n > bound || n == 0 {
		t.Fatalf("%d ids held after a million distinct denials, want at most %d", n, bound)
	}
	if got := top(t, r, "L", Window5m); len(got) != MaxList {
		t.Fatalf("%d listed, want %d", len(got), MaxList)
	}
}

// Counting a denial of an id already tracked allocates nothing.
func TestDeniedTrackedAllocatesNothing(t *testing.T) {
	r, _ := newFake()
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = "198.51.100." + strconv.Itoa(i)
		r.Denied("L", ids[i])
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() { r.Denied("L", ids[i%len(ids)]); i++ }); n != 0 {
		t.Fatalf("%v allocations per denial of a tracked id, want 0", n)
	}
}

// Denials of many distinct ids, each taking the counter of the least
// denied, allocate nothing either once the sketches' buffers hold ids of
// their length: the hot path of a flood of distinct ids.
func TestDeniedUntrackedAllocatesNothing(t *testing.T) {
	r, _ := newFake()
	ids := make([]string, 20_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("over-%05d", i)
	}
	for _, id := range ids[:5000] {
		r.Denied("L", id)
	}
	i := 0
	if n := testing.AllocsPerRun(5000, func() { r.Denied("L", ids[5000+i%15000]); i++ }); n != 0 {
		t.Fatalf("%v allocations per denial of an untracked id, want 0", n)
	}
}

// An id with 1% of a limit's denials is listed, however many others
// come near it or pass once.
func TestOnePercentListed(t *testing.T) {
	r, clk := newFake()
	want := map[string]bool{}
	for round := range 3 {
		for i := range 90 {
			id := "hot-" + strconv.Itoa(i)
			want[id] = true
			for range 100 {
				r.Denied("L", id)
			}
		}
		for i := range 1000 {
			r.Denied("L", "tail-"+strconv.Itoa(round)+"-"+strconv.Itoa(i))
		}
		clk.Add(time.Minute)
	}
	got := top(t, r, "L", Window5m)
	for _, e := range got {
		delete(want, e.ID)
	}
	if len(want) > 0 {
		t.Fatalf("ids with over 1%% of the denials not listed: %v", want)
	}
}

func TestConcurrentUse(t *testing.T) {
	r, clk := newFake()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				r.Denied("L"+strconv.Itoa(g%2), strconv.Itoa(i%300))
				if i%500 == 0 {
					clk.Add(time.Second)
					_ = r.View(Window1h)
				}
			}
		}()
	}
	wg.Wait()
	var sum uint64
	for _, e := range top(t, r, "", Window5m) {
		if e.Error == 0 {
			sum += e.Denied
		}
	}
	if r.Size() == 0 || sum == 0 {
		t.Fatalf("nothing counted: size %d", r.Size())
	}
}

// A limit with no denial for longer than the longest window is forgotten.
func TestStaleLimitForgotten(t *testing.T) {
	r, clk := newFake()
	r.Denied("Gone", "a")
	clk.Add(2 * time.Hour)
	_ = r.View(Window5m)
	if r.Size() != 0 {
		t.Fatalf("size %d after two idle hours, want 0", r.Size())
	}
}

func BenchmarkDeniedTracked(b *testing.B) {
	r := New(clock.New())
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = "203.0.113." + strconv.Itoa(i)
		r.Denied("L", ids[i])
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r.Denied("L", ids[i%len(ids)])
			i++
		}
	})
}

// Denials of 10,000 ids, ten times the counters a shard's sketch holds:
// most replace a counter, the half-denied harness rows' case.
func BenchmarkDeniedUntracked(b *testing.B) {
	r := New(clock.New())
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = "over-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r.Denied("L", ids[(i*7919)%len(ids)])
			i++
		}
	})
}

// Denials before 1970 (a fake clock can be there) are counted like any
// others: a bucket of time before 0 is a slot of the ring too.
func TestDeniedBefore1970(t *testing.T) {
	r, clk := newFake()
	clk.Set(time.Date(1960, 1, 1, 0, 7, 13, 0, time.UTC))
	for range 2 {
		r.Denied("L", "alice")
	}
	if got := top(t, r, "L", Window5m); len(got) != 1 || got[0] != (Entry{"L", "alice", 2, 0}) {
		t.Fatalf("%v, want alice 2", got)
	}
}
