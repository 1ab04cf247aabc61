package main

import (
	"strings"

	"github.com/limiter-dev/limiter/ratelimits"
)

// loadRules loads a rules file (configfile.LoadDescriptors,
// configfile.LoadForwardAuth) with load, against cfg, the limits its rules
// must name: serve at start, every reload and check-config read it the
// same way. A missing file (or an empty path) is no rules; a bad file is a
// *configfile.Error with every problem, which logConfigProblems logs one
// per line, and a nil cfg (limit files that did not load) checks all but
// the limit names. A loose file (see configFlags.pairRuleFiles) that does
// not load is no file instead: rules are then the zero value, err nil,
// and skipped is its first problem, for a warning.
func loadRules[T any](path string, loose bool, cfg *ratelimits.Config, load func(string, *ratelimits.Config) (T, error)) (rules T, skipped string, err error) {
	rules, err = load(path, cfg)
	if err == nil || !loose {
		return rules, "", err
	}
	var none T
	first, _, _ := strings.Cut(err.Error(), "\n")
	return none, first, nil
}
