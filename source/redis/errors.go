package redis

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/limiter-dev/limiter/ratelimits/once"
)

var (
	// ErrBadReply means Redis answered the script with something it never
	// returns: another program wrote under this source's key prefix, or
	// the script and this code are out of step.
	ErrBadReply = errors.New("redis source: unexpected reply from the bucket script")

	// ErrVerdictMismatch means the script and the bucket functions (gcra,
	// window) decided a batch differently from the same states read. It
	// would be a bug in the script; the batch's answer is not trusted.
	ErrVerdictMismatch = errors.New("redis source: the bucket script and the bucket functions disagree on a batch")

	// ErrInvalidOp means an op, an ERL call or a sync push broke the
	// Source contract (a GCRA op's non-positive emission interval,
	// negative cost or burst offset, or a cost whose increment overflows
	// int64; a window op's count, period or cost out of range; a rate op
	// without a box, or with a window, rate or cost out of range; a call
	// of more than two counters, or of a counter twice; a push's period,
	// window start or hits out of range), or, in key format v2, its bucket
	// key is empty; or, on a cluster, an op's box entry is of another id,
	// in another slot; or an idempotent batch has a box: nothing is sent
	// to Redis. It wraps once.ErrNotApplied, since such a call certainly
	// changed nothing: a caller may say so rather than "outcome unknown".
	ErrInvalidOp error = &refusedError{"redis source: invalid op"}
)

// refusedError is a refusal made before anything is sent: it wraps
// once.ErrNotApplied without adding to its message.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

func (e *refusedError) Unwrap() error { return once.ErrNotApplied }

// isNoScript reports Redis's answer to a script call by SHA-1 that it does
// not have loaded (it restarted, or its script cache was flushed): nothing
// of that call ran.
func isNoScript(err error) bool {
	return errors.Is(err, goredis.ErrNoScript) || goredis.HasErrorPrefix(err, "NOSCRIPT")
}

// isRedirect reports a cluster error that the cluster client handles by
// itself (following MOVED and ASK, waiting out TRYAGAIN and CLUSTERDOWN,
// reloading the slot map): a call sent to the node that owned its slot a
// moment ago. ErrClosed is here too, since the cluster client closes the
// clients of nodes that left, and so are Redis's refusals of a packed
// call's batch (isScriptKeyRefused).
func isRedirect(err error) bool {
	if _, moved := goredis.IsMovedError(err); moved {
		return true
	}
	if _, ask := goredis.IsAskError(err); ask {
		return true
	}
	return errors.Is(err, goredis.ErrClosed) || goredis.IsTryAgainError(err) ||
		goredis.IsClusterDownError(err) || isScriptKeyRefused(err)
}

// Parts of the errors Redis raises inside a script for a command on a key
// the node will not serve: of a slot it does not serve (Redis 7.0's words,
// then later versions'), or any key while it sees the cluster down. These
// come as a script error ("ERR ..."), for which go-redis has no helper.
var scriptKeyRefusals = []string{
	"non local key",
	"slot not served",
	"while the cluster is down",
}

// isScriptKeyRefused reports Redis's refusal of a command a script ran on
// an undeclared key (a packed call's batch, pack.go): the same call with
// its key declared would have been answered MOVED, ASK or CLUSTERDOWN
// before running.
func isScriptKeyRefused(err error) bool {
	var replyErr goredis.Error
	if !errors.As(err, &replyErr) {
		return false
	}
	msg := replyErr.Error()
	for _, part := range scriptKeyRefusals {
		if strings.Contains(msg, part) {
			return true
		}
	}
	return false
}

// notApplied marks err as a failure that changed nothing.
func notApplied(err error) error {
	return fmt.Errorf("%w: %w", once.ErrNotApplied, err)
}

// classify marks with once.ErrNotApplied the errors of a call that cannot
// have run its script: no connection could be made or had (a refused
// dial, a full pool, a closed client, a TLS handshake that failed
// verification), or Redis answered with an error, which the bucket script
// only raises before it writes (and Redis refuses a script whole, or
// before its first write, for NOSCRIPT, OOM, BUSY, MOVED and the like). A
// timeout or a broken connection after sending says nothing of the kind:
// the script may have run, and err is returned as it is.
func classify(err error) error {
	if err == nil || errors.Is(err, once.ErrNotApplied) {
		return err
	}
	var opErr *net.OpError
	var replyErr goredis.Error
	var certErr *tls.CertificateVerificationError
	var authorityErr x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalidErr x509.CertificateInvalidError
	switch {
	case errors.As(err, &opErr) && opErr.Op == "dial",
		// A TLS handshake that fails verification sends no command.
		errors.As(err, &certErr), errors.As(err, &authorityErr), errors.As(err, &hostErr), errors.As(err, &invalidErr),
		errors.Is(err, goredis.ErrPoolTimeout), errors.Is(err, goredis.ErrPoolExhausted), errors.Is(err, goredis.ErrClosed),
		errors.As(err, &replyErr) && !errors.Is(err, goredis.Nil):
		return notApplied(err)
	}
	return err
}
