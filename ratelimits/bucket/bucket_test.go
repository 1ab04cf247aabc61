package bucket

import (
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits/calendar"
	"github.com/limiter-dev/limiter/ratelimits/gcra"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

const (
	second = int64(time.Second)
	// now is on a whole minute, so window arithmetic starts at a boundary.
	now  = int64(1_800_000_000) * second
	ei10 = second / 10 // ten per second
	bo10 = 10 * ei10   // burst 10
)

func gcraOp(key string, cost int64, mode Mode) Op {
	return Op{Key: key, EmissionInterval: ei10, BurstOffset: bo10, Cost: cost, Mode: mode}
}

// threePerMinute is a sliding window of 3 hits per minute.
func threePerMinute(key string, cost int64, mode Mode) Op {
	return Op{Key: key, Algorithm: SlidingWindow, Window: window.Limit{Count: 3, Period: 60_000}, Cost: cost, Mode: mode}
}

func TestSpendBatch(t *testing.T) {
	full := State{TAT: now + bo10}
	threeHits := State{Window: window.Counter{Period: 60_000, Start: now / 1e6, Cur: 3}}
	tests := []struct {
		name        string
		ops         []Op
		states      []State
		wantAllowed bool
		wantWrite   []bool
	}{
		{"all allowed: spends are written, check-only is not",
			[]Op{gcraOp("a", 1, CheckAndSpend), gcraOp("b", 1, CheckOnly), gcraOp("c", 1, SpendOnly)},
			[]State{Empty, Empty, Empty}, true, []bool{true, false, true}},
		{"a counting denial denies the batch and writes nothing",
			[]Op{gcraOp("a", 1, CheckAndSpend), gcraOp("b", 1, CheckOnly)},
			[]State{Empty, full}, false, []bool{false, false}},
		{"a denied spend-only neither denies the batch nor is written",
			[]Op{gcraOp("a", 1, CheckAndSpend), gcraOp("b", 1, SpendOnly)},
			[]State{Empty, full}, true, []bool{true, false}},
		{"a cost-0 spend has nothing to write",
			[]Op{gcraOp("a", 0, CheckAndSpend), threePerMinute("w", 0, CheckAndSpend)},
			[]State{{TAT: now + second}, Empty}, true, []bool{false, false}},
		{"mixed algorithms: a full window denies the GCRA spend beside it",
			[]Op{gcraOp("a", 1, CheckAndSpend), threePerMinute("w", 1, CheckAndSpend)},
			[]State{Empty, threeHits}, false, []bool{false, false}},
		{"mixed algorithms: both written when both allow",
			[]Op{gcraOp("a", 1, CheckAndSpend), threePerMinute("w", 1, CheckAndSpend)},
			[]State{Empty, Empty}, true, []bool{true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := make([]Outcome, len(tt.ops))
			if got := SpendBatch(now, tt.ops, tt.states, out); got != tt.wantAllowed {
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

func TestWindowOutcomeIsInNanoseconds(t *testing.T) {
	out := make([]Outcome, 1)
	// 15s into the minute, 3 hits of 3: denied until the next window's
	// weighted rate lets one more in.
	at := now + 15*second
	st := State{Window: window.Counter{Period: 60_000, Start: now / 1e6, Cur: 3}}
	SpendBatch(at, []Op{threePerMinute("w", 1, CheckAndSpend)}, []State{st}, out)
	// Next window: 3·(60000−e) <= 2·60000 needs e >= 20000 ms.
	if want := (45 + 20) * second; out[0].Allowed || out[0].RetryIn != want || out[0].ResetIn != 105*second {
		t.Fatalf("got %+v, want denied, retry %d, reset %d", out[0], want, 105*second)
	}
}

func TestRefundBatchCheckOnlyRefundsNothing(t *testing.T) {
	ops := []Op{gcraOp("a", 2, CheckAndSpend), gcraOp("b", 2, CheckOnly), threePerMinute("w", 2, CheckAndSpend), threePerMinute("x", 2, CheckOnly)}
	hits := State{Window: window.Counter{Period: 60_000, Start: now / 1e6, Cur: 3}}
	out := make([]Outcome, len(ops))
	RefundBatch(now, ops, []State{{TAT: now + 5*ei10}, {TAT: now + 5*ei10}, hits, hits}, out)
	if !out[0].Write || out[0].New.TAT != now+3*ei10 {
		t.Errorf("check-and-spend refund: %+v, want written at now+3 emission intervals", out[0])
	}
	if out[1].Write || out[1].Allowed || out[1].Remaining != 5 {
		t.Errorf("check-only refund: %+v, want nothing given back, 5 remaining", out[1])
	}
	if !out[2].Write || out[2].New.Window.Cur != 1 || out[2].Remaining != 2 {
		t.Errorf("window refund: %+v, want written with 1 hit left, 2 remaining", out[2])
	}
	if out[3].Write || out[3].Allowed {
		t.Errorf("check-only window refund: %+v, want nothing given back", out[3])
	}
}

func TestBusy(t *testing.T) {
	w := threePerMinute("w", 0, CheckAndSpend)
	g := gcraOp("a", 0, CheckAndSpend)
	hits := State{Window: window.Counter{Period: 60_000, Start: now / 1e6, Cur: 1}}
	for _, tc := range []struct {
		name string
		op   Op
		st   State
		at   int64
		want bool
	}{
		{"empty GCRA bucket", g, Empty, now, false},
		{"GCRA bucket not full", g, State{TAT: now + 1}, now, true},
		{"window with hits", w, hits, now, true},
		{"window whose hits are the previous window's, still weighted", w, hits, now + 61*second, true},
		{"window two periods on", w, hits, now + 120*second, false},
	} {
		if got := Busy(tc.at, &tc.op, tc.st); got != tc.want {
			t.Errorf("%s: Busy = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseAlgorithm(t *testing.T) {
	for _, a := range []Algorithm{GCRA, SlidingWindow, FixedWindow} {
		if got, ok := ParseAlgorithm(a.String()); !ok || got != a {
			t.Errorf("ParseAlgorithm(%q) = %v, %v", a, got, ok)
		}
	}
	if _, ok := ParseAlgorithm("leaky-bucket"); ok {
		t.Error("an unknown algorithm parsed")
	}
	if got, ok := ParseAlgorithm(""); !ok || got != GCRA {
		t.Errorf("empty algorithm = %v, %v; want gcra", got, ok)
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
	ops := []Op{gcraOp("a", 1, CheckAndSpend), threePerMinute("w", 1, CheckAndSpend)}
	states := []State{Empty, Empty}
	out := make([]Outcome, 2)
	allocs := testing.AllocsPerRun(100, func() {
		SpendBatch(now, ops, states, out)
		RefundBatch(now, ops, states, out)
	})
	if allocs != 0 {
		t.Fatalf("batch decisions allocated %v times per run, want 0", allocs)
	}
}

func BenchmarkSpendBatchOf3(b *testing.B) {
	ops := []Op{gcraOp("a", 1, CheckAndSpend), gcraOp("b", 1, CheckOnly), threePerMinute("c", 1, SpendOnly)}
	states := []State{Empty, {TAT: now}, {TAT: gcra.Missing}}
	out := make([]Outcome, 3)
	b.ReportAllocs()
	for b.Loop() {
		SpendBatch(now, ops, states, out)
	}
}

// A calendar op answered by its box, whether already boxed or boxed by
// its own denial, still names its period: the answer's period_end and
// window come from it.
func TestBoxedCalendarKeepsItsPeriod(t *testing.T) {
	cal, err := calendar.New(calendar.Day, "UTC")
	if err != nil {
		t.Fatal(err)
	}
	op := Op{Key: "c", Algorithm: Calendar, Calendar: calendar.Limit{Count: 2, Tag: cal.Tag()}, Periods: cal,
		Cost: 1, Mode: CheckAndSpend, Box: "c", BoxUntil: now + time.Hour.Nanoseconds()}
	want := cal.At(now / 1e6)
	full := State{Calendar: calendar.Counter{Tag: cal.Tag(), Start: want.Start, Used: 2}}
	for _, tt := range []struct {
		name string
		st   State
	}{
		{"boxed by its denial", full},
		{"already boxed", State{BoxExpires: now + time.Minute.Nanoseconds()}},
	} {
		out := make([]Outcome, 1)
		SpendBatch(now, []Op{op}, []State{tt.st}, out)
		if o := out[0]; !o.Penalized || o.Period != want {
			t.Errorf("%s: %+v, want penalized in the period %+v", tt.name, o.Decision, want)
		}
	}
}
