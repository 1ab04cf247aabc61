package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/limiter-dev/limiter/ratelimits/configfile"
)

// checkConfig validates the three files as serve would load them and
// prints every problem as FILE:LINE: LIMIT: MESSAGE. It exits 1 if there
// is any. The descriptors file is checked against the limits of the other
// two; when they do not load, it is still checked for everything but its
// limit names, so that one run shows every file's problems.
func checkConfig(args []string, stdout, stderr io.Writer) int {
	var c configFlags
	fs := flag.NewFlagSet("limiter check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bad []string // no file flag can be bad: any text is a path
	table := c.settings()
	register(fs, table, &bad)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "limiter check-config: unexpected arguments:", fs.Args())
		return 2
	}
	c.pairDescriptors(newSettings(fs, table))
	cfg, err := configfile.Load(c.defaults, c.overrides)
	rules, rulesErr := loadDescriptorRules(c.descriptors, cfg)
	if err != nil || rulesErr != nil {
		problems := printProblems(stdout, err) + printProblems(stdout, rulesErr)
		if err != nil && rulesErr == nil && rules.Count() > 0 {
			fmt.Fprintf(stdout, "%s: the limit names of its rules were not checked, as the limit files did not load\n", c.descriptors)
		}
		if problems > 0 {
			fmt.Fprintf(stdout, "%d problem(s) found\n", problems)
		}
		return 1
	}
	limited, overrides := 0, 0
	for _, n := range cfg.Names() {
		if _, ok := cfg.Default(n.Name); ok {
			limited++
		}
		overrides += cfg.OverrideCount(n.Name)
	}
	fmt.Fprintf(stdout, "ok: %s (%d limits with defaults), %s (%d overrides), %s\n",
		c.defaults, limited, c.overrides, overrides, describeRulesFile(c.descriptors, rules.Count()))
	return 0
}

// printProblems prints the problems of a failed load, one per line, and
// returns how many there were; an error that is not a list of problems
// (a file that could not be read) is printed as it is and counts none.
func printProblems(w io.Writer, err error) int {
	if err == nil {
		return 0
	}
	var ce *configfile.Error
	if !errors.As(err, &ce) {
		fmt.Fprintln(w, err)
		return 0
	}
	for _, p := range ce.Problems {
		fmt.Fprintln(w, p.String())
	}
	return len(ce.Problems)
}

// describeRulesFile says what check-config found in the descriptors file,
// telling a missing file apart, as a mistyped path loads no rules without
// an error.
func describeRulesFile(path string, count int) string {
	if path == "" {
		return "no descriptors file (no descriptor rules: give --descriptors with limit files other than the bundled ones)"
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return path + " (no such file: no descriptor rules)"
	}
	return fmt.Sprintf("%s (%d descriptor rules)", path, count)
}
