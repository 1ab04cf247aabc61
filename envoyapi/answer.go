package envoyapi

import (
	"math"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/limiter-dev/limiter/httpapi/headers"
	"github.com/limiter-dev/limiter/ratelimits"
)

const (
	codeOK        = rlsv3.RateLimitResponse_OK
	codeOverLimit = rlsv3.RateLimitResponse_OVER_LIMIT
)

// Header names as Envoy adds them to the client's response; the values
// are the HTTP API's (headers.For).
const (
	headerPolicy     = "RateLimit-Policy"
	headerRateLimit  = "RateLimit"
	headerRetryAfter = "Retry-After"
	// headerLimitName names the limit that denied an OVER_LIMIT answer
	// (Options.LimitNameHeader), so that a client, or a log of the
	// client's responses, tells which of a request's limits it hit.
	headerLimitName = "x-ratelimit-limit-name"
)

// response holds every message of one answer, so that it is allocated in
// a few pieces rather than one per field. Its slices have one element per
// descriptor (statuses) or per transaction (limits, resets).
type response struct {
	resp     rlsv3.RateLimitResponse
	ptrs     []*rlsv3.RateLimitResponse_DescriptorStatus
	statuses []rlsv3.RateLimitResponse_DescriptorStatus
	limits   []rlsv3.RateLimitResponse_RateLimit
	resets   []durationpb.Duration
	hdrPtrs  [4]*corev3.HeaderValue
	hdrs     [4]corev3.HeaderValue
}

// response1 is a response of one descriptor in one allocation.
type response1 struct {
	response
	ptr    [1]*rlsv3.RateLimitResponse_DescriptorStatus
	status [1]rlsv3.RateLimitResponse_DescriptorStatus
	limit  [1]rlsv3.RateLimitResponse_RateLimit
	reset  [1]durationpb.Duration
}

// newResponse returns the storage of an answer to n descriptors, of which
// matched are limited.
func newResponse(n, matched int) *response {
	if n == 1 {
		r := &response1{}
		r.ptrs, r.statuses, r.limits, r.resets = r.ptr[:], r.status[:], r.limit[:matched], r.reset[:matched]
		return &r.response
	}
	return &response{
		ptrs:     make([]*rlsv3.RateLimitResponse_DescriptorStatus, n),
		statuses: make([]rlsv3.RateLimitResponse_DescriptorStatus, n),
		limits:   make([]rlsv3.RateLimitResponse_RateLimit, matched),
		resets:   make([]durationpb.Duration, matched),
	}
}

// answer is Envoy's response to the request p was built from, of n
// descriptors, given the Limiter's decision of p's batch (nil when nothing
// matched a rule). With nameHeader, an OVER_LIMIT answer also asks Envoy
// to add headerLimitName with the limit that denied it; its descriptor
// is the one whose status is OVER_LIMIT with that current_limit name.
//
// A degraded decision (fail-open) answers every descriptor OK with its
// limit but neither remaining nor reset, which nothing decided, and sends
// no headers. A refund answers OK throughout, each status showing its
// bucket after the refund, and sends no headers either: it limits nothing.
func answer(p *plan, n int, bd *ratelimits.BatchDecision, nameHeader bool) *rlsv3.RateLimitResponse {
	r := newResponse(n, len(p.txns))
	resp := &r.resp
	resp.OverallCode = codeOK
	resp.Statuses = r.ptrs
	spend := bd != nil && !bd.Degraded && !p.refund
	if spend && !bd.Allowed {
		resp.OverallCode = codeOverLimit
	}
	for i := range n {
		st := &r.statuses[i]
		r.ptrs[i] = st
		st.Code = codeOK
		t := p.txnOf[i]
		if t < 0 {
			continue
		}
		d := &bd.Decisions[t]
		if d.Unlimited {
			continue
		}
		if spend && !d.Allowed && !d.Shadow {
			st.Code = codeOverLimit
		}
		lim := &r.limits[t]
		lim.Name = d.Limit
		if d.Effective.Calendar != nil {
			lim.Unit, lim.RequestsPerUnit = calendarLimit(d.Effective.Count, d.Effective.Calendar.Unit())
		} else {
			lim.Unit, lim.RequestsPerUnit = currentLimit(d.Effective.Count, d.Effective.Period)
		}
		st.CurrentLimit = lim
		if bd.Degraded {
			continue
		}
		st.LimitRemaining = saturate32(uint64(max(d.Remaining, 0)))
		reset := &r.resets[t]
		reset.Seconds, reset.Nanos = millisUp(d.ResetIn)
		st.DurationUntilReset = reset
	}
	if spend {
		r.addHeaders(bd, nameHeader)
	}
	return resp
}

// addHeaders asks Envoy to add the HTTP API's RateLimit headers of bd to
// the client's response, when a transaction decides the batch, and with
// nameHeader, when it denies the batch, the name of its limit.
func (r *response) addHeaders(bd *ratelimits.BatchDecision, nameHeader bool) {
	v, ok := headers.For(bd)
	if !ok {
		return
	}
	r.hdrs[0] = corev3.HeaderValue{Key: headerPolicy, Value: v.Policy}
	r.hdrs[1] = corev3.HeaderValue{Key: headerRateLimit, Value: v.RateLimit}
	n := 2
	if v.RetryAfter != "" {
		r.hdrs[2] = corev3.HeaderValue{Key: headerRetryAfter, Value: v.RetryAfter}
		n = 3
		if nameHeader {
			// The deciding transaction of a denied batch is a denied one.
			r.hdrs[3] = corev3.HeaderValue{Key: headerLimitName, Value: bd.Decisions[bd.Deciding].Limit}
			n = 4
		}
	}
	for i := range n {
		r.hdrPtrs[i] = &r.hdrs[i]
	}
	r.resp.ResponseHeadersToAdd = r.hdrPtrs[:n]
}

// millisUp is d rounded up to whole milliseconds, as seconds and nanos: a
// client that waits that long is never early.
func millisUp(d time.Duration) (seconds int64, nanos int32) {
	if d <= 0 {
		return 0, 0
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 && ms < math.MaxInt64 {
		ms++
	}
	return ms / 1000, int32(ms%1000) * int32(time.Millisecond)
}
