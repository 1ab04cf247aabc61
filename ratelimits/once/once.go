// Package once is what the Limiter and its sources share so that a spend
// or a refund takes effect at most once, and so that a failed call says
// whether it took effect at all.
//
// A client that times out cannot know whether its spend happened: the
// store may have applied it just before the answer was lost. Retrying
// blindly may spend twice; not retrying may lose a refund. With a Record,
// a source keeps the answer of the first call under the client's key, in
// the same atomic step as the decision itself, and answers a retry with
// that first answer instead of deciding again. With ErrNotApplied, a
// source says that a failed call certainly changed nothing, which makes a
// plain retry safe.
//
// The package has no dependencies, so sources may import it without
// importing the Limiter's configuration code.
package once

import "errors"

// ErrNotApplied marks a source failure that certainly changed nothing:
// the call never reached the store (a refused connection, no free
// connection in time, a call abandoned before it was sent), or the store
// refused it whole before deciding. A source wraps an error with it only
// when it knows; a failure without it may or may not have taken effect.
var ErrNotApplied = errors.New("the call was not applied")

// ErrMismatch means a Record's key was already used by another request
// (another operation, other transactions, or the same ones under other
// limits): nothing was decided or written.
var ErrMismatch = errors.New("the idempotency key was used for a different request")

// ErrUnsettled means a Record's key belongs to a call whose outcome is not
// known yet: it is still running, or it failed in a way that may have
// taken effect in part. Nothing was decided or written. Only sources that
// cannot record a batch in one atomic step (a Redis Cluster batch across
// hash slots) answer it.
var ErrUnsettled = errors.New("the first request with this idempotency key has no known outcome")

// Record names where a source remembers the answer of one spend or refund.
type Record struct {
	// Key identifies the call among all the callers of the source; the
	// Limiter's caller scopes it (to a bearer token, say) and bounds its
	// length. A source may hash it.
	Key string
	// Fingerprint identifies the request: the operation, the transactions
	// and the limits they resolved to. A retry must match it exactly.
	Fingerprint string
	// Expires is when the record stops answering (unix nanoseconds on the
	// Limiter's clock): a call at or after it is decided anew.
	Expires int64
}
