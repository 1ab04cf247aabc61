package envoyapi_test

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// A limit is spent down, denied with Retry-After, and refilled as the
// fake clock moves on. Every answer carries the HTTP API's RateLimit
// headers of the deciding descriptor, spelled as Envoy adds them.
func TestSpendDenyAndRefillOnTheClock(t *testing.T) {
	h := start(t)
	req := request("edge", desc("user", "bob"))

	checkResponse(t, h.call(req), &rlsv3.RateLimitResponse{
		OverallCode: ok,
		Statuses:    []*rlsv3.RateLimitResponse_DescriptorStatus{limited(ok, "Logins", 3, minute, 2, 20*time.Second)},
		ResponseHeadersToAdd: []*corev3.HeaderValue{
			header("RateLimit-Policy", `"Logins";q=3;w=60`),
			header("RateLimit", `"Logins";r=2;t=20`),
		},
	})
	h.call(req)
	h.call(req)
	checkResponse(t, h.call(req), &rlsv3.RateLimitResponse{
		OverallCode: overLimit,
		Statuses:    []*rlsv3.RateLimitResponse_DescriptorStatus{limited(overLimit, "Logins", 3, minute, 0, time.Minute)},
		ResponseHeadersToAdd: []*corev3.HeaderValue{
			header("RateLimit-Policy", `"Logins";q=3;w=60`),
			header("RateLimit", `"Logins";r=0;t=60`),
			header("Retry-After", "20"),
		},
	})

	h.clock.Add(19 * time.Second)
	checkStatuses(t, h.call(req), overLimit, limited(overLimit, "Logins", 3, minute, 0, 41*time.Second))
	h.clock.Add(time.Second)
	checkStatuses(t, h.call(req), ok, limited(ok, "Logins", 3, minute, 0, time.Minute))
	h.clock.Add(time.Minute)
	checkStatuses(t, h.call(req), ok, limited(ok, "Logins", 3, minute, 2, 20*time.Second))
}

// current_limit shows each period as Envoy can (an exact unit, or the
// documented approximation), and duration_until_reset is rounded up to
// whole milliseconds.
func TestCurrentLimitAndResetInAnswers(t *testing.T) {
	h := start(t)
	resp := h.call(request("edge",
		desc("account", "42"),
		desc("odd", "o"),
		desc("thirds", "t"),
		desc("remote_address", "192.0.2.1"),
	))
	checkStatuses(t, resp, ok,
		limited(ok, "Daily", 100, day, 99, 864*time.Second),
		limited(ok, "Odd", 80, hour, 1, 45*time.Second),           // 2 per 90s: 80 an hour
		limited(ok, "Thirds", 3, second, 2, 334*time.Millisecond), // 333.333333ms, rounded up
		limited(ok, "Clients", 5, second, 4, 200*time.Millisecond),
	)
	// The deciding descriptor is the one with the fewest tokens left.
	want := []*corev3.HeaderValue{header("RateLimit-Policy", `"Odd";q=2;w=90`), header("RateLimit", `"Odd";r=1;t=45`)}
	checkResponse(t, &rlsv3.RateLimitResponse{ResponseHeadersToAdd: resp.GetResponseHeadersToAdd()}, &rlsv3.RateLimitResponse{ResponseHeadersToAdd: want})
}

// A shadow limit is decided and counted but never denies: its status is
// OK even when its own decision is a denial, it never decides the answer
// (nor its headers), and its would-be denials are counted.
func TestShadowLimitsNeverDeny(t *testing.T) {
	h := start(t)
	req := request("edge", desc("watched", "w"))
	checkResponse(t, h.call(req), &rlsv3.RateLimitResponse{OverallCode: ok, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
		limited(ok, "Watched", 1, minute, 0, time.Minute),
	}})
	checkResponse(t, h.call(req), &rlsv3.RateLimitResponse{OverallCode: ok, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
		limited(ok, "Watched", 1, minute, 0, time.Minute), // denied for itself
	}})
	if got := metricValue(t, h.reg, "limiter_shadow_denials_total", map[string]string{"op": "spend", "limit": "Watched"}); got != 1 {
		t.Errorf("limiter_shadow_denials_total{op=spend,limit=Watched} = %v, want 1", got)
	}
	if got := metricValue(t, h.reg, "limiter_decisions_total", map[string]string{"op": "spend", "limit": "Watched", "outcome": "shadow_denied"}); got != 1 {
		t.Errorf("limiter_decisions_total{outcome=shadow_denied} = %v, want 1", got)
	}

	// Beside a real limit, the real one decides, and a denied batch
	// writes nothing to the shadow limit either.
	h.clock.Add(time.Minute)
	h.call(request("edge", withHits(desc("user", "bob"), 3)))
	resp := h.call(request("edge", desc("watched", "w"), desc("user", "bob")))
	checkStatuses(t, resp, overLimit,
		limited(ok, "Watched", 1, minute, 0, time.Minute),
		limited(overLimit, "Logins", 3, minute, 0, time.Minute),
	)
	if got := h.remaining("Watched", "w"); got != 1 {
		t.Errorf("Watched w: %d remaining after a denied batch, want 1", got)
	}
}

// With LimitNameHeader, an OVER_LIMIT answer names the limit that denied
// it in x-ratelimit-limit-name, and its descriptor is the one whose status
// is OVER_LIMIT with that current_limit name; an OK answer has no such
// header, and without the option no answer has.
func TestLimitNameHeader(t *testing.T) {
	nameOf := func(resp *rlsv3.RateLimitResponse) (string, bool) {
		for _, h := range resp.GetResponseHeadersToAdd() {
			if h.GetKey() == "x-ratelimit-limit-name" {
				return h.GetValue(), true
			}
		}
		return "", false
	}
	h := start(t, func(su *setup) { su.opts.LimitNameHeader = true })
	// Clients has 5 a second, Logins 3 a minute: the fourth request is
	// denied by Logins alone, the second descriptor.
	req := request("edge", desc("remote_address", "192.0.2.1"), desc("user", "bob"))
	for i := range 3 {
		resp := h.call(req)
		if name, found := nameOf(resp); found || resp.GetOverallCode() != ok {
			t.Fatalf("call %d: %v with header %q", i+1, resp.GetOverallCode(), name)
		}
	}
	resp := h.call(req)
	checkStatuses(t, resp, overLimit,
		limited(ok, "Clients", 5, second, 1, 800*time.Millisecond),
		limited(overLimit, "Logins", 3, minute, 0, time.Minute))
	if name, found := nameOf(resp); name != "Logins" {
		t.Fatalf("x-ratelimit-limit-name %q (present %v), want Logins", name, found)
	}

	off := start(t)
	offReq := request("edge", desc("user", "carol"))
	for range 4 {
		if name, found := nameOf(off.call(offReq)); found {
			t.Fatalf("x-ratelimit-limit-name %q without the option", name)
		}
	}
}
