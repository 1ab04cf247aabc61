package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/limiter-dev/limiter/ratelimits/configfile"
)

// checkConfig validates both files as serve would load them and prints
// every problem as FILE:LINE: LIMIT: MESSAGE. It exits 1 if there is any.
func checkConfig(args []string, stdout, stderr io.Writer) int {
	var c configFlags
	fs := flag.NewFlagSet("limiter check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bad []string // no file flag can be bad: any text is a path
	register(fs, c.settings(), &bad)
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
	cfg, err := configfile.Load(c.defaults, c.overrides)
	if err != nil {
		var ce *configfile.Error
		if errors.As(err, &ce) {
			for _, p := range ce.Problems {
				fmt.Fprintln(stdout, p.String())
			}
			fmt.Fprintf(stdout, "%d problem(s) found\n", len(ce.Problems))
		} else {
			fmt.Fprintln(stdout, err)
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
	fmt.Fprintf(stdout, "ok: %s (%d limits with defaults), %s (%d overrides)\n", c.defaults, limited, c.overrides, overrides)
	return 0
}
