// Command limiter is the rate-limit service: `limiter serve` answers the
// HTTP API, `limiter check-config` validates configuration files, and
// `limiter version` says which build this is.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "check-config":
		return checkConfig(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		return printVersion(args[1:], stdout, stderr)
	case "help", "--help", "-h", "-help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "limiter: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: limiter <command> [flags]

commands:
  serve          run the HTTP service (limiter serve --help for flags)
  check-config   validate the defaults and overrides files, print every problem
  version        print the version
`)
}

// Each flag's default comes from its environment variable when that is set,
// so a flag on the command line beats the environment, which beats the
// built-in default.

func envString(name, fallback string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return fallback
}

// envParsed reads an environment variable with parse, remembering a bad
// value in *bad so the command can refuse to start instead of guessing.
func envParsed[T any](name string, fallback T, parse func(string) (T, error), bad *[]string) T {
	v, ok := os.LookupEnv(name)
	if !ok {
		return fallback
	}
	parsed, err := parse(v)
	if err != nil {
		*bad = append(*bad, fmt.Sprintf("%s=%q: %v", name, v, err))
		return fallback
	}
	return parsed
}

func parseInt(s string) (int, error) { return strconv.Atoi(s) }

func parseInt64(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }

// configFlags are the two file flags serve and check-config share.
type configFlags struct {
	defaults  string
	overrides string
}

func (c *configFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.defaults, "defaults", envString("LIMITER_DEFAULTS", "config/defaults.yaml"), "defaults file (env LIMITER_DEFAULTS)")
	fs.StringVar(&c.overrides, "overrides", envString("LIMITER_OVERRIDES", "config/overrides.yaml"), "overrides file; a missing file means no overrides (env LIMITER_OVERRIDES)")
}
