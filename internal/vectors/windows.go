package vectors

import (
	"encoding/json"
	"fmt"
	"slices"
)

// WindowScenarios are the scenarios of the algorithms vectors that this
// version implements: sliding and fixed windows, alone, overridden, and in
// batches with GCRA. The others test rate counters and penalty boxes, a
// later feature.
var WindowScenarios = []string{"sliding-weight", "fixed-window", "override-and-cost", "mixed-batch"}

// Windows returns the algorithms vectors cut to WindowScenarios, with a
// configuration this version loads.
//
// The cut is explicit rather than a skip of whatever fails, so that a
// window scenario can never drop out unnoticed. The file's configuration
// also declares the later feature's limits, which the loader refuses
// (rightly: an unsupported algorithm, an unknown field), so:
//   - limits whose algorithm is rate-counter are left out, since no window
//     scenario uses them;
//   - the penalty field is removed from the limits that have one; those
//     limits are used only by the later feature's scenarios, and without
//     their penalty they are ordinary GCRA and window limits that nothing
//     here spends.
//
// The scenarios share one clock, so the kept ones must be the first of
// the file: a scenario left out from between them would have moved the
// clock their expectations were computed with. Windows fails if that, or
// any other assumption above, stops holding.
func Windows() (*File, error) {
	f, err := Algorithms()
	if err != nil {
		return nil, err
	}
	if len(f.Scenarios) < len(WindowScenarios) {
		return nil, fmt.Errorf("vectors: the algorithms vectors have %d scenarios; want at least the %d window scenarios", len(f.Scenarios), len(WindowScenarios))
	}
	for i, name := range WindowScenarios {
		if f.Scenarios[i].Name != name {
			return nil, fmt.Errorf("vectors: scenario %d is %q; want %q, the window scenarios first and in order", i, f.Scenarios[i].Name, name)
		}
	}
	for _, sc := range f.Scenarios[len(WindowScenarios):] {
		if slices.Contains(WindowScenarios, sc.Name) {
			return nil, fmt.Errorf("vectors: scenario %q appears twice", sc.Name)
		}
	}
	f.Scenarios = f.Scenarios[:len(WindowScenarios)]

	var defaults map[string]map[string]any
	if err := json.Unmarshal(f.Defaults, &defaults); err != nil {
		return nil, fmt.Errorf("vectors: defaults: %w", err)
	}
	for name, limit := range defaults {
		if limit["algorithm"] == "rate-counter" {
			if used(f.Scenarios, name) {
				return nil, fmt.Errorf("vectors: window scenarios use %s, a rate counter", name)
			}
			delete(defaults, name)
			continue
		}
		if _, has := limit["penalty"]; has {
			if used(f.Scenarios, name) {
				return nil, fmt.Errorf("vectors: window scenarios use %s, which has a penalty", name)
			}
			delete(limit, "penalty")
		}
	}
	if f.Defaults, err = json.Marshal(defaults); err != nil {
		return nil, fmt.Errorf("vectors: defaults: %w", err)
	}
	return f, nil
}

// used reports whether any step of scenarios names limit.
func used(scenarios []Scenario, limit string) bool {
	for _, sc := range scenarios {
		for _, st := range sc.Steps {
			for _, txn := range st.Txns {
				if txn.Limit == limit {
					return true
				}
			}
		}
	}
	return false
}
