// Package vectors loads the public decision vectors (copies of
// shared/vectors/gcra-public.json and algorithms-public.json, embedded),
// and the project's own calendar vectors (testdata/calendar.json),
// and runs them against any driver: the Limiter directly, or the binary
// over HTTP. The same scenarios at every level make a difference between
// levels a failure.
//
// A step advances the clock, sends a batch (spend, check, refund, reset),
// or makes an ERL call ("erl": check_rate, check_rates, increment, lookup,
// add, has, remove; see ERLStep).
package vectors

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

//go:embed testdata/gcra-public.json
var publicJSON []byte

//go:embed testdata/algorithms-public.json
var algorithmsJSON []byte

//go:embed testdata/calendar.json
var calendarJSON []byte

// File is a vectors file: the configuration its scenarios run under, and
// the scenarios, which run in order in one service on one clock. Start,
// when the file gives it (RFC 3339), is the time the clock starts at;
// window vectors depend on it, since windows are aligned to the clock.
type File struct {
	Start     string          `json:"start"`
	Defaults  json.RawMessage `json:"defaults"`
	Overrides json.RawMessage `json:"overrides"`
	Scenarios []Scenario      `json:"scenarios"`
}

// Scenario is a named sequence of steps.
type Scenario struct {
	Name  string `json:"name"`
	Steps []Step `json:"steps"`
}

// Step either advances the clock or sends one request: a batch (Op
// spend, check, refund or reset, with Txns and Expect), or an ERL call
// (Op "erl", with ERL). ExpectStatus, when not 0, is the status the
// request must be refused with.
type Step struct {
	Advance      string
	Op           string
	Txns         []Txn
	Expect       *Expect
	ERL          *ERLStep
	ExpectStatus int
}

// stepJSON is a step as the file spells it: an ERL step's expect is the
// answer's fields, a batch step's the decisions.
type stepJSON struct {
	Advance      string          `json:"advance"`
	Op           string          `json:"op"`
	Txns         []Txn           `json:"txns"`
	Call         string          `json:"call"`
	Path         *string         `json:"path"`
	Body         json.RawMessage `json:"body"`
	Expect       json.RawMessage `json:"expect"`
	ExpectStatus int             `json:"expect_status"`
}

// UnmarshalJSON reads a step, its expect as its op has it.
func (s *Step) UnmarshalJSON(data []byte) error {
	var sj stepJSON
	if err := json.Unmarshal(data, &sj); err != nil {
		return err
	}
	*s = Step{Advance: sj.Advance, Op: sj.Op, Txns: sj.Txns, ExpectStatus: sj.ExpectStatus}
	hasExpect := len(sj.Expect) > 0 && string(sj.Expect) != "null"
	if sj.Op != OpERL {
		if sj.Call != "" || sj.Path != nil || sj.Body != nil {
			return fmt.Errorf("a %q step has call, path or body", sj.Op)
		}
		if hasExpect {
			s.Expect = new(Expect)
			return json.Unmarshal(sj.Expect, s.Expect)
		}
		return nil
	}
	if _, ok := erlCalls[sj.Call]; !ok {
		return fmt.Errorf("unknown ERL call %q", sj.Call)
	}
	s.ERL = &ERLStep{Call: sj.Call, Body: sj.Body}
	if sj.Path != nil {
		s.ERL.Path = *sj.Path
	}
	if hasExpect {
		if err := json.Unmarshal(sj.Expect, &s.ERL.Expect); err != nil {
			return fmt.Errorf("expect of %s: %w", sj.Call, err)
		}
	}
	return nil
}

// Txn is a transaction as the API takes it. Cost and Mode are optional.
type Txn struct {
	Limit string `json:"limit"`
	ID    string `json:"id"`
	Cost  *int64 `json:"cost,omitempty"`
	Mode  string `json:"mode,omitempty"`
}

// String shows a transaction in failure messages with its cost's value,
// not the pointer's.
func (t Txn) String() string {
	cost := "default"
	if t.Cost != nil {
		cost = fmt.Sprint(*t.Cost)
	}
	return fmt.Sprintf("{%s %s cost:%s mode:%q}", t.Limit, t.ID, cost, t.Mode)
}

