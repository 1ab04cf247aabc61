// Package redis is the bucket source that keeps buckets in Redis: one
// server, or a Redis Cluster, shared by any number of limiter processes.
//
// Every batch is decided and written inside Redis by one Lua script (the
// files of lua/ joined, script.go; loaded once and called by its SHA-1;
// its arguments declared in protocol.go), so decisions are
// exact and atomic across processes: no read-compute-write-back from Go,
// and so no overshoot by concurrent spenders. The script computes with
// exact two-limb integers (and window counts in exact whole milliseconds)
// and returns the values it read, TATs, window counters and the lease sets
// of concurrency limits (leases.go); the Go side
// computes every reported number from them with the same bucket functions
// the memory source uses, and checks that the script's verdict agrees.
//
// A call to the script is a scriptCall (call.go), turned into the
// script's KEYS and ARGV by wire.encode (encode.go) and read back by
// decode (decode.go). Concurrent calls to one Redis node share round trips
// through its pipe (pipe.go), and are packed into single script calls
// where the node allows (pack.go).
//
// Buckets are keys of their own (key format v1), or, with Options.Groups,
// fields of a fixed number of hashes (format v2), which takes less Redis
// memory once hashes hold several buckets each. Rate counters, penalty
// box entries and the buckets of limits with a box are named by their id
// (keys.go), so that an Edge Rate Limiting call (erl.go) and a batch of
// one id reach all of theirs in one script call, also on a cluster; their
// own decisions and writes are those of bucket.SpendBatch and
// bucket.ApplyCall, made in the same script.
//
// docs/redis.md describes the key layout, expiry, failure behaviour and
// the guarantees on a cluster, where a batch whose keys fall into several
// hash slots is applied slot by slot.
package redis
