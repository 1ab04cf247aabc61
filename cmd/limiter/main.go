// Command limiter is the rate-limit service: `limiter serve` answers the
// HTTP API (and, with --grpc-listen, Envoy's rate-limit service), `limiter
// check-config` validates configuration files, and `limiter version` says
// which build this is.
package main

import (
	"fmt"
	"io"
	"os"
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
		return serve(args[1:], stdout, stderr)
	case "check-config":
		return checkConfig(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		return printVersion(args[1:], stdout, stderr)
	case "help", "--help", "-h", "-help":
		return help(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "limiter: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// help is `limiter help [COMMAND]`: the list of commands, or a command's
// own help, as COMMAND --help prints it.
func help(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		usage(stdout)
		return 0
	case len(args) > 1:
		fmt.Fprintln(stderr, "usage: limiter help [command]")
		return 2
	}
	switch args[0] {
	case "serve", "check-config", "version":
		return run([]string{args[0], "--help"}, stdout, stderr)
	}
	fmt.Fprintf(stderr, "limiter help: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: limiter <command> [flags]

commands:
  serve          run the HTTP service, and Envoy's rate-limit service with --grpc-listen (limiter serve --help for flags)
  check-config   validate the defaults, overrides, descriptors and forward-auth files, print every problem
  version        print the version
  help COMMAND   print a command's flags (the same as limiter COMMAND --help)
`)
}