// Expect is an expected answer in exact nanoseconds. The batch fields are
// absent for refunds, whose vectors check only the decisions.
type Expect struct {
	Allowed   *bool            `json:"allowed"`
	Remaining *int64           `json:"remaining"`
	RetryInNS *int64           `json:"retry_in_ns"`
	ResetInNS *int64           `json:"reset_in_ns"`
	Decisions []ExpectDecision `json:"decisions"`
}

// ExpectDecision is one transaction's expected decision. Algorithm is
// compared only when the vector gives it. Penalized is given exactly for
// the decisions of limits that have a penalty box, and a decision must
// carry it exactly then.
type ExpectDecision struct {
	Limit     string `json:"limit"`
	ID        string `json:"id"`
	Allowed   bool   `json:"allowed"`
	Remaining int64  `json:"remaining"`
	RetryInNS int64  `json:"retry_in_ns"`
	ResetInNS int64  `json:"reset_in_ns"`
	Algorithm string `json:"algorithm"`
	Penalized *bool  `json:"penalized"`
}

// Result is what a driver got back. Durations are in the driver's unit:
// nanoseconds from the Limiter, milliseconds over HTTP.
type Result struct {
	Status    int
	Allowed   bool
	Remaining int64
	RetryIn   int64
	ResetIn   int64
	Decisions []ResultDecision
}

// ResultDecision is one transaction's decision as a driver got it.
// Algorithm is as the API spells it ("gcra", "sliding-window", ...).
// HasPenalized says the decision carries penalized (its limit has a
// penalty box), and Penalized is its value.
type ResultDecision struct {
	Limit        string
	ID           string
	Allowed      bool
	Remaining    int64
	RetryIn      int64
	ResetIn      int64
	Algorithm    string
	HasPenalized bool
	Penalized    bool
}

// Driver runs steps against one level of the service.
type Driver interface {
	// Advance moves the service's fake clock forward.
	Advance(d time.Duration) error
	// Do sends one operation (spend, check, refund, reset). A refusal of
	// bad input is a Result with its status, not an error.
	Do(op string, txns []Txn) (Result, error)
	// ERL makes one ERL call. A refusal of bad input is an ERLResult with
	// its status, not an error.
	ERL(step *ERLStep) (ERLResult, error)
}

// Public returns the public vectors.
func Public() (*File, error) {
	var f File
	if err := json.Unmarshal(publicJSON, &f); err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	return &f, nil
}

// PublicBytes returns the embedded copy as it is on disk.
func PublicBytes() []byte { return publicJSON }

// Algorithms returns the public vectors of every algorithm beside GCRA,
// whole: windows, penalties on GCRA and window limits, rate counters spent
// as limits, and the ERL calls. Its scenarios share one clock, which
// starts at the file's Start.
func Algorithms() (*File, error) {
	var f File
	if err := json.Unmarshal(algorithmsJSON, &f); err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	return &f, nil
}

// AlgorithmsBytes returns the embedded copy of the algorithms vectors as it
// is on disk.
func AlgorithmsBytes() []byte { return algorithmsJSON }

// Calendar returns the project's own vectors of calendar limits: periods
// of a day, a week, a month and a year in zones with daylight saving time,
// their ends, overrides, refunds, resets, penalties and batches mixed
// with other algorithms. Its scenarios share one clock, which starts at
// the file's Start.
func Calendar() (*File, error) {
	var f File
	if err := json.Unmarshal(calendarJSON, &f); err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	return &f, nil
}

// StartTime returns the time the file's clock starts at, or def when the
// file does not say.
func (f *File) StartTime(def time.Time) (time.Time, error) {
	if f.Start == "" {
		return def, nil
	}
	t, err := time.Parse(time.RFC3339Nano, f.Start)
	if err != nil {
		return time.Time{}, fmt.Errorf("vectors: start %q: %w", f.Start, err)
	}
	return t, nil
}

