// Package envoyapi serves Envoy's rate-limit service over gRPC:
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, as Envoy's
// rate_limit_service filter calls it, beside grpc.health.v1.Health and
// server reflection. It turns a request into the same transactions and the
// same Limiter call as the HTTP API, and knows neither an algorithm nor a
// source.
//
// # From descriptors to transactions
//
// Each descriptor of a request is matched against the rules of the
// request's domain (descriptors.Rules): a rule matches when the keys of the
// descriptor's entries are exactly its keys, in order, and the first
// matching rule names the limit. The subscriber id is the value of a
// descriptor of one entry, as it is; the values of several entries are
// joined with ':' as they are (descriptors.JoinValues). The limit's id
// kind then validates and canonicalises the id. A descriptor no rule
// matches, one without entries, and every descriptor of a domain without
// rules are unlimited: their status is OK, without current_limit.
//
// The matched descriptors of one request are one batch, decided atomically
// (check-and-spend) as an HTTP batch is: either every one of them is spent
// or none is. A descriptor's cost is its own hits_addend when it sets one,
// otherwise the request's hits_addend; 0 means 1 in both, as in Envoy.
// When every matched descriptor has is_negative_hits, their costs are
// given back instead (a refund); mixing both kinds in one request is
// refused.
//
// The limit override a descriptor may carry (its `limit` field) is ignored:
// limits come from the limit files alone, so that what Envoy sends cannot
// change what a subscriber is allowed.
//
// # Refusals
//
// Bad input is INVALID_ARGUMENT and spends nothing: an empty domain, no
// descriptors or more than Options.MaxDescriptors, an entry with an empty
// key, in a descriptor a rule counts a key or value over 1024 bytes, an id its limit's kind refuses, a
// cost above the limit's burst, two descriptors on one bucket, and a mix of
// negative and positive hits. The message names the descriptor by its
// index in the request, from 0.
//
// A source that fails is UNAVAILABLE (Envoy's failure_mode_deny decides
// then), within the Limiter's own source timeout; a Limiter that fails
// open answers OK instead, every status OK, undecided. With API tokens
// configured, a call needs "authorization: Bearer <token>" metadata (an
// API or an admin token), or it is UNAUTHENTICATED. Health and reflection
// need no token.
//
// # The answer
//
// overall_code is OVER_LIMIT when the batch is denied. There is one status
// per descriptor, in request order: its own decision (OK for a shadow
// limit, which never denies), the limit's name and rate, the tokens left
// (saturated to uint32) and the time until the bucket is full, in whole
// milliseconds rounded up. Envoy knows rates per second, minute, hour and
// day only: a period of exactly one of those is shown as count per that
// unit; any other period in the smallest of those units at least as long
// (a day for longer periods), with the count scaled to it and rounded
// down, but at least 1 (2 per 90s is 80 per hour, 300 per week 42 per
// day). The headers Envoy is asked to add to the client's response are
// the HTTP API's RateLimit-Policy, RateLimit and, when denied,
// Retry-After, all from the deciding descriptor; refunds and fail-open
// answers carry none.
package envoyapi
