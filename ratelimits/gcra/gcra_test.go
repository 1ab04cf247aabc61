package gcra

import (
	"math"
	"testing"
	"time"
)

const (
	now    int64 = 1_790_000_000_000_000_000
	second       = int64(time.Second)
	ms           = int64(time.Millisecond)
)

// A bucket of 10 refilling one token per second: EI 1s, BO 10s.
const (
	ei10 = second
	bo10 = 10 * second
)

func TestSpend(t *testing.T) {
	tests := []struct {
		name string
		tat  int64
		cost int64
		want Decision
	}{
		{"a fresh bucket pays one token",
			Missing, 1, Decision{Allowed: true, Remaining: 9, ResetIn: second, NewTAT: now + second}},
		{"a TAT in the past is a full bucket",
			now - 5*second, 1, Decision{Allowed: true, Remaining: 9, ResetIn: second, NewTAT: now + second}},
		{"emptying the bucket leaves nothing and a retry of one token",
			now + second, 9, Decision{Allowed: true, Remaining: 0, RetryIn: 9 * second, ResetIn: 10 * second, NewTAT: now + 10*second}},
		{"an empty bucket denies one more, with the TAT unchanged",
			now + 10*second, 1, Decision{Allowed: false, Remaining: 0, RetryIn: second, ResetIn: 10 * second, NewTAT: now + 10*second}},
		{"diff == 0 is allowed",
			now + 9*second, 1, Decision{Allowed: true, Remaining: 0, RetryIn: second, ResetIn: 10 * second, NewTAT: now + 10*second}},
		{"cost 0 reads a full bucket",
			Missing, 0, Decision{Allowed: true, Remaining: 10, NewTAT: now}},
		{"cost 0 reads a partly spent bucket",
			now + 3*second, 0, Decision{Allowed: true, Remaining: 7, ResetIn: 3 * second, NewTAT: now + 3*second}},
		{"a denial reports what is left when less than cost is",
			now + 5*second, 7, Decision{Allowed: false, Remaining: 5, RetryIn: 2 * second, ResetIn: 5 * second, NewTAT: now + 5*second}},
		{"cost 0 is denied only when the TAT is more than BO ahead (limit lowered)",
			now + 11*second, 0, Decision{Allowed: false, Remaining: 0, RetryIn: second, ResetIn: 11 * second, NewTAT: now + 11*second}},
		{"cost equal to burst on a full bucket",
			Missing, 10, Decision{Allowed: true, Remaining: 0, RetryIn: 10 * second, ResetIn: 10 * second, NewTAT: now + 10*second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Spend(now, tt.tat, ei10, bo10, tt.cost); got != tt.want {
				t.Errorf("Spend(tat=%d, cost=%d)\n got %+v\nwant %+v", tt.tat-now, tt.cost, got, tt.want)
			}
		})
	}
}

// Emission intervals are truncated: three per second is 333333333ns, so a
// full bucket of three refills in 999999999ns, not a second.
func TestSpendTruncatedEmissionInterval(t *testing.T) {
	ei := second / 3
	got := Spend(now, Missing, ei, 3*ei, 3)
	want := Decision{Allowed: true, Remaining: 0, RetryIn: 999_999_999, ResetIn: 999_999_999, NewTAT: now + 999_999_999}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// One nanosecond before the first token is back: denied, retry in 1ns.
	got = Spend(now+ei-1, now+3*ei, ei, 3*ei, 1)
	if got.Allowed || got.RetryIn != 1 {
		t.Fatalf("1ns early: got %+v, want denied with retry 1ns", got)
	}
	if got = Spend(now+ei, now+3*ei, ei, 3*ei, 1); !got.Allowed {
		t.Fatalf("on time: got %+v, want allowed", got)
	}
}

func TestRefund(t *testing.T) {
	tests := []struct {
		name string
		tat  int64
		cost int64
		want Decision
	}{
		{"a missing bucket gives nothing back and stays missing",
			Missing, 3, Decision{Allowed: false, Remaining: 10, NewTAT: now}},
		{"a bucket that refilled in the past gives nothing back",
			now - 1, 3, Decision{Allowed: false, Remaining: 10, NewTAT: now}},
		{"a partial refund moves the TAT back by cost intervals",
			now + 5*second, 1, Decision{Allowed: true, Remaining: 6, ResetIn: 4 * second, NewTAT: now + 4*second}},
		{"a refund never makes a bucket more than full",
			now + 2*second, 5, Decision{Allowed: true, Remaining: 10, NewTAT: now}},
		{"cost 0 gives nothing back",
			now + 2*second, 0, Decision{Allowed: false, Remaining: 8, ResetIn: 2 * second, NewTAT: now + 2*second}},
		{"a bucket whose TAT is now is full: nothing to give",
			now, 1, Decision{Allowed: false, Remaining: 10, NewTAT: now}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Refund(now, tt.tat, ei10, bo10, tt.cost); got != tt.want {
				t.Errorf("Refund(tat=%d, cost=%d)\n got %+v\nwant %+v", tt.tat-now, tt.cost, got, tt.want)
			}
		})
	}
}

// Absurdly long limits are denied instead of wrapping into the past.
func TestSpendSaturates(t *testing.T) {
	ei := int64(math.MaxInt64 / 2)
	got := Spend(now, now+ei, ei, ei, 1)
	if got.Allowed || got.NewTAT < now {
		t.Fatalf("got %+v, want denied without wrap-around", got)
	}
}

