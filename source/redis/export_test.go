package redis

import "github.com/limiter-dev/limiter/ratelimits/bucket"

// ClaimKey returns the Redis key that holds the claim of an idempotency
// key (once.Record.Key) on a cluster (docs/redis.md, "Idempotency
// records"), for the tests that look into Redis.
func (s *Source) ClaimKey(idempotencyKey string) string {
	return s.claimKey(recordID(idempotencyKey))
}

// ResetOps are the ops of a reset of the GCRA buckets under keys.
func ResetOps(keys ...string) []bucket.Op {
	ops := make([]bucket.Op, len(keys))
	for i, k := range keys {
		ops[i] = bucket.Op{Key: k}
	}
	return ops
}
