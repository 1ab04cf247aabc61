package bucket

import (
	"testing"

	"github.com/limiter-dev/limiter/ratelimits/concurrency"
)

const nowMsTest = now / nsPerMs

// twoSlots is a concurrency limit of 2 slots whose leases live a minute.
func twoSlots(key string, cost int64, mode Mode) Op {
	return Op{Key: key, Algorithm: Concurrency, Lease: concurrency.Limit{Count: 2, TTL: 60_000}, LeaseID: "new-" + key, Cost: cost, Mode: mode}
}

func held(ids ...string) State {
	var leases []concurrency.Lease
	for i, id := range ids {
		leases = append(leases, concurrency.Lease{ID: id, Cost: 1, Exp: nowMsTest + int64(10*(i+1))})
	}
	return WithLeases(leases)
}

func TestSpendBatchLeases(t *testing.T) {
	tests := []struct {
		name        string
		ops         []Op
		states      []State
		wantAllowed bool
		wantWrite   []bool
		wantLease   []bool
	}{
		{"an acquire that fits is written with its lease",
			[]Op{twoSlots("a", 1, CheckAndSpend)}, []State{{}}, true, []bool{true}, []bool{true}},
		{"a check-only acquire takes no lease",
			[]Op{twoSlots("a", 1, CheckOnly)}, []State{{}}, true, []bool{false}, []bool{false}},
		{"a cost-0 acquire reads",
			[]Op{twoSlots("a", 0, CheckAndSpend)}, []State{held("x")}, true, []bool{false}, []bool{false}},
		{"a full bucket denies the batch, and the allowed acquire beside it takes no lease",
			[]Op{twoSlots("a", 1, CheckAndSpend), twoSlots("b", 1, CheckAndSpend)},
			[]State{{}, held("x", "y")}, false, []bool{false, false}, []bool{false, false}},
		{"an allowed spend-only acquire in an allowed batch is written",
			[]Op{gcraOp("g", 1, CheckAndSpend), twoSlots("b", 1, SpendOnly)},
			[]State{Empty, held("x")}, true, []bool{true, true}, []bool{false, true}},
		{"a denied spend-only acquire neither denies nor is written",
			[]Op{gcraOp("g", 1, CheckAndSpend), twoSlots("b", 1, SpendOnly)},
			[]State{Empty, held("x", "y")}, true, []bool{true, false}, []bool{false, false}},
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
				if (o.Lease != "") != tt.wantLease[i] {
					t.Errorf("op %d lease = %q, want one: %v", i, o.Lease, tt.wantLease[i])
				}
				if o.Lease != "" && o.Lease != tt.ops[i].LeaseID {
					t.Errorf("op %d lease = %q, want the op's %q", i, o.Lease, tt.ops[i].LeaseID)
				}
			}
		})
	}
}

func TestLeaseOutcomeIsInNanoseconds(t *testing.T) {
	out := make([]Outcome, 1)
	// 2 of 2 held, ending in 10 and 20 ms.
	SpendBatch(now, []Op{twoSlots("a", 1, CheckAndSpend)}, []State{held("x", "y")}, out)
	if o := out[0]; o.Allowed || o.RetryIn != 10*nsPerMs || o.ResetIn != 20*nsPerMs || o.Remaining != 0 {
		t.Errorf("denied acquire = %+v, want retry in 10ms, reset in 20ms", o.Decision)
	}
}

func TestReleaseAndRenewThroughRefundBatch(t *testing.T) {
	tests := []struct {
		name      string
		action    LeaseAction
		id        string
		want      Decision
		wantWrite bool
		wantLeft  int
	}{
		{"release a live lease", Release, "x", Decision{Allowed: true, Remaining: 1, ResetIn: 20 * nsPerMs}, true, 1},
		{"release an unknown lease", Release, "z", Decision{Allowed: false, Remaining: 0, ResetIn: 20 * nsPerMs}, false, 2},
		{"renew a live lease", Renew, "x", Decision{Allowed: true, Remaining: 0, ResetIn: 60_000 * nsPerMs}, true, 2},
		{"renew an unknown lease", Renew, "z", Decision{Allowed: false, Remaining: 0, ResetIn: 20 * nsPerMs}, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := twoSlots("a", 0, CheckAndSpend)
			op.LeaseID, op.LeaseAction = tt.id, tt.action
			out := make([]Outcome, 1)
			RefundBatch(now, []Op{op}, []State{held("x", "y")}, out)
			if out[0].Decision != tt.want || out[0].Write != tt.wantWrite || len(LeasesOf(out[0].New)) != tt.wantLeft {
				t.Errorf("got %+v, write %v, %d leases left; want %+v, write %v, %d left",
					out[0].Decision, out[0].Write, len(LeasesOf(out[0].New)), tt.want, tt.wantWrite, tt.wantLeft)
			}
		})
	}
}

func TestBusyLeases(t *testing.T) {
	op := twoSlots("a", 0, CheckAndSpend)
	if Busy(now, &op, State{}) {
		t.Error("an empty lease bucket is busy")
	}
	if !Busy(now, &op, held("x")) {
		t.Error("a bucket with a live lease is not busy")
	}
	if Busy(now+int64(10*nsPerMs), &op, held("x")) {
		t.Error("a bucket whose only lease expired is busy")
	}
}
