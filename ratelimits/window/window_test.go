package window

import (
	"math/rand/v2"
	"testing"
)

const minute = 60_000

// t0 is a unix ms on a whole minute (and on every shorter whole-second
// period), so offsets below read as positions in the window.
const t0 = 1_800_000_000_000

var (
	tenPerMinute   = Limit{Count: 10, Period: minute}
	threePerTenSec = Limit{Count: 3, Period: 10_000, Fixed: true}
)

// counterAt is a counter whose current window starts at start.
func counterAt(period, start, cur, prev int64) Counter {
	return Counter{Period: period, Start: start, Cur: cur, Prev: prev}
}

func TestSpendNarrative(t *testing.T) {
	tests := []struct {
		name  string
		now   int64
		l     Limit
		cost  int64
		c     Counter
		want  Decision
		wantC Counter
	}{
		{
			name: "an empty sliding window takes 8 of 10 at :15; the same 8 fit again once the weight of those 8 falls to 2 (at 1:45)",
			now:  t0 + 15_000, l: tenPerMinute, cost: 8,
			want: Decision{Allowed: true, Remaining: 2, RetryIn: 90_000, ResetIn: 105_000},
		},
		{
			name: "at 1:00 the 8 weigh fully: 2 left, and a third of them are gone by 1:20",
			now:  t0 + minute, l: tenPerMinute, cost: 3, c: counterAt(minute, t0, 8, 0),
			want: Decision{Allowed: false, Remaining: 2, RetryIn: 7_500, ResetIn: 60_000},
		},
		{
			name: "one ms before the window ends the previous window still weighs",
			now:  t0 + 2*minute - 1, l: tenPerMinute, cost: 10, c: counterAt(minute, t0+minute, 0, 10),
			want: Decision{Allowed: false, Remaining: 9, RetryIn: 1, ResetIn: 1},
		},
		{
			name: "one ms after it ends the old hits no longer count",
			now:  t0 + 2*minute + 1, l: tenPerMinute, cost: 10, c: counterAt(minute, t0+minute, 0, 10),
			want: Decision{Allowed: true, Remaining: 0, RetryIn: 2*minute - 1, ResetIn: 2*minute - 1},
		},
		{
			name: "a fixed window ignores the previous window",
			now:  t0 + 10_000, l: threePerTenSec, cost: 3, c: counterAt(10_000, t0, 3, 0),
			want: Decision{Allowed: true, Remaining: 0, RetryIn: 10_000, ResetIn: 10_000},
		},
		{
			name: "one ms before a fixed window ends: denied for 1 ms",
			now:  t0 + 9_999, l: threePerTenSec, cost: 1, c: counterAt(10_000, t0, 3, 0),
			want: Decision{Allowed: false, Remaining: 0, RetryIn: 1, ResetIn: 1},
		},
		{
			name: "a cost-0 spend on a full window is allowed and changes nothing",
			now:  t0 + 3_000, l: threePerTenSec, cost: 0, c: counterAt(10_000, t0, 3, 0),
			want: Decision{Allowed: true, Remaining: 0, RetryIn: 0, ResetIn: 7_000},
		},
		{
			name: "hits counted under another period are not read",
			now:  t0 + 1_000, l: tenPerMinute, cost: 10, c: counterAt(30_000, t0, 30, 30),
			want: Decision{Allowed: true, Remaining: 0, RetryIn: 2*minute - 1_000, ResetIn: 2*minute - 1_000},
		},
		{
			name: "windows older than the previous one never count",
			now:  t0 + 2*minute, l: tenPerMinute, cost: 10, c: counterAt(minute, t0, 10, 10),
			want: Decision{Allowed: true, Remaining: 0, RetryIn: 2 * minute, ResetIn: 2 * minute},
		},
		{
			name: "many old hits and a lowered count: denied until the next window, whose weight lets one in at once",
			now:  t0 + 100, l: Limit{Count: 10, Period: 1_000}, cost: 1, c: counterAt(1_000, t0, 5, 5_000),
			want: Decision{Allowed: false, Remaining: 0, RetryIn: 900, ResetIn: 1_900},
		},
		{
			name: "counts far above count (a lowered override) deny without overflow and wait out both windows",
			now:  t0, l: tenPerMinute, cost: 1, c: counterAt(minute, t0, 1<<62, 1<<62),
			want: Decision{Allowed: false, Remaining: 0, RetryIn: 2 * minute, ResetIn: 2 * minute},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Spend(tt.now, tt.l, tt.cost, tt.c)
			got.Counter = Counter{}
			if got != tt.want {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// A process whose clock is behind reads a counter that a process whose
// clock is ahead wrote for the next window: that counter's Prev is its
// window's hits, which count, and which its spends and refunds change,
// leaving the next window's hits where they are.
func TestAClockBehind(t *testing.T) {
	ahead := counterAt(10_000, t0+10_000, 1, 3) // window [10s, 20s): 1 hit; [0s, 10s): 3
	sliding := Limit{Count: 3, Period: 10_000}
	tests := []struct {
		name   string
		l      Limit
		cost   int64
		c      Counter
		refund bool
		want   Decision
	}{
		{
			name: "a fixed window full in the ahead counter's Prev denies until the next window, which holds 1",
			l:    threePerTenSec, cost: 1, c: ahead,
			want: Decision{Allowed: false, Remaining: 0, RetryIn: 1_000, ResetIn: 11_000, Counter: ahead},
		},
		{
			name: "a sliding window likewise; the 3 then weigh on the next window, and 1 more fits two thirds into it",
			l:    sliding, cost: 1, c: ahead,
			want: Decision{Allowed: false, Remaining: 0, RetryIn: 1_000 + 6_667, ResetIn: 21_000, Counter: ahead},
		},
		{
			name: "a spend that fits goes into the ahead counter's Prev, also for a fixed window",
			l:    Limit{Count: 5, Period: 10_000, Fixed: true}, cost: 2, c: ahead,
			want: Decision{Allowed: true, Remaining: 0, RetryIn: 1_000, ResetIn: 11_000, Counter: counterAt(10_000, t0+10_000, 1, 5)},
		},
		{
			name: "a refund gives back from the ahead counter's Prev",
			l:    threePerTenSec, cost: 2, c: ahead, refund: true,
			want: Decision{Allowed: true, Remaining: 2, ResetIn: 11_000, Counter: counterAt(10_000, t0+10_000, 1, 1)},
		},
		{
			name: "a counter two windows ahead (a clock set back) counts nothing now and is replaced, so that this window counts",
			l:    sliding, cost: 3, c: counterAt(10_000, t0+20_000, 2, 2),
			want: Decision{Allowed: true, Remaining: 0, RetryIn: 11_000, ResetIn: 11_000, Counter: counterAt(10_000, t0, 3, 0)},
		},
		{
			name: "a fixed window that rolls keeps the previous window's hits for a clock behind",
			l:    threePerTenSec, cost: 1, c: counterAt(10_000, t0-10_000, 2, 0),
			want: Decision{Allowed: true, Remaining: 2, ResetIn: 1_000, Counter: counterAt(10_000, t0, 1, 2)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := int64(t0 + 9_000)
			got := Spend(now, tt.l, tt.cost, tt.c)
			if tt.refund {
				got = Refund(now, tt.l, tt.cost, tt.c)
			}
			if got != tt.want {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestSpendCounter(t *testing.T) {
	got := Spend(t0+minute+5, tenPerMinute, 2, counterAt(minute, t0, 4, 9))
	if want := counterAt(minute, t0+minute, 2, 4); got.Counter != want {
		t.Fatalf("allowed spend stores %+v, want %+v (the window rolled, the old previous dropped)", got.Counter, want)
	}
	denied := Spend(t0+5, tenPerMinute, 2, counterAt(minute, t0, 9, 0))
	if want := counterAt(minute, t0, 9, 0); denied.Allowed || denied.Counter != want {
		t.Fatalf("denied spend: %+v, want the counter unchanged %+v", denied, want)
	}
}

func TestRefund(t *testing.T) {
	tests := []struct {
		name string
		now  int64
		cost int64
		c    Counter
		want Decision
	}{
		{"gives back to the current window", t0 + 30_000, 3, counterAt(minute, t0, 5, 0),
			Decision{Allowed: true, Remaining: 8, ResetIn: 90_000, Counter: counterAt(minute, t0, 2, 0)}},
		{"never below zero", t0 + 30_000, 9, counterAt(minute, t0, 5, 0),
			Decision{Allowed: true, Remaining: 10, ResetIn: 0, Counter: counterAt(minute, t0, 0, 0)}},
		{"an empty current window gives nothing, and the previous is untouched", t0 + minute + 30_000, 1, counterAt(minute, t0, 6, 0),
			Decision{Allowed: false, Remaining: 7, ResetIn: 30_000, Counter: counterAt(minute, t0+minute, 0, 6)}},
		{"nothing stored", t0, 1, Counter{},
			Decision{Allowed: false, Remaining: 10, Counter: counterAt(minute, t0, 0, 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Refund(tt.now, tenPerMinute, tt.cost, tt.c); got != tt.want {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestExpiresAndBusy(t *testing.T) {
	c := counterAt(minute, t0, 1, 0)
	if got := c.Expires(); got != t0+2*minute {
		t.Fatalf("Expires with current hits = %d, want start + 2 periods", got-t0)
	}
	if got := counterAt(minute, t0, 0, 1).Expires(); got != t0+minute {
		t.Fatalf("Expires with previous hits only = %d, want start + 1 period", got-t0)
	}
	if !Busy(t0+2*minute-1, tenPerMinute, c) || Busy(t0+2*minute, tenPerMinute, c) {
		t.Fatal("a sliding counter must be busy until 2 periods after its start, and not after")
	}
	fixed := Limit{Count: 10, Period: minute, Fixed: true}
	if !Busy(t0+minute-1, fixed, c) || Busy(t0+minute, fixed, c) {
		t.Fatal("a fixed counter must be busy until its window ends, and not after")
	}
}

func TestNegativeTimesAlign(t *testing.T) {
	start, _, _ := Counter{}.At(-1, minute)
	if start != -minute {
		t.Fatalf("the window holding -1 ms starts at %d, want %d", start, -minute)
	}
}

// allowedAt reports whether a spend of cost is allowed at ms, straight
// from the definition of the rate.
func allowedAt(l Limit, c Counter, cost, ms int64) bool {
	start, cur, prev := c.At(ms, l.Period)
	if l.Fixed {
		prev = 0
	}
	r := cur*l.Period + prev*(l.Period-(ms-start))
	return r+cost*l.Period <= l.Count*l.Period
}

// TestRetryInIsTheFirstAllowedMillisecond checks RetryIn and ResetIn
// against a scan, millisecond by millisecond, of random small states.
func TestRetryInIsTheFirstAllowedMillisecond(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for i := range 20000 {
		l := Limit{Count: 1 + rng.Int64N(6), Period: 1_000 * (1 + rng.Int64N(2)), Fixed: rng.IntN(3) == 0}
		if i%2 == 0 {
			// Tiny periods reach every branch: weights that the current
			// window cannot outwait, and counts far above Count (a lowered
			// override, or processes that overshot between syncs).
			l.Period = 1 + rng.Int64N(12)
		}
		now := t0 + rng.Int64N(3*l.Period)
		c := counterAt(l.Period, t0+l.Period*rng.Int64N(3), rng.Int64N(4*l.Count+3), rng.Int64N(4*l.Count+3))
		cost := rng.Int64N(l.Count + 1)
		d := Spend(now, l, cost, c)
		if d.Allowed != allowedAt(l, c, cost, now) {
			t.Fatalf("%+v %+v cost %d at %d: allowed %v disagrees with the definition", l, c, cost, now-t0, d.Allowed)
		}
		after := c
		minD := int64(1)
		if d.Allowed {
			after, minD = d.Counter, 0
		}
		want := minD
		for !allowedAt(l, after, cost, now+want) {
			want++
		}
		if d.Allowed && d.Remaining >= cost {
			want = 0
		}
		if d.RetryIn != want {
			t.Fatalf("%+v %+v cost %d at %d (allowed %v): RetryIn %d, scan says %d", l, c, cost, now-t0, d.Allowed, d.RetryIn, want)
		}
		// ResetIn ends the last busy millisecond: a counter written by a
		// process whose clock is ahead may count nothing now and its hits
		// later.
		reset := int64(0)
		for d := range 5 * l.Period {
			if Busy(now+d, l, after) {
				reset = d + 1
			}
		}
		if d.ResetIn != reset {
			t.Fatalf("%+v %+v cost %d at %d: ResetIn %d, scan says %d", l, c, cost, now-t0, d.ResetIn, reset)
		}
	}
}

func TestNoAllocations(t *testing.T) {
	c := counterAt(minute, t0, 3, 4)
	if n := testing.AllocsPerRun(100, func() {
		Spend(t0+1, tenPerMinute, 1, c)
		Refund(t0+1, tenPerMinute, 1, c)
	}); n != 0 {
		t.Fatalf("window math allocated %v times per run", n)
	}
}

func BenchmarkSpend(b *testing.B) {
	c := counterAt(minute, t0, 3, 4)
	b.ReportAllocs()
	for b.Loop() {
		c = Spend(t0+7, tenPerMinute, 0, c).Counter
	}
}