// Where t + increment would pass the largest int64 (a limit of
// centuries), a spend is denied: the bucket could not hold its new TAT,
// and a TAT clamped short of it would let the next spends through. Below
// that, the decision is the exact one: the waits are the true ones.
func TestSpendPastTheLargestTAT(t *testing.T) {
	const hour = int64(time.Hour)
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC).UnixNano()
	// One token every 1,000,000 hours (about 114 years): the second spend
	// waits that long, to the nanosecond.
	ei := 1_000_000 * hour
	first := Spend(now, Missing, ei, ei, 1)
	if !first.Allowed || first.NewTAT != now+ei || first.ResetIn != ei {
		t.Fatalf("first spend: %+v", first)
	}
	second := Spend(now, first.NewTAT, ei, ei, 1)
	if second.Allowed || second.RetryIn != ei || second.ResetIn != ei {
		t.Fatalf("second spend: %+v, want denied for %d ns", second, ei)
	}
	// One every 2,000,000 hours (about 228 years): the second spend would
	// need a TAT past the largest int64, now and later: denied for good.
	ei = 2_000_000 * hour
	first = Spend(now, Missing, ei, ei, 1)
	if second := Spend(now, first.NewTAT, ei, ei, 1); second.Allowed || second.RetryIn != math.MaxInt64-now {
		t.Fatalf("second spend of 228 years: %+v, want denied until the end of int64 time", second)
	}
	// Two tokens of 1,250,000 hours: the whole bucket at once would need a
	// TAT past the largest int64, and is denied; one token is allowed,
	// and the next one (past the largest int64 too) is not.
	ei = 1_250_000 * hour
	if whole := Spend(now, Missing, ei, 2*ei, 2); whole.Allowed || whole.RetryIn != math.MaxInt64-now {
		t.Fatalf("a spend of the whole bucket: %+v, want denied until the end of int64 time", whole)
	} else if again := Spend(now+whole.RetryIn/2, Missing, ei, 2*ei, 2); again.Allowed {
		t.Fatalf("the same spend later: %+v, want denied still", again)
	}
	one := Spend(now, Missing, ei, 2*ei, 1)
	if !one.Allowed || one.NewTAT != now+ei {
		t.Fatalf("a spend of one token: %+v, want allowed", one)
	}
	if again := Spend(now, one.NewTAT, ei, 2*ei, 1); again.Allowed {
		t.Fatalf("a second token: %+v, want denied", again)
	}
	// A burst of 250 tokens of a year each: never more than 250 spends.
	year := int64(365 * 24 * time.Hour)
	tat, allowed := Missing, 0
	for range 1000 {
		if d := Spend(now, tat, year, 250*year, 1); d.Allowed {
			allowed++
			tat = d.NewTAT
		}
	}
	if allowed > 250 {
		t.Fatalf("%d spends allowed by a burst of 250", allowed)
	}
}

// A TAT more than the largest int64 of nanoseconds after now (written in
// 2026, read on a clock set back to 1700, as the fake clock may be) is an
// empty bucket: a spend is denied, a refund gives back from the TAT, and no
// figure wraps around into a bucket fuller than its burst.
func TestCenturiesBehindTheTAT(t *testing.T) {
	tat := time.Date(2026, 11, 22, 0, 1, 0, 0, time.UTC).UnixNano()
	at := time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, cost := range []int64{0, 1, 10} {
		d := Spend(at, tat, ei10, bo10, cost)
		if d.Allowed || d.NewTAT != tat || d.Remaining != 0 || d.RetryIn <= 0 || d.ResetIn <= 0 {
			t.Errorf("Spend of %d: %+v, want denied, nothing remaining, the TAT kept", cost, d)
		}
	}
	d := Refund(at, tat, ei10, bo10, 3)
	if !d.Allowed || d.NewTAT != tat-3*ei10 || d.Remaining != 0 || d.ResetIn <= 0 {
		t.Errorf("Refund: %+v, want the TAT moved back 3s, nothing remaining", d)
	}
	// Within the range, the same TAT read from 1735 is decided exactly.
	at = time.Date(1735, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	if d := Spend(at, tat, ei10, bo10, 1); d.Allowed || d.RetryIn != tat-at-bo10+ei10 || d.ResetIn != tat-at {
		t.Errorf("Spend from 1735: %+v", d)
	}
}

// With a burst offset of the largest int64 (a period of 292 years), a TAT
// further ahead of now than that is still read exactly: a cost-0 spend,
// which the saturated difference leaves at diff 0, is denied, and a
// refund of the whole burst moves the TAT back by it rather than to now.
func TestBeyondTheLargestBurstOffset(t *testing.T) {
	at := time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	first := Spend(at, Missing, math.MaxInt64, math.MaxInt64, 1)
	if !first.Allowed {
		t.Fatalf("the first spend: %+v", first)
	}
	at = time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	if d := Spend(at, first.NewTAT, math.MaxInt64, math.MaxInt64, 0); d.Allowed || d.Remaining != 0 || d.NewTAT != first.NewTAT {
		t.Errorf("a cost-0 spend: %+v, want denied", d)
	}
	if d := Refund(at, first.NewTAT, math.MaxInt64, math.MaxInt64, 1); !d.Allowed || d.NewTAT != first.NewTAT-math.MaxInt64 || d.Remaining != 0 ||
		d.ResetIn != first.NewTAT-math.MaxInt64-at {
		t.Errorf("a refund: %+v, want the TAT moved back by the burst offset, %d", d, first.NewTAT-math.MaxInt64)
	}
}

func TestNoAllocations(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		Spend(now, Missing, ei10, bo10, 1)
		Refund(now, now+second, ei10, bo10, 1)
	})
	if allocs != 0 {
		t.Fatalf("GCRA math allocated %v times per run, want 0", allocs)
	}
}

func BenchmarkSpend(b *testing.B) {
	b.ReportAllocs()
	tat := now
	for b.Loop() {
		d := Spend(now, tat, ei10, bo10, 1)
		tat = d.NewTAT - bo10
	}
}
