package vectors

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

// The whole algorithms file parses: every scenario, the ERL steps with
// their calls, paths, bodies and expectations, and the decisions'
// penalized exactly where the vectors give it.
func TestAlgorithmsParse(t *testing.T) {
	f, err := Algorithms()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sliding-weight", "fixed-window", "override-and-cost", "mixed-batch", "gcra-lockout",
		"window-lockout-batch", "rate-counter-limit", "erl-buckets", "erl-check-rate", "erl-check-rates"}
	var names []string
	calls := map[string]int{}
	penalized := 0
	for _, sc := range f.Scenarios {
		names = append(names, sc.Name)
		for _, st := range sc.Steps {
			if st.ERL != nil {
				calls[st.ERL.Call]++
				if st.Op != OpERL || len(st.ERL.Expect) == 0 || len(st.ERL.Body) == 0 {
					t.Errorf("%s: ERL step %+v", sc.Name, st.ERL)
				}
			}
			if st.Expect != nil {
				for _, d := range st.Expect.Decisions {
					if d.Penalized != nil {
						penalized++
					}
				}
			}
		}
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("scenarios %v, want %v", names, want)
	}
	for _, c := range []string{"check_rate", "check_rates", "increment", "lookup", "add", "has", "remove"} {
		if calls[c] == 0 {
			t.Errorf("no %s step: %v", c, calls)
		}
	}
	if penalized < 20 {
		t.Errorf("only %d decisions carry penalized", penalized)
	}
	var step Step
	if err := json.Unmarshal([]byte(`{"op":"erl","call":"nap","path":"X","body":{}}`), &step); err == nil {
		t.Error("an unknown ERL call parsed")
	}
	if err := json.Unmarshal([]byte(`{"op":"spend","call":"has","txns":[]}`), &step); err == nil {
		t.Error("a spend step with a call parsed")
	}
}

// Each ERL call goes to its endpoint; a GET's entry is one escaped path
// segment, and the counter or box is the segment before it.
func TestERLHTTPRequest(t *testing.T) {
	for _, c := range []struct {
		call, path, body     string
		method, url, reqBody string
	}{
		{"check_rate", "", `{"entry":"a"}`, "POST", "/v1/erl/check_rate", `{"entry":"a"}`},
		{"check_rates", "", `{"entry":"a"}`, "POST", "/v1/erl/check_rates", `{"entry":"a"}`},
		{"increment", "C", `{"entry":"a","delta":1}`, "POST", "/v1/erl/ratecounters/C/increment", `{"entry":"a","delta":1}`},
		{"lookup", "C", `{"entry":"2001:db8::/48"}`, "GET", "/v1/erl/ratecounters/C/2001:db8::%2F48", ""},
		{"add", "B", `{"entry":"a","ttl":"1m"}`, "POST", "/v1/erl/penaltyboxes/B/add", `{"entry":"a","ttl":"1m"}`},
		{"has", "B", `{"entry":"a b"}`, "GET", "/v1/erl/penaltyboxes/B/a%20b", ""},
		{"remove", "B", `{"entry":"a"}`, "POST", "/v1/erl/penaltyboxes/B/remove", `{"entry":"a"}`},
	} {
		s := ERLStep{Call: c.call, Path: c.path, Body: json.RawMessage(c.body)}
		method, url, body, err := s.HTTPRequest()
		if err != nil || method != c.method || url != c.url || string(body) != c.reqBody {
			t.Errorf("%s: %s %s %s %v; want %s %s %s", c.call, method, url, body, err, c.method, c.url, c.reqBody)
		}
	}
}

// ParseERLAnswer reads a 200's body, keeps a 4xx's status, and makes a 5xx
// an error.
func TestParseERLAnswer(t *testing.T) {
	r, err := ParseERLAnswer(200, []byte(`{"rate":16.866666666666667,"penalized":true}`))
	if err != nil || r.Status != 200 || r.Answer["rate"] != 16.866666666666667 || r.Answer["penalized"] != true {
		t.Errorf("200: %+v %v", r, err)
	}
	if r, err := ParseERLAnswer(400, []byte(`{"error":{}}`)); err != nil || r.Status != 400 {
		t.Errorf("400: %+v %v", r, err)
	}
	if _, err := ParseERLAnswer(503, nil); err == nil {
		t.Error("503 is not an error")
	}
}

