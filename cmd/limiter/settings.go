package main

import (
	"errors"
	"flag"
	"os"
	"strings"
)

// errBadSetting marks a flag or environment value serve refuses to start
// with; the message names each one at fault with its value.
var errBadSetting = errors.New("bad setting")

// settings tells, after parsing, where each flag's value came from: the
// command line, the flag's environment variable, or the built-in default.
// Messages about a value then name what the operator actually wrote.
type settings struct {
	fs       *flag.FlagSet
	table    []setting
	explicit map[string]bool // flags given on the command line
}

func newSettings(fs *flag.FlagSet, table []setting) settings {
	s := settings{fs: fs, table: table, explicit: map[string]bool{}}
	fs.Visit(func(f *flag.Flag) { s.explicit[f.Name] = true })
	return s
}

// envName is the environment variable a flag falls back to: --max-buckets
// reads LIMITER_MAX_BUCKETS.
func envName(flagName string) string {
	return "LIMITER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// fromEnv reports whether a flag's value came from its environment
// variable: the variable is set to something and the flag was not given.
func (s settings) fromEnv(name string) bool {
	return !s.explicit[name] && os.Getenv(envName(name)) != ""
}

// given reports whether a flag's value came from the command line or its
// environment variable rather than its built-in default.
func (s settings) given(name string) bool {
	return s.explicit[name] || s.fromEnv(name)
}

// describe names a flag with its value as given: "--max-batch=0", or
// "LIMITER_MAX_BATCH=0 (--max-batch)" when the environment gave it.
func (s settings) describe(name string) string {
	if s.fromEnv(name) {
		return envName(name) + "=" + os.Getenv(envName(name)) + " (--" + name + ")"
	}
	return "--" + name + "=" + s.fs.Lookup(name).Value.String()
}

// check returns an error naming every flag whose value fails its check,
// with its value, and nothing else: a message never lists flags that are
// fine. A Redis setting is checked only with a Redis source (with another
// it is unused, which sourceMismatch reports whatever its value), and its
// problems are listed after the others.
func (s settings) check(kind string) error {
	var problems []string
	for _, redisPass := range []bool{false, true} {
		for _, row := range s.table {
			if row.check.ok == nil || (row.scope == redisOnly) != redisPass || redisPass && !isRedisKind(kind) {
				continue
			}
			if !row.check.ok() {
				problems = append(problems, s.describe(row.name)+": "+row.check.want)
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return &settingError{problems: problems}
}

// settingError lists the values at fault, one clause each.
type settingError struct{ problems []string }

func (e *settingError) Error() string { return strings.Join(e.problems, "; ") }

func (e *settingError) Unwrap() error { return errBadSetting }

// sourceMismatch handles settings that do not apply to the chosen source:
// the Redis flags with the memory source, and --max-buckets with a Redis
// one. A flag on the command line is an error, since whoever typed it
// expects it to do something, and starting without it would hide the
// mistake. An environment variable is only a warning: environments are
// often shared (one set of LIMITER_REDIS_* for every process of a
// deployment, some of which run on memory), and refusing to start there
// would punish a setting that is merely unused. Password values are never
// repeated: the messages name the flag or variable alone. An unknown
// source is openSource's error, not this one's.
func (s settings) sourceMismatch(kind string) (warnings []string, err error) {
	if kind != "memory" && !isRedisKind(kind) {
		return nil, nil
	}
	scopes := make(map[string]scope, len(s.table))
	for _, row := range s.table {
		scopes[row.name] = row.scope
	}
	var wrong []string
	s.fs.VisitAll(func(f *flag.Flag) {
		sc := scopes[f.Name]
		if sc.appliesTo(kind) {
			return
		}
		applies := "applies only to a Redis source, and --source is " + kind
		if sc == memoryOnly {
			applies = "applies only to the memory source, and --source is " + kind
		}
		switch {
		case s.explicit[f.Name]:
			wrong = append(wrong, "--"+f.Name+" "+applies)
		case s.fromEnv(f.Name):
			warnings = append(warnings, envName(f.Name)+" is set but ignored: it "+applies)
		}
	})
	if len(wrong) > 0 {
		return warnings, &settingError{problems: wrong}
	}
	return warnings, nil
}

// isRedisKind reports whether a source kind (sourceKind) is one of Redis's.
func isRedisKind(kind string) bool {
	switch kind {
	case "redis", "rediss", "redis-cluster", "rediss-cluster":
		return true
	}
	return false
}
