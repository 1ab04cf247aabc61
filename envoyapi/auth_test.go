package envoyapi_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/limiter-dev/limiter/bearer"
)

// With API tokens configured, ShouldRateLimit needs an API or admin token
// as "authorization: Bearer <token>" metadata; anything else is
// UNAUTHENTICATED and spends nothing.
func TestTokens(t *testing.T) {
	tokens := bearer.NewTokens([][]byte{[]byte("api-token")}, [][]byte{[]byte("admin-token")})
	h := start(t, func(s *setup) { s.opts.Tokens = tokens })
	req := request("edge", desc("user", "bob"))
	for _, tc := range []struct {
		name          string
		authorization []string // metadata values; none when empty
		want          codes.Code
	}{
		{"no token", nil, codes.Unauthenticated},
		{"a wrong token", []string{"Bearer nope"}, codes.Unauthenticated},
		{"an empty token", []string{"Bearer "}, codes.Unauthenticated},
		{"another scheme", []string{"Basic api-token"}, codes.Unauthenticated},
		{"the token without a scheme", []string{"api-token"}, codes.Unauthenticated},
		{"a wrong token first", []string{"Bearer nope", "Bearer api-token"}, codes.Unauthenticated},
		{"an API token", []string{"Bearer api-token"}, codes.OK},
		{"the scheme in any case", []string{"bearer api-token"}, codes.OK},
		{"an admin token", []string{"Bearer admin-token"}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.remaining("Logins", "bob")
			ctx := context.Background()
			for _, v := range tc.authorization {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", v)
			}
			_, err := h.client.ShouldRateLimit(ctx, req)
			if status.Code(err) != tc.want {
				t.Fatalf("code %v (%v), want %v", status.Code(err), err, tc.want)
			}
			spent := before - h.remaining("Logins", "bob")
			if wantSpent := map[bool]int64{true: 1, false: 0}[tc.want == codes.OK]; spent != wantSpent {
				t.Errorf("%d spent, want %d", spent, wantSpent)
			}
		})
		h.clock.Add(time.Hour) // a full bucket for the next case
	}
	if got := metricValue(t, h.reg, "limiter_grpc_request_duration_seconds", map[string]string{
		"method": "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", "code": "Unauthenticated"}); got != 6 {
		t.Errorf("%v calls counted Unauthenticated, want 6", got)
	}
}

// Without API tokens (none at all, or admin tokens alone, as in the HTTP
// API) no token is needed.
func TestNoTokenNeeded(t *testing.T) {
	for name, tokens := range map[string]*bearer.Tokens{
		"no token set":      nil,
		"empty sets":        bearer.NewTokens(nil, nil),
		"admin tokens only": bearer.NewTokens(nil, [][]byte{[]byte("admin-token")}),
	} {
		t.Run(name, func(t *testing.T) {
			h := start(t, func(s *setup) { s.opts.Tokens = tokens })
			h.call(request("edge", desc("user", "bob")))
		})
	}
}
