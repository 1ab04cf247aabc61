package main

import (
	"fmt"
	"strings"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

// openSource builds the bucket source --source names.
func openSource(f *serveFlags) (ratelimits.Source, error) {
	switch kind := sourceKind(f.source); kind {
	case "memory":
		return memory.New(f.maxBuckets), nil
	case "redis", "redis-cluster":
		return nil, fmt.Errorf("--source %s://: the Redis sources are not built yet; use memory", kind)
	}
	return nil, fmt.Errorf("--source %q: want memory, redis://host:port[/db] or redis-cluster://host:port[,host:port...]", f.source)
}

// sourceKind is the scheme of a source URL ("memory" for memory), safe to
// log: it carries no address or credentials.
func sourceKind(source string) string {
	if source == "memory" {
		return source
	}
	if scheme, _, ok := strings.Cut(source, "://"); ok {
		return scheme
	}
	return "unknown"
}
