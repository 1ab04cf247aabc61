package ratelimits

import "errors"

// ErrInvalidID is wrapped by every error about a transaction or override id
// that does not fit its limit's id kind. Callers test for it with errors.Is
// to answer a client error (400) rather than a server error.
var ErrInvalidID = errors.New("invalid id")

// ErrInvalidLimit is wrapped by every error from NewLimit: burst, count or
// period out of range, or a limit whose GCRA arithmetic would break (an
// emission interval of 0, or a burst offset that overflows int64).
var ErrInvalidLimit = errors.New("invalid limit")

// ErrInvalidConfig is wrapped by every error of NewConfig, and a bad
// configuration file's error unwraps to it, so that callers can tell a bad
// configuration from an I/O error with errors.Is.
var ErrInvalidConfig = errors.New("invalid configuration")

// ErrInvalidArgument is wrapped by every refusal of an ERL call's value
// out of its range: a window, limit, delta or ttl.
var ErrInvalidArgument = errors.New("invalid argument")

// ErrNoBox refuses an ERL call that names as a penalty box a limit that has
// none (neither a rate counter nor a penalty).
var ErrNoBox = errors.New("limit has no penalty box")

// ErrNotRateCounter refuses an ERL call that names as a rate counter a
// limit that is not one.
var ErrNotRateCounter = errors.New("limit is not a rate counter")
