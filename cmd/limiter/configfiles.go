package main

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/envoyapi/descriptors"
	"github.com/limiter-dev/limiter/forwardauth"
	"github.com/limiter-dev/limiter/ratelimits"
)

// fileRole is one of the four configuration files.
type fileRole int

const (
	defaultsFile fileRole = iota
	overridesFile
	descriptorsFile
	forwardAuthFile
	fileRoles
)

// flag is the flag that names the file, which is also its name in logs.
func (r fileRole) flag() string {
	switch r {
	case defaultsFile:
		return "defaults"
	case overridesFile:
		return "overrides"
	case descriptorsFile:
		return "descriptors"
	}
	return "forward-auth"
}

// emptyForm is the file's explicit empty form, which removes every rule.
func (r fileRole) emptyForm() string {
	if r == forwardAuthFile {
		return "{} (or [])"
	}
	return "[]"
}

// loadedConfig is what one load of the configuration files gave: the
// limits, both rule sets, and what was found at each path.
type loadedConfig struct {
	cfg   *ratelimits.Config
	rules *descriptors.Rules
	fwd   *forwardauth.Rules
	// paths are the files' paths as configured (relative ones are read
	// from the working directory).
	paths [fileRoles]string
	// inUse is each file's presence where its content went into use, and
	// Absent for a loose rules file left out: what the next reload holds
	// a file to (see missingOrBlank).
	inUse [fileRoles]configfile.Presence
	// skipped is the first problem of a loose rules file left out.
	skipped [fileRoles]string
}

// missingFile is a file that must exist and does not: the defaults file,
// or any file a flag or the environment names. The process is then
// started wrong (a mistyped path, another working directory), which
// serve reports as a usage error (exit 2) rather than starting with
// nothing.
type missingFile struct {
	role  fileRole
	path  string
	named bool
}

func (e *missingFile) Error() string {
	where := "named by --" + e.role.flag() + " or " + envName(e.role.flag())
	if !e.named {
		where = "the default path"
	}
	msg := fmt.Sprintf("%s: no such file (%s", e.path, where)
	if !filepath.IsAbs(e.path) {
		if abs, err := filepath.Abs(e.path); err == nil {
			msg += ", read as " + abs
		}
	}
	return msg + ")"
}

