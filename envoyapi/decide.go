package envoyapi

import (
	"context"
	"errors"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/limiter-dev/limiter/ratelimits"
)

// shouldRateLimit matches req's descriptors, asks the Limiter once for the
// whole batch of the limited ones (a spend, or a refund when they all have
// is_negative_hits) and answers.
func (s *Server) shouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	var txn1 [1]ratelimits.Transaction
	var txnOf1 [1]int
	n := len(req.GetDescriptors())
	var (
		p  plan
		op string
		bd *ratelimits.BatchDecision
	)
	for attempt := 0; ; attempt++ {
		var err error
		if p, err = buildPlan(req, s.rules.Load(), s.maxDescriptors, &txn1, &txnOf1); err != nil {
			return nil, err
		}
		if len(p.txns) == 0 {
			return answer(&p, n, nil, false), nil // nothing is limited
		}
		op, bd, err = s.ask(ctx, &p)
		if errors.Is(err, ratelimits.ErrUnknownLimit) && attempt == 0 {
			// A reload swaps the rules and the limits one after the
			// other; a call between the two can meet a rule naming a
			// limit the configuration it read does not have yet (or any
			// more). Once more, on what is in use now, before calling it
			// an error.
			continue
		}
		if err != nil {
			return nil, s.failure(ctx, &p, err)
		}
		break
	}
	if bd.Degraded {
		if clientGone(ctx, bd.Cause) {
			s.clientCancelled(bd.Cause)
			return nil, status.Error(codes.Canceled, msgCancelled)
		}
		s.decisions.Degraded()
		s.log.Warn("source failed; answering OK (fail-open)", "method", methodShouldRateLimit, "err", bd.Cause)
	}
	s.decisions.CountDecisions(op, bd)
	return answer(&p, n, bd, s.limitNameHeader), nil
}

// ask hands the plan's transactions to the Limiter: a refund when they
// give their hits back, a spend otherwise. op names it for the metrics.
func (s *Server) ask(ctx context.Context, p *plan) (op string, bd *ratelimits.BatchDecision, err error) {
	if p.refund {
		bd, err = s.limiter.Refund(ctx, p.txns)
		return "refund", bd, err
	}
	bd, err = s.limiter.Spend(ctx, p.txns)
	return "spend", bd, err
}
