package ratecounter

import (
	"math/rand/v2"
	"testing"
)

// TestBucketsMoveAtTenSecondMarks follows one entry through a minute, as
// Fastly's VCL would read it: hits at 12:01:01 and :02 are in bucket.10s
// until 12:01:10, in bucket.20s until 12:01:20, and so on; the rates slide
// second by second.
func TestBucketsMoveAtTenSecondMarks(t *testing.T) {
	const minute = 1_000_000 * 60 // any whole minute, in seconds
	var c Counter
	c.Add(minute+1, 5)
	c.Add(minute+2, 7)
	for _, tc := range []struct {
		s       int64
		buckets [6]int64 // 10s .. 60s
		hits    [3]int64 // over 1, 10, 60 s
	}{
		{minute + 2, [6]int64{12, 12, 12, 12, 12, 12}, [3]int64{7, 12, 12}},
		{minute + 9, [6]int64{12, 12, 12, 12, 12, 12}, [3]int64{0, 12, 12}},
		{minute + 10, [6]int64{0, 12, 12, 12, 12, 12}, [3]int64{0, 12, 12}},
		{minute + 11, [6]int64{0, 12, 12, 12, 12, 12}, [3]int64{0, 7, 12}},
		{minute + 12, [6]int64{0, 12, 12, 12, 12, 12}, [3]int64{0, 0, 12}},
		{minute + 59, [6]int64{0, 0, 0, 0, 0, 12}, [3]int64{0, 0, 12}},
		{minute + 60, [6]int64{0, 0, 0, 0, 0, 0}, [3]int64{0, 0, 12}},
		{minute + 61, [6]int64{0, 0, 0, 0, 0, 0}, [3]int64{0, 0, 7}},
		{minute + 62, [6]int64{0, 0, 0, 0, 0, 0}, [3]int64{0, 0, 0}},
	} {
		for k := range 6 {
			if got := c.Bucket(tc.s, int64(10*(k+1))); got != tc.buckets[k] {
				t.Errorf("second +%d: bucket.%ds = %d, want %d", tc.s-minute, 10*(k+1), got, tc.buckets[k])
			}
		}
		for k, w := range windows {
			if got := c.Window(tc.s, w); got != tc.hits[k] {
				t.Errorf("second +%d: hits over %ds = %d, want %d", tc.s-minute, w, got, tc.hits[k])
			}
		}
	}
	if c.Empty(minute + 61) {
		t.Error("Empty 59 s after the newest hit")
	}
	if !c.Empty(minute + 62) {
		t.Error("not Empty 60 s after the newest hit")
	}
}

// TestMatchesPlainSums compares a Counter with a map of every hit ever
// added, over random adds, removes and reads, including seconds before
// the window (dropped) and far jumps (which clear it).
func TestMatchesPlainSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var c Counter
	all := map[int64]int64{}
	s := int64(-3) // crosses 0 too
	for range 20_000 {
		switch r := rng.IntN(20); {
		case r == 0:
			s += rng.Int64N(200)
		case r < 10:
			s += rng.Int64N(3)
		}
		at := s - rng.Int64N(70) // sometimes before the window
		switch rng.IntN(3) {
		case 0:
			n := rng.Int64N(1000)
			newest := at >= c.Last
			if n > 0 && at <= c.Last-Seconds {
				// The clock went back a minute or more: afresh.
				clear(all)
				newest = true
			}
			added := c.Add(at, n)
			if newest && added != n {
				t.Fatalf("Add(%d, %d) at the newest second added %d", at, n, added)
			}
			all[at] += added
		case 1:
			all[s] -= c.Remove(s, rng.Int64N(500))
		}
		for _, w := range windows {
			want := int64(0)
			for t := s - w + 1; t <= s; t++ {
				if t > c.Last-Seconds {
					want += all[t]
				}
			}
			if got := c.Window(s, w); got != want {
				t.Fatalf("second %d: hits over %ds = %d, want %d", s, w, got, want)
			}
		}
	}
}

// TestSaturates keeps a second's hits at MaxHitsPerSecond.
// TestClockBackAMinuteStartsAfresh: a hit a minute or more before the
// newest one means the clock went back; the counter starts again from it
// rather than ignoring every hit until the clock catches up. Merge, which
// adds another process's hits, drops such old hits instead.
func TestClockBackAMinuteStartsAfresh(t *testing.T) {
	var c Counter
	c.Add(1000, 5)
	if c.Empty(1000) || !c.Empty(940) {
		t.Fatal("want the counter in use at 1000 and empty a minute before")
	}
	c.Add(941, 3) // 59 s back: counted beside the later hits
	if c.At(941) != 3 || c.At(1000) != 5 {
		t.Fatalf("59 s back: holds %d and %d, want 3 and 5", c.At(941), c.At(1000))
	}
	c.Add(940, 7)
	if c.Last != 940 || c.Window(940, 60) != 7 || c.At(1000) != 0 {
		t.Fatalf("60 s back: %+v, want a fresh counter holding the 7 hits", c)
	}
	var d Counter
	d.Add(1000, 5)
	old := Counter{}
	old.Add(940, 9)
	d.Merge(&old)
	if d.Last != 1000 || d.Window(1000, 60) != 5 {
		t.Fatalf("merging hits a minute old: %+v, want them dropped", d)
	}
}

func TestSaturates(t *testing.T) {
	var c Counter
	c.Add(5, MaxHitsPerSecond-1)
	if got := c.Add(5, 100); got != 1 || c.At(5) != MaxHitsPerSecond {
		t.Fatalf("Add past the most: added %d, holds %d", got, c.At(5))
	}
}

// TestAboveComparesIntegers: 10 per second over 10 s is exactly 100 hits;
// the 101st goes above, with no float in between.
func TestAboveComparesIntegers(t *testing.T) {
	l := Limit{Window: 10, Rate: 10}
	if l.Above(100) || !l.Above(101) {
		t.Fatal("want 100 not above and 101 above 10/s over 10 s")
	}
	big := Limit{Window: 60, Rate: 70_000_000}
	if big.Above(4_200_000_000) || !big.Above(4_200_000_001) {
		t.Fatal("want the largest limit compared exactly")
	}
}

func TestSecondRoundsDown(t *testing.T) {
	for _, tc := range []struct{ ns, s int64 }{{0, 0}, {999_999_999, 0}, {1e9, 1}, {-1, -1}, {-1e9, -1}, {-1e9 - 1, -2}} {
		if got := Second(tc.ns); got != tc.s {
			t.Errorf("Second(%d) = %d, want %d", tc.ns, got, tc.s)
		}
	}
}
