package calendar

import "testing"

// A limit of 10 hits per period [start, end), decided 1h before its end.
const (
	tag   int64 = 7
	start int64 = 1_790_000_000_000
	end   int64 = start + 86_400_000
	now   int64 = end - 3_600_000
	left        = end - now
)

var (
	limit10 = Limit{Count: 10, Tag: tag}
	period  = Period{Start: start, End: end}
)

// stored is a counter of this period holding used hits.
func stored(used int64) Counter { return Counter{Tag: tag, Start: start, End: end, Used: used} }

func TestSpend(t *testing.T) {
	tests := []struct {
		name string
		c    Counter
		cost int64
		want Decision
	}{
		{"a fresh counter takes one hit", Counter{}, 1,
			Decision{Allowed: true, Remaining: 9, ResetIn: left, Counter: stored(1)}},
		{"the last hits leave nothing and a retry at the period's end", stored(7), 3,
			Decision{Allowed: true, Remaining: 0, RetryIn: left, ResetIn: left, Counter: stored(10)}},
		{"remaining below cost asks to retry at the end", stored(4), 4,
			Decision{Allowed: true, Remaining: 2, RetryIn: left, ResetIn: left, Counter: stored(8)}},
		{"remaining equal to cost needs no retry", stored(2), 4,
			Decision{Allowed: true, Remaining: 4, ResetIn: left, Counter: stored(6)}},
		{"a full counter denies, unchanged", stored(10), 1,
			Decision{Allowed: false, Remaining: 0, RetryIn: left, ResetIn: left, Counter: stored(10)}},
		{"a denial reports what is left", stored(8), 3,
			Decision{Allowed: false, Remaining: 2, RetryIn: left, ResetIn: left, Counter: stored(8)}},
		{"cost 0 reads", stored(3), 0,
			Decision{Allowed: true, Remaining: 7, ResetIn: left, Counter: stored(3)}},
		{"cost 0 on nothing resets in 0", Counter{}, 0,
			Decision{Allowed: true, Remaining: 10, Counter: stored(0)}},
		{"cost 0 over a lowered count is denied", stored(12), 0,
			Decision{Allowed: false, Remaining: 0, RetryIn: left, ResetIn: left, Counter: stored(12)}},
		{"the previous period counts nothing", Counter{Tag: tag, Start: start - 86_400_000, End: start, Used: 10}, 10,
			Decision{Allowed: true, Remaining: 0, RetryIn: left, ResetIn: left, Counter: stored(10)}},
		{"another calendar's counter counts nothing", Counter{Tag: tag + 1, Start: start, End: end, Used: 10}, 1,
			Decision{Allowed: true, Remaining: 9, ResetIn: left, Counter: stored(1)}},
		{"a cost of the whole count on nothing", Counter{}, 10,
			Decision{Allowed: true, Remaining: 0, RetryIn: left, ResetIn: left, Counter: stored(10)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Spend(now, limit10, period, tt.cost, tt.c); got != tt.want {
				t.Errorf("Spend(cost %d)\n got %+v\nwant %+v", tt.cost, got, tt.want)
			}
		})
	}
}

func TestSpendAtTheLargestCount(t *testing.T) {
	l := Limit{Count: MaxCount, Tag: tag}
	got := Spend(now, l, period, MaxCount, stored(0))
	if !got.Allowed || got.Remaining != 0 || got.Counter.Used != MaxCount {
		t.Errorf("Spend of MaxCount = %+v", got)
	}
	if got := Spend(now, l, period, 1, stored(MaxCount)); got.Allowed {
		t.Errorf("Spend of one more = %+v", got)
	}
}

func TestRefund(t *testing.T) {
	tests := []struct {
		name string
		c    Counter
		cost int64
		want Decision
	}{
		{"gives hits back", stored(5), 2,
			Decision{Allowed: true, Remaining: 7, ResetIn: left, Counter: stored(3)}},
		{"never below 0", stored(2), 5,
			Decision{Allowed: true, Remaining: 10, Counter: stored(0)}},
		{"nothing stored: nothing given back", Counter{}, 1,
			Decision{Allowed: false, Remaining: 10, Counter: stored(0)}},
		{"the previous period is not touched", Counter{Tag: tag, Start: start - 86_400_000, End: start, Used: 4}, 1,
			Decision{Allowed: false, Remaining: 10, Counter: stored(0)}},
		{"cost 0 changes nothing", stored(4), 0,
			Decision{Allowed: false, Remaining: 6, ResetIn: left, Counter: stored(4)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Refund(now, limit10, period, tt.cost, tt.c); got != tt.want {
				t.Errorf("Refund(cost %d)\n got %+v\nwant %+v", tt.cost, got, tt.want)
			}
		})
	}
}

func TestBusy(t *testing.T) {
	if !Busy(limit10, period, stored(1)) {
		t.Error("a counter with hits is not busy")
	}
	for _, c := range []Counter{{}, stored(0), {Tag: tag, Start: start - 1, End: start, Used: 3}} {
		if Busy(limit10, period, c) {
			t.Errorf("%+v is busy", c)
		}
	}
}
