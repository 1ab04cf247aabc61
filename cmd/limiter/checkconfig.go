package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/limiter-dev/limiter/configfile"
)

// checkConfig validates the four files as serve would load them and
// prints every problem as FILE:LINE: LIMIT: MESSAGE. It exits 1 if there
// is any. The descriptors and forward-auth files are checked against the
// limits of the other two; when those do not load, the rules files are
// still checked for everything but their limit names, so that one run
// shows every file's problems.
// checkConfigSynopsis is what `limiter check-config --help` says it does.
const checkConfigSynopsis = `Loads the defaults, overrides, descriptors and forward-auth files as serve
would, and prints every problem as FILE:LINE: LIMIT: MESSAGE (exit 1), or
one ok: line that says what each file gave (exit 0).`

func checkConfig(args []string, stdout, stderr io.Writer) int {
	var c configFlags
	fs := newFlagSet("limiter check-config", stderr)
	var bad []string // no file flag can be bad: any text is a path
	table := c.settings()
	register(fs, table, &bad)
	if err := parseFlags(fs, checkConfigSynopsis, args, stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "limiter check-config: unexpected arguments:", fs.Args())
		return 2
	}
	set := newSettings(fs, table)
	if err := set.check(""); err != nil {
		fmt.Fprintln(stderr, "limiter check-config:", err)
		return 2
	}
	c.resolve(set)
	loaded, err := c.load(nil, nil)
	if err != nil {
		lines := problemLines(err)
		for _, line := range lines {
			fmt.Fprintln(stdout, line)
		}
		if loaded != nil && loaded.cfg == nil {
			// Rules that parsed are there to be counted; their limit
			// names had nothing to be checked against.
			counts := [fileRoles]int{descriptorsFile: loaded.rules.Count(), forwardAuthFile: loaded.fwd.Count()}
			for _, role := range []fileRole{descriptorsFile, forwardAuthFile} {
				if counts[role] > 0 {
					fmt.Fprintf(stdout, "%s: the limit names of its rules were not checked, as the limit files did not load\n", loaded.paths[role])
				}
			}
		}
		fmt.Fprintf(stdout, "%d problem(s) found\n", len(lines))
		return 1
	}
	counts := loaded.counts()
	fmt.Fprintf(stdout, "ok: %s (%s limits with defaults), %s (%s overrides), %s, %s\n",
		c.defaults, counts[defaultsFile], c.overrides, strings.Replace(counts[overridesFile], "none", "0", 1),
		describeRulesFile(loaded, descriptorsFile, "descriptor", counts[descriptorsFile]),
		describeRulesFile(loaded, forwardAuthFile, "forward-auth", counts[forwardAuthFile]))
	return 0
}

// describeRulesFile says what check-config found in a rules file (kind
// names its rules), telling a missing file apart, as a built-in path that
// points nowhere loads no rules without an error, and a built-in one left
// out beside other limit files.
func describeRulesFile(l *loadedConfig, role fileRole, kind, count string) string {
	path := l.paths[role]
	switch {
	case l.skipped[role] != "":
		return fmt.Sprintf("%s (not used: the built-in path, and it does not fit these limit files; name a %s file with --%s: %s)", path, role.flag(), role.flag(), l.skipped[role])
	case path == "":
		return fmt.Sprintf("no %s rules file (no %s rules)", kind, kind)
	case l.inUse[role] == configfile.Absent:
		return fmt.Sprintf("%s (no such file: no %s rules)", path, kind)
	}
	return fmt.Sprintf("%s (%s %s rules)", path, count, kind)
}