// checkERL fails a step whose answer lacks an expected field or has
// another value, and passes one that has more fields than expected.
func TestCheckERL(t *testing.T) {
	st := Step{Op: OpERL, ERL: &ERLStep{Call: "has", Expect: map[string]any{"has": true, "penalty_expires_in_ms": float64(5)}}}
	for _, c := range []struct {
		got  ERLResult
		fail bool
	}{
		{ERLResult{Status: 200, Answer: map[string]any{"has": true, "penalty_expires_in_ms": float64(5), "x": 1.0}}, false},
		{ERLResult{Status: 200, Answer: map[string]any{"has": true, "penalty_expires_in_ms": float64(6)}}, true},
		{ERLResult{Status: 200, Answer: map[string]any{"has": true}}, true},
		{ERLResult{Status: 400}, true},
	} {
		var r failRecorder
		checkERL(&r, "here", st, c.got)
		if r.failed != c.fail {
			t.Errorf("%+v: failed %v, want %v", c.got, r.failed, c.fail)
		}
	}
}

// failRecorder is a reporter that remembers whether it was told of an
// error.
type failRecorder struct{ failed bool }

func (r *failRecorder) Helper()               {}
func (r *failRecorder) Errorf(string, ...any) { r.failed = true }

// newAlgorithmsLimiter is a Limiter of the algorithms file's configuration
// (built in code) on src, its clock at the file's start.
func newAlgorithmsLimiter(t *testing.T, f *File, src ratelimits.Source) (*ratelimits.Limiter, clock.FakeClock) {
	t.Helper()
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	start, err := f.StartTime(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake()
	clk.Set(start)
	l, err := ratelimits.NewLimiter(cfg, src, clk)
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

// Every algorithms vector, the ERL calls included, holds for the
// reference model of a source: the core's arithmetic against the file.
func TestAlgorithmsOnModel(t *testing.T) {
	f, err := Algorithms()
	if err != nil {
		t.Fatal(err)
	}
	l, clk := newAlgorithmsLimiter(t, f, NewModelSource())
	Run(t, f, &LimiterDriver{Limiter: l, Clock: clk}, time.Nanosecond)
}

// The same on the memory source.
func TestAlgorithmsOnMemory(t *testing.T) {
	f, err := Algorithms()
	if err != nil {
		t.Fatal(err)
	}
	src := memory.New(0)
	l, clk := newAlgorithmsLimiter(t, f, src)
	Run(t, f, &LimiterDriver{Limiter: l, Clock: clk}, time.Nanosecond)
}

// The file's configuration built in code is the one the configuration
// loader makes of it: every name's algorithm, sync_rate, box, capacity and
// default, and every override.
func TestAlgorithmsConfigMatchesLoader(t *testing.T) {
	f, err := Algorithms()
	if err != nil {
		t.Fatal(err)
	}
	built, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := configfile.Parse("defaults.yaml", f.Defaults, "overrides.yaml", f.Overrides)
	if err != nil {
		t.Fatalf("the configuration loader refuses the file: %v", err)
	}
	for _, n := range built.Names() {
		ln, ok := loaded.Lookup(n.Limit)
		if !ok || ln.Name != n.Name || ln.Kind != n.Kind {
			t.Errorf("%s: loaded %+v, built %+v", n.Limit, ln, n)
			continue
		}
		bd, bok := built.Default(n.Name)
		ld, lok := loaded.Default(n.Name)
		if bok != lok || bd != ld || built.Algorithm(n.Name) != loaded.Algorithm(n.Name) || built.SyncRate(n.Name) != loaded.SyncRate(n.Name) ||
			built.HasBox(n.Name) != loaded.HasBox(n.Name) || built.Capacity(n.Name) != loaded.Capacity(n.Name) ||
			built.OverrideCount(n.Name) != loaded.OverrideCount(n.Name) {
			t.Errorf("%s: loaded default %+v (%v), built %+v (%v)", n.Limit, ld, lok, bd, bok)
		}
	}
	bl, _ := built.Limit(301, "gold")
	ll, _ := loaded.Limit(301, "gold")
	if bl.Count != 20 || !bl.Override || ll != bl {
		t.Errorf("the override of gold: built %+v, loaded %+v", bl, ll)
	}
	if len(loaded.Names()) != len(built.Names()) {
		t.Errorf("%d names loaded, %d built", len(loaded.Names()), len(built.Names()))
	}
}