// load reads and parses the four files, each once, as serve's start, every
// reload and check-config do. running is the configuration in use (nil at
// the start); last is the load that put it in use (nil at the start),
// whose files must not have gone missing or blank since (missingOrBlank).
// The error joins every problem of every file: *missingFile,
// *configfile.Error, and read errors.
func (c *configFlags) load(running *ratelimits.Config, last *loadedConfig) (*loadedConfig, error) {
	l := &loadedConfig{paths: c.paths()}
	var (
		files [fileRoles]configfile.File
		bad   [fileRoles]bool // not to be parsed: the file's problem is reported
		errs  []error
	)
	read := configfile.ReadFile
	if running != nil {
		// A reload holds the reloader's lock, and a FIFO at a path would
		// hold the read, and every reload after it, for good.
		read = configfile.ReadRegularFile
	}
	for role := range fileRoles {
		f, err := read(l.paths[role])
		files[role] = f
		switch {
		case err != nil:
		case last != nil && last.inUse[role] == configfile.Written && f.Presence != configfile.Written:
			err = missingOrBlank(role, f)
		case f.Presence == configfile.Absent && l.paths[role] != "" && (role == defaultsFile || c.named[role]):
			err = &missingFile{role: role, path: f.Path, named: c.named[role]}
		}
		if err != nil {
			errs = append(errs, err)
			bad[role] = true
		}
	}
	// Every file that could be read is parsed, so that one run reports
	// the problems of all of them.
	d, o := files[defaultsFile], files[overridesFile]
	switch {
	case !bad[defaultsFile] && !bad[overridesFile]:
		cfg, err := configfile.ParseReload(running, d.Path, d.Data, o.Path, o.Data)
		if err != nil {
			errs = append(errs, err)
		}
		l.cfg = cfg
		l.inUse[defaultsFile], l.inUse[overridesFile] = d.Presence, o.Presence
	case !bad[defaultsFile]:
		// The overrides file has a problem of its own; the defaults file
		// is still checked, with no overrides, for its problems only.
		if _, err := configfile.ParseReload(running, d.Path, d.Data, "", nil); err != nil {
			errs = append(errs, err)
		}
	}
	// The rules must name limits of the new files; if those did not load,
	// the rules are still checked for the rest (cfg is nil).
	for _, role := range []fileRole{descriptorsFile, forwardAuthFile} {
		if bad[role] {
			continue
		}
		// A loose file whose rules are in use must load like a named one:
		// leaving it out now would drop rules that serve.
		loose := c.loose[role] && (last == nil || last.inUse[role] == configfile.Absent)
		var err error
		if role == descriptorsFile {
			l.rules, err = parseRules(l, loose, files[role], role, l.cfg, configfile.ParseDescriptors)
		} else {
			l.fwd, err = parseRules(l, loose, files[role], role, l.cfg, configfile.ParseForwardAuth)
			if err == nil && last != nil && last.fwd.Count() > 0 && configfile.ForwardAuthOmitsRules(files[role].Data) {
				err = omitsRules(files[role])
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return l, errors.Join(errs...)
	}
	return l, nil
}

// parseRules parses a rules file with parse, against cfg. A loose file
// (see configFlags.resolve) that does not parse is left out: its rules
// are then the zero value, and its first problem is kept for a warning.
func parseRules[T any](l *loadedConfig, loose bool, f configfile.File, role fileRole, cfg *ratelimits.Config, parse func(string, []byte, *ratelimits.Config) (T, error)) (T, error) {
	rules, err := parse(f.Path, f.Data, cfg)
	if err != nil && loose {
		var none T
		l.skipped[role], _, _ = strings.Cut(err.Error(), "\n")
		return none, nil
	}
	l.inUse[role] = f.Presence
	return rules, err
}

// missingOrBlank is the problem of a file whose content is in use and
// that a reload finds gone or blank: the reload keeps what is in use, and
// says how to remove every rule on purpose, where a file can say that.
func missingOrBlank(role fileRole, f configfile.File) error {
	found := "is gone"
	if f.Presence == configfile.Blank {
		found = "is empty or null (no YAML document, or only null: a write caught half-way, an unset template value, or emptied by mistake?)"
	}
	remedy := "to remove all of it, write its empty form " + role.emptyForm()
	if role == defaultsFile {
		remedy = "the defaults file declares at least one limit, so it has no empty form"
	}
	return &configfile.Error{Problems: []configfile.Problem{{File: f.Path, Message: fmt.Sprintf(
		"the %s file %s; it was loaded before, so what it gave stays in use; %s", role.flag(), found, remedy)}}}
}

// omitsRules is the problem of a forward-auth file whose rules are in use
// and that a reload finds with no rules key, or rules left null: a file
// cut short after trusted_proxies, more likely than a wish to remove every
// rule, which "rules: {}" says.
func omitsRules(f configfile.File) error {
	return &configfile.Error{Problems: []configfile.Problem{{File: f.Path, Message: "the forward-auth file has no rules (rules is missing or null) while its rules are in use, so they stay; to remove all of them, write rules: {}"}}}
}

// counts says, per file, how many rules the load took from it: limits
// with defaults, overrides (one per id), descriptor rules, forward-auth
// rules; "none" for a file not read (absent, or a loose file left out).
func (l *loadedConfig) counts() [fileRoles]string {
	var out [fileRoles]string
	limited, overrides := 0, 0
	for _, n := range l.cfg.Names() {
		if _, ok := l.cfg.Default(n.Name); ok {
			limited++
		}
		overrides += l.cfg.OverrideCount(n.Name)
	}
	n := [fileRoles]int{limited, overrides, l.rules.Count(), l.fwd.Count()}
	for role := range fileRoles {
		out[role] = "none"
		if l.inUse[role] != configfile.Absent {
			out[role] = strconv.Itoa(n[role])
		}
	}
	return out
}

// logFiles logs, once serving starts, what was loaded from where: a line
// per file with its absolute path and the number of rules it gave, so
// that a path that points somewhere unexpected (a relative path read from
// another working directory) is plain from the log.
func (l *loadedConfig) logFiles(log *slog.Logger) {
	counts := l.counts()
	for role := range fileRoles {
		path := l.paths[role]
		if path == "" {
			log.Info("config file not read", "file", role.flag(), "reason", "no --grpc-listen: no Envoy service to use its rules")
			continue
		}
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		attrs := []any{"file", role.flag(), "path", path, "rules", counts[role]}
		switch {
		case l.skipped[role] != "":
			log.Warn("config file not used: it does not fit the limit files given; name one with --"+role.flag(), append(attrs, "problem", l.skipped[role])...)
		case l.inUse[role] == configfile.Absent:
			log.Info("config file absent: no rules from it", attrs...)
		default:
			log.Info("config file loaded", attrs...)
		}
	}
}

// problemLines lists every problem of a failed load, one line each:
// every problem of a *configfile.Error, and any other error as it is.
func problemLines(err error) []string {
	if err == nil {
		return nil
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var lines []string
		for _, e := range joined.Unwrap() {
			lines = append(lines, problemLines(e)...)
		}
		return lines
	}
	var ce *configfile.Error
	if !errors.As(err, &ce) {
		return []string{err.Error()}
	}
	lines := make([]string, len(ce.Problems))
	for i, p := range ce.Problems {
		lines[i] = p.String()
	}
	return lines
}
