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

// Absurdly long limits saturate instead of wrapping into the past.
func TestSpendSaturates(t *testing.T) {
	ei := int64(math.MaxInt64 / 2)
	got := Spend(now, now+ei, ei, ei, 1)
	if got.Allowed || got.NewTAT < now {
		t.Fatalf("got %+v, want denied without wrap-around", got)
	}
}

func TestSpendBatch(t *testing.T) {
	op := func(key string, cost int64, mode Mode) Op {
		return Op{Key: key, EmissionInterval: ei10, BurstOffset: bo10, Cost: cost, Mode: mode}
	}
	tests := []struct {
		name        string
		ops         []Op
		tats        []int64
		wantAllowed bool
		wantWrite   []bool
	}{
		{"all allowed: spends are written, check-only is not",
			[]Op{op("a", 1, CheckAndSpend), op("b", 1, CheckOnly), op("c", 1, SpendOnly)},
			[]int64{Missing, Missing, Missing}, true, []bool{true, false, true}},
		{"a counting denial denies the batch and writes nothing",
			[]Op{op("a", 1, CheckAndSpend), op("b", 1, CheckOnly)},
			[]int64{Missing, now + bo10}, false, []bool{false, false}},
		{"a denied spend-only neither denies the batch nor is written",
			[]Op{op("a", 1, CheckAndSpend), op("b", 1, SpendOnly)},
			[]int64{Missing, now + bo10}, true, []bool{true, false}},
		{"a cost-0 spend has nothing to write",
			[]Op{op("a", 0, CheckAndSpend)},
			[]int64{now + second}, true, []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := make([]Outcome, len(tt.ops))
			if got := SpendBatch(now, tt.ops, tt.tats, out); got != tt.wantAllowed {
				t.Fatalf("batch allowed = %v, want %v", got, tt.wantAllowed)
			}
			for i, o := range out {
				if o.Write != tt.wantWrite[i] {
					t.Errorf("op %d write = %v, want %v (%+v)", i, o.Write, tt.wantWrite[i], o)
				}
			}
		})
	}
}

func TestRefundBatchCheckOnlyRefundsNothing(t *testing.T) {
	ops := []Op{
		{Key: "a", EmissionInterval: ei10, BurstOffset: bo10, Cost: 2, Mode: CheckAndSpend},
		{Key: "b", EmissionInterval: ei10, BurstOffset: bo10, Cost: 2, Mode: CheckOnly},
	}
	out := make([]Outcome, 2)
	RefundBatch(now, ops, []int64{now + 5*second, now + 5*second}, out)
	if !out[0].Write || out[0].NewTAT != now+3*second {
		t.Errorf("check-and-spend refund: %+v, want written at now+3s", out[0])
	}
	if out[1].Write || out[1].Allowed || out[1].Remaining != 5 {
		t.Errorf("check-only refund: %+v, want nothing given back, 5 remaining", out[1])
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{CheckAndSpend: "check-and-spend", CheckOnly: "check-only", SpendOnly: "spend-only", 9: "unknown"} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", m, got, want)
		}
	}
}

func TestNoAllocations(t *testing.T) {
	ops := []Op{{Key: "a", EmissionInterval: ei10, BurstOffset: bo10, Cost: 1}}
	tats := []int64{Missing}
	out := make([]Outcome, 1)
	allocs := testing.AllocsPerRun(100, func() {
		Spend(now, Missing, ei10, bo10, 1)
		Refund(now, now+second, ei10, bo10, 1)
		SpendBatch(now, ops, tats, out)
		RefundBatch(now, ops, tats, out)
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

func BenchmarkSpendBatchOf3(b *testing.B) {
	ops := []Op{
		{Key: "a", EmissionInterval: ei10, BurstOffset: bo10, Cost: 1},
		{Key: "b", EmissionInterval: ei10, BurstOffset: bo10, Cost: 1, Mode: CheckOnly},
		{Key: "c", EmissionInterval: ei10, BurstOffset: bo10, Cost: 1, Mode: SpendOnly},
	}
	tats := []int64{Missing, now, now + second}
	out := make([]Outcome, 3)
	b.ReportAllocs()
	for b.Loop() {
		SpendBatch(now, ops, tats, out)
	}
}
