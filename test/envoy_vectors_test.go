package test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/limiter-dev/limiter/internal/vectors"
)

// vectorsDomain is the domain whose rules map a descriptor keyed by a
// limit's name to that limit, for every limit of the vectors.
const vectorsDomain = "vectors"

// The public vectors against the binary on the memory source with a fake
// clock, every spend Envoy could make going through gRPC: one descriptor
// per transaction, keyed by the limit's name, its hits_addend the cost.
// Every other step (checks, refunds, resets, costs of 0, modes other than
// check-and-spend, refusals gRPC has no word for) goes through HTTP, in
// order, on the same process and clock.
func TestEnvoyVectorsOverGRPC(t *testing.T) {
	t.Parallel() // its own limiters: independent of every other test
	for _, tc := range []struct {
		name string
		load func() (*vectors.File, error)
	}{{"gcra", vectors.Public}, {"algorithms", vectors.Algorithms}} {
		t.Run(tc.name, func(t *testing.T) {
			f, env := configOf(t, tc.load)
			replayOverGRPC(t, f, env)
		})
	}
}

// replayOverGRPC replays f on a limiter started with env, as
// TestEnvoyVectorsOverGRPC says.
func replayOverGRPC(t *testing.T, f *vectors.File, env map[string]string) {
	t.Helper()
	limits, shadow := vectorLimits(t, f)
	var rules strings.Builder
	fmt.Fprintf(&rules, "- domain: %s\n  descriptors:\n", vectorsDomain)
	for _, l := range limits {
		fmt.Fprintf(&rules, "    - keys: [%s]\n      limit: %s\n", l, l)
	}
	env["LIMITER_DESCRIPTORS"] = writeFile(t, t.TempDir(), "descriptors.yaml", rules.String())
	e := startEnvoy(t, procOptions{Env: env})
	driver := &httpDriver{procs: []*limiterProc{e.limiterProc}}

	var viaGRPC, viaHTTP int
	for _, sc := range f.Scenarios {
		for i, st := range sc.Steps {
			where := fmt.Sprintf("scenario %q step %d", sc.Name, i)
			switch {
			case st.Advance != "":
				d, err := time.ParseDuration(st.Advance)
				if err != nil {
					t.Fatalf("%s: advance %q: %v", where, st.Advance, err)
				}
				if err := driver.Advance(d); err != nil {
					t.Fatalf("%s: %v", where, err)
				}
			case grpcFits(st, limits):
				viaGRPC++
				checkGRPCStep(t, e, where, st, shadow)
			default:
				viaHTTP++
				one := &vectors.File{Scenarios: []vectors.Scenario{{Name: sc.Name + fmt.Sprintf(" (step %d)", i), Steps: []vectors.Step{st}}}}
				vectors.Run(t, one, driver, time.Millisecond)
			}
		}
	}
	if viaGRPC == 0 {
		t.Fatal("no step went through gRPC")
	}
	t.Logf("%d steps through gRPC, %d through HTTP", viaGRPC, viaHTTP)
}

// vectorLimits returns the names of the limits the vectors' defaults
// declare, sorted, and which of them are shadow limits.
func vectorLimits(t *testing.T, f *vectors.File) ([]string, map[string]bool) {
	t.Helper()
	var defaults map[string]struct {
		Shadow bool `json:"shadow"`
	}
	if err := json.Unmarshal(f.Defaults, &defaults); err != nil {
		t.Fatalf("the vectors' defaults: %v", err)
	}
	var names []string
	shadow := map[string]bool{}
	for name, l := range defaults {
		names = append(names, name)
		shadow[name] = l.Shadow
	}
	slices.Sort(names)
	return names, shadow
}

// grpcFits says whether Envoy could have sent st: a spend whose every
// transaction is a check-and-spend of at least one token on a limit the
// rules map, expected to succeed or to be refused as bad input.
func grpcFits(st vectors.Step, limits []string) bool {
	if st.Op != "spend" || st.ERL != nil || len(st.Txns) == 0 || (st.ExpectStatus != 0 && st.ExpectStatus != 400) {
		return false
	}
	for _, tx := range st.Txns {
		if (tx.Mode != "" && tx.Mode != "check-and-spend") || (tx.Cost != nil && *tx.Cost < 1) || !slices.Contains(limits, tx.Limit) {
			return false
		}
	}
	return true
}

