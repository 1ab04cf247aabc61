package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// newFlagSet is a subcommand's flag set. Its parse errors go to stderr
// followed by a pointer to --help; the help itself (printHelp) goes
// wherever the caller asks, stdout for --help and `limiter help CMD`.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "run '%s --help' for its flags\n", name)
	}
	return fs
}

// parseFlags parses args with fs; --help (and -h) prints the help of the
// command to stdout and returns flag.ErrHelp, which the command answers
// with exit 0.
func parseFlags(fs *flag.FlagSet, synopsis string, args []string, stdout io.Writer) error {
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	if errors.Is(err, flag.ErrHelp) {
		printHelp(stdout, fs, synopsis)
		return err
	}
	if err != nil {
		fs.Usage()
		return &flagSyntaxError{err}
	}
	return nil
}

// flagSyntaxError is a parse error that the flag package has printed
// already, with the pointer to --help after it.
type flagSyntaxError struct{ err error }

func (e *flagSyntaxError) Error() string { return e.err.Error() }

func (e *flagSyntaxError) Unwrap() error { return e.err }

// isFlagSyntaxError reports whether err was printed when flags were parsed.
func isFlagSyntaxError(err error) bool {
	var fe *flagSyntaxError
	return errors.As(err, &fe)
}

// printHelp prints a command's usage line, what it does, and its flags as
// the documentation writes them: --name, with the kind of value it takes,
// its help and its default.
func printHelp(w io.Writer, fs *flag.FlagSet, synopsis string) {
	flags := ""
	fs.VisitAll(func(*flag.Flag) { flags = " [flags]" })
	fmt.Fprintf(w, "usage: %s%s\n\n%s\n", fs.Name(), flags, synopsis)
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprintf(w, "\nflags (each also read from the environment variable its help names; a flag beats the variable):\n")
			first = false
		}
		kind, help := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if kind != "" {
			line += " " + kind
		}
		fmt.Fprintln(w, line)
		if !isZeroDefault(f.DefValue) {
			if kind == "string" {
				help += fmt.Sprintf(" (default %q)", f.DefValue)
			} else {
				help += " (default " + f.DefValue + ")"
			}
		}
		fmt.Fprintln(w, "        "+strings.ReplaceAll(help, "\n", "\n        "))
	})
}

// isZeroDefault reports whether a flag's default is its type's zero
// value, which the help leaves out.
func isZeroDefault(v string) bool {
	switch v {
	case "", "0", "false", "0s":
		return true
	}
	return false
}
