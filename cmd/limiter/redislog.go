package main

import (
	"context"
	"fmt"
	"log/slog"
)

// redisClientLog hands go-redis's own log lines (failed dials while Redis
// is down, connection pool notices) to the service's logger. Without it
// go-redis prints them as bare lines on stderr, which a log pipeline
// reading the service's JSON cannot parse. go-redis keeps its logger in a
// package variable, so serve sets it once, before any client exists.
type redisClientLog struct{ log *slog.Logger }

// Printf implements go-redis's internal.Logging.
func (l redisClientLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}
