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

// checkConfig validates the four files as serve would load them and
// prints every problem as FILE:LINE: LIMIT: MESSAGE. It exits 1 if there
// is any. The descriptors and forward-auth files are checked against the
// limits of the other two; when those do not load, the rules files are
// still checked for everything but their limit names, so that one run
// shows every file's problems.
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
	c.pairRuleFiles(newSettings(fs, table))
	cfg, err := configfile.Load(c.defaults, c.overrides)
	rules, rulesSkipped, rulesErr := loadRules(c.descriptors, c.looseDescriptors, cfg, configfile.LoadDescriptors)
	fwd, fwdSkipped, fwdErr := loadRules(c.forwardAuth, c.looseForwardAuth, cfg, configfile.LoadForwardAuth)
	if err != nil || rulesErr != nil || fwdErr != nil {
		problems := printProblems(stdout, err) + printProblems(stdout, rulesErr) + printProblems(stdout, fwdErr)
		if err != nil && rulesErr == nil && rules.Count() > 0 {
			fmt.Fprintf(stdout, "%s: the limit names of its rules were not checked, as the limit files did not load\n", c.descriptors)
		}
		if err != nil && fwdErr == nil && fwd.Count() > 0 {
			fmt.Fprintf(stdout, "%s: the limit names of its rules were not checked, as the limit files did not load\n", c.forwardAuth)
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
	fmt.Fprintf(stdout, "ok: %s (%d limits with defaults), %s (%d overrides), %s, %s\n",
		c.defaults, limited, c.overrides, overrides,
		describeRulesFile(c.descriptors, "descriptors", "descriptor", rules.Count(), rulesSkipped),
		describeRulesFile(c.forwardAuth, "forward-auth", "forward-auth", fwd.Count(), fwdSkipped))
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

// describeRulesFile says what check-config found in a rules file (flag
// is its flag, kind names its rules), telling a missing file apart, as a
// mistyped path loads no rules without an error, and a built-in one left
// out beside other limit files (skipped is its first problem).
func describeRulesFile(path, flag, kind string, count int, skipped string) string {
	if skipped != "" {
		return fmt.Sprintf("%s (not used: the built-in path, and it does not fit these limit files; name a %s file with --%s: %s)", path, flag, flag, skipped)
	}
	if path == "" {
		return fmt.Sprintf("no %s rules file (no %s rules)", kind, kind)
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("%s (no such file: no %s rules)", path, kind)
	}
	return fmt.Sprintf("%s (%d %s rules)", path, count, kind)
}