// WriteConfig writes the file's defaults and overrides as config files in
// dir (JSON is YAML) and returns their paths.
func (f *File) WriteConfig(dir string) (defaults, overrides string, err error) {
	defaults = filepath.Join(dir, "defaults.yaml")
	overrides = filepath.Join(dir, "overrides.yaml")
	if err := os.WriteFile(defaults, f.Defaults, 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(overrides, f.Overrides, 0o644); err != nil {
		return "", "", err
	}
	return defaults, overrides, nil
}

// Run runs every scenario in order against d. unit is the resolution of
// d's durations: expected nanoseconds are rounded up to it, as the HTTP
// API rounds durations up to whole milliseconds.
func Run(t *testing.T, f *File, d Driver, unit time.Duration) {
	t.Helper()
	steps := 0
	for _, sc := range f.Scenarios {
		for i, st := range sc.Steps {
			where := fmt.Sprintf("scenario %q step %d", sc.Name, i)
			if st.Advance != "" {
				dur, err := time.ParseDuration(st.Advance)
				if err != nil {
					t.Fatalf("%s: bad advance %q: %v", where, st.Advance, err)
				}
				if err := d.Advance(dur); err != nil {
					t.Fatalf("%s: advance: %v", where, err)
				}
				continue
			}
			steps++
			if st.ERL != nil {
				got, err := d.ERL(st.ERL)
				if err != nil {
					t.Fatalf("%s: %s: %v", where, st.ERL.Call, err)
				}
				checkERL(t, where, st, got)
				continue
			}
			got, err := d.Do(st.Op, st.Txns)
			if err != nil {
				t.Fatalf("%s: %s: %v", where, st.Op, err)
			}
			checkStep(t, where, st, got, unit)
		}
	}
	if steps == 0 {
		t.Fatal("the vectors ran no step")
	}
}

func checkStep(t *testing.T, where string, st Step, got Result, unit time.Duration) {
	t.Helper()
	if st.ExpectStatus != 0 {
		if got.Status != st.ExpectStatus {
			t.Errorf("%s: %s %+v: status %d, want %d", where, st.Op, st.Txns, got.Status, st.ExpectStatus)
		}
		return
	}
	if got.Status != 200 {
		t.Errorf("%s: %s %+v: status %d, want 200", where, st.Op, st.Txns, got.Status)
		return
	}
	e := st.Expect
	if e == nil {
		return // reset steps expect only success
	}
	if e.Allowed != nil {
		want := Result{Allowed: *e.Allowed, Remaining: *e.Remaining, RetryIn: round(*e.RetryInNS, unit), ResetIn: round(*e.ResetInNS, unit)}
		if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.RetryIn != want.RetryIn || got.ResetIn != want.ResetIn {
			t.Errorf("%s: %s %+v: batch (allowed %v, remaining %d, retry %d, reset %d), want (%v, %d, %d, %d)",
				where, st.Op, st.Txns, got.Allowed, got.Remaining, got.RetryIn, got.ResetIn,
				want.Allowed, want.Remaining, want.RetryIn, want.ResetIn)
		}
	}
	if len(got.Decisions) != len(e.Decisions) {
		t.Errorf("%s: %d decisions, want %d", where, len(got.Decisions), len(e.Decisions))
		return
	}
	for i, wd := range e.Decisions {
		want := ResultDecision{Limit: wd.Limit, ID: wd.ID, Allowed: wd.Allowed, Remaining: wd.Remaining, RetryIn: round(wd.RetryInNS, unit), ResetIn: round(wd.ResetInNS, unit),
			Algorithm: wd.Algorithm, HasPenalized: wd.Penalized != nil}
		if wd.Penalized != nil {
			want.Penalized = *wd.Penalized
		}
		if want.Algorithm == "" {
			want.Algorithm = got.Decisions[i].Algorithm // the vector does not say
		}
		if got.Decisions[i] != want {
			t.Errorf("%s: %s decision %d:\n got %+v\nwant %+v", where, st.Op, i, got.Decisions[i], want)
		}
	}
}

// round converts nanoseconds to unit, rounding up.
func round(ns int64, unit time.Duration) int64 {
	u := int64(unit)
	return (ns + u - 1) / u
}
