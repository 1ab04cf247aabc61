package envoyapi

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/limiter-dev/limiter/ratelimits"
)

// Messages of the failures that are not the client's.
const (
	msgCancelled   = "the call was cancelled while the bucket source was asked"
	msgNotApplied  = "the bucket source could not be reached; nothing was decided or spent"
	msgUnknownDone = "the bucket source did not answer in time; the hits may or may not have been counted"
	msgInternal    = "internal error"
)

// failure answers an error of the Limiter for the request p was built
// from. The client's mistakes are INVALID_ARGUMENT, naming the descriptor;
// a source failure is UNAVAILABLE, logged and counted; a client that went
// away while the source was asked is CANCELED and neither. Anything else
// cannot come from what a client sends: it is INTERNAL, and logged.
func (s *Server) failure(ctx context.Context, p *plan, err error) error {
	if clientGone(ctx, err) {
		s.clientCancelled(err)
		return status.Error(codes.Canceled, msgCancelled)
	}
	if errors.Is(err, ratelimits.ErrSourceUnavailable) {
		s.decisions.SourceError()
		s.log.Error("source failed", "method", methodShouldRateLimit, "err", err)
		if errors.Is(err, ratelimits.ErrNotApplied) {
			return status.Error(codes.Unavailable, msgNotApplied)
		}
		return status.Error(codes.Unavailable, msgUnknownDone)
	}
	var te *ratelimits.TransactionError
	if errors.As(err, &te) && clientFault(te.Err) {
		return p.errorAt(te.Index, te.Err)
	}
	if errors.Is(err, ratelimits.ErrUnknownLimit) {
		// The rules name a limit the limit files do not have: the rules
		// file and the limit files disagree, which is the operator's to
		// fix, not the client's.
		s.log.Error("a descriptor rule names a limit the configuration does not have", "method", methodShouldRateLimit, "err", err)
		return status.Error(codes.Internal, msgInternal)
	}
	s.log.Error("unexpected error from the limiter", "method", methodShouldRateLimit, "err", err)
	return status.Error(codes.Internal, msgInternal)
}

// clientFault reports whether a refused transaction was refused for what
// the client sent: its id (the descriptor's values), its cost (the hits),
// or a bucket another descriptor of the request also maps to.
func clientFault(err error) bool {
	return errors.Is(err, ratelimits.ErrInvalidID) || errors.Is(err, ratelimits.ErrInvalidCost) ||
		errors.Is(err, ratelimits.ErrDuplicateBucket)
}

// clientGone reports whether err is the call's own cancellation: the
// client cancelled, and the source call ended because of it. A source
// timeout is a deadline, not a cancellation, so it stays a source failure.
func clientGone(ctx context.Context, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(ctx.Err(), context.Canceled)
}

// clientCancelled records a call its client abandoned. The source did not
// fail, so it is neither a source error nor worth more than a debug line.
func (s *Server) clientCancelled(err error) {
	s.decisions.ClientCancelled()
	s.log.Debug("client went away before the answer", "method", methodShouldRateLimit, "err", err)
}