// checkGRPCStep sends st as ShouldRateLimit and compares the answer with
// the step's expectations: a refusal as INVALID_ARGUMENT; the batch's
// verdict as the overall code; each decision as its status (OK for a
// shadow limit), limit, remaining tokens and reset in milliseconds,
// rounded up.
func checkGRPCStep(t *testing.T, e *envoyProc, where string, st vectors.Step, shadow map[string]bool) {
	t.Helper()
	req := &rlsv3.RateLimitRequest{Domain: vectorsDomain}
	for _, tx := range st.Txns {
		d := desc(tx.Limit, tx.ID)
		if tx.Cost != nil {
			d = withHits(d, uint64(*tx.Cost))
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	resp, err := e.should("", req)
	if st.ExpectStatus != 0 {
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v over gRPC: %v %v, want INVALID_ARGUMENT (HTTP %d)", where, st.Txns, resp, err, st.ExpectStatus)
		}
		return
	}
	if err != nil {
		t.Errorf("%s: %v over gRPC: %v", where, st.Txns, err)
		return
	}
	want := st.Expect
	if want == nil {
		return
	}
	if want.Allowed != nil && (resp.GetOverallCode() == rlsv3.RateLimitResponse_OK) != *want.Allowed {
		t.Errorf("%s: %v over gRPC: overall %s, want allowed %v", where, st.Txns, resp.GetOverallCode(), *want.Allowed)
	}
	if len(resp.GetStatuses()) != len(want.Decisions) {
		t.Errorf("%s: %d statuses, want %d", where, len(resp.GetStatuses()), len(want.Decisions))
		return
	}
	for i, wd := range want.Decisions {
		got := resp.GetStatuses()[i]
		wantCode := rlsv3.RateLimitResponse_OK
		if !wd.Allowed && !shadow[wd.Limit] {
			wantCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		wantReset := time.Duration((wd.ResetInNS+int64(time.Millisecond)-1)/int64(time.Millisecond)) * time.Millisecond
		if got.GetCode() != wantCode || got.GetCurrentLimit().GetName() != wd.Limit ||
			int64(got.GetLimitRemaining()) != min(wd.Remaining, 1<<32-1) || got.GetDurationUntilReset().AsDuration() != wantReset {
			t.Errorf("%s: decision %d over gRPC:\n got %s on %q, remaining %d, reset %v\nwant %s on %q, remaining %d, reset %v",
				where, i, got.GetCode(), got.GetCurrentLimit().GetName(), got.GetLimitRemaining(), got.GetDurationUntilReset().AsDuration(),
				wantCode, wd.Limit, wd.Remaining, wantReset)
		}
	}
}

// Every spend step of the public vectors that gRPC can carry is carried;
// the others are not.
func TestGRPCFits(t *testing.T) {
	one, zero := int64(1), int64(0)
	limits := []string{"A", "B"}
	for _, tc := range []struct {
		name string
		st   vectors.Step
		want bool
	}{
		{"a plain spend", vectors.Step{Op: "spend", Txns: []vectors.Txn{{Limit: "A", ID: "x"}}}, true},
		{"a batch with costs", vectors.Step{Op: "spend", Txns: []vectors.Txn{{Limit: "A", ID: "x", Cost: &one}, {Limit: "B", ID: "x", Mode: "check-and-spend"}}}, true},
		{"a refusal", vectors.Step{Op: "spend", Txns: []vectors.Txn{{Limit: "A", ID: "x"}, {Limit: "A", ID: "x"}}, ExpectStatus: 400}, true},
		{"a check", vectors.Step{Op: "check", Txns: []vectors.Txn{{Limit: "A", ID: "x"}}}, false},
		{"a cost of 0", vectors.Step{Op: "spend", Txns: []vectors.Txn{{Limit: "A", ID: "x", Cost: &zero}}}, false},
		{"spend-only", vectors.Step{Op: "spend", Txns: []vectors.Txn{{Limit: "A", ID: "x"}, {Limit: "B", ID: "x", Mode: "spend-only"}}}, false},
		{"an unknown limit", vectors.Step{Op: "spend", Txns: []vectors.Txn{{Limit: "C", ID: "x"}}, ExpectStatus: 400}, false},
		{"a refusal as another status", vectors.Step{Op: "spend", Txns: []vectors.Txn{{Limit: "A", ID: "x"}}, ExpectStatus: 404}, false},
	} {
		if got := grpcFits(tc.st, limits); got != tc.want {
			t.Errorf("%s: grpcFits = %v, want %v", tc.name, got, tc.want)
		}
	}
}
