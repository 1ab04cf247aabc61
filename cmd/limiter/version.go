package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); builds
// without it report what the Go toolchain recorded (see versionFrom).
var version = ""

// printVersion is `limiter version`. It takes no arguments and no flags
// but --help.
func printVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("limiter version", stderr)
	if err := parseFlags(fs, "Prints the version of this binary: its module version, or the commit it was\nbuilt from.", args, stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "limiter version: unexpected arguments:", strings.Join(fs.Args(), " "))
		return 2
	}
	fmt.Fprintln(stdout, "limiter", buildVersion())
	return 0
}

// buildVersion says which build this is, for `limiter version` and the
// start-up log line.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return versionFrom(version, info)
}

// versionFrom is the version string of a build: the link-time version, or
// the module version the Go toolchain recorded (a tag, or a pseudo-version
// made from the commit), or "dev"; followed by the commit the binary was
// built from when the toolchain stamped it. `go build` in a git checkout
// stamps the commit; `go run`, `go test` and -buildvcs=false do not, and
// the string says so, so that "dev" alone never hides where a binary came
// from.
func versionFrom(linked string, info *debug.BuildInfo) string {
	v := linked
	if v == "" && info != nil && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = info.Main.Version
	}
	if v == "" {
		v = "dev"
	}
	if info == nil {
		return v
	}
	var revision, at string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision == "" {
		if linked == "" && v == "dev" {
			return v + " (no commit recorded: built by go run, or with -buildvcs=false)"
		}
		return v
	}
	details := []string{"commit " + shortRevision(revision)}
	if at != "" {
		details = append(details, at)
	}
	if modified {
		details = append(details, "with uncommitted changes")
	}
	return v + " (" + strings.Join(details, ", ") + ")"
}

// shortRevision cuts a commit hash to the 12 characters Go's
// pseudo-versions use.
func shortRevision(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
