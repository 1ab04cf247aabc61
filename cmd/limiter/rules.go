package main

import (
	"github.com/limiter-dev/limiter/envoyapi/descriptors"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/configfile"
)

// loadDescriptorRules loads the descriptors file against cfg, the limits
// its rules must name: serve at start, every reload and check-config read
// it the same way. A missing file (or an empty path) is no rules; a bad
// file is a *configfile.Error with every problem, which logConfigProblems
// logs one per line. A nil cfg (limit files that did not load) checks all
// but the limit names.
func loadDescriptorRules(path string, cfg *ratelimits.Config) (*descriptors.Rules, error) {
	return configfile.LoadDescriptors(path, cfg)
}
