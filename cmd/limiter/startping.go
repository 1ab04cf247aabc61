package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
)

// pingAtStart asks the source once, right after opening it, whether it
// answers. A source that does not is no reason to refuse to start (Redis
// may come up later, and the service recovers by itself), but an operator
// reading the log should not have to find out from a 503: the warning says
// so at once. It names the source's kind, never its URL, which may hold a
// password.
func pingAtStart(src ratelimits.Source, kind string, timeout time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := src.Ping(ctx); err != nil {
		log.Warn("the source does not answer; serving anyway, and /readyz answers 503 until it does",
			"source", kind, "waited", timeout, "err", err)
	}
}

// startPingTimeout is how long pingAtStart waits: --source-timeout, plus
// the dial timeout for Redis, since the first call must also connect.
func startPingTimeout(f *serveFlags) time.Duration {
	if isRedisKind(sourceKind(f.source)) {
		return f.sourceTimeout + f.redisFlags.dialTimeout
	}
	return f.sourceTimeout
}
