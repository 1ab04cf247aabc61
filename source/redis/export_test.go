package redis

// ClaimKey returns the Redis key that holds the claim of an idempotency
// key (once.Record.Key) on a cluster (docs/redis.md, "Idempotency
// records"), for the tests that look into Redis.
func (s *Source) ClaimKey(idempotencyKey string) string {
	return s.claimKey(recordID(idempotencyKey))
}
