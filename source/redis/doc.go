// Package redis is the bucket source that keeps buckets in Redis: one
// server, or a Redis Cluster, shared by any number of limiter processes.
//
// Every batch is decided and written inside Redis by one Lua script
// (bucket.lua, loaded once and called by its SHA-1), so decisions are exact
// and atomic across processes: Boulder's read-compute-write-back design
// lets concurrent spenders overshoot a limit, this one cannot. The script
// does its time arithmetic on exact two-limb integers (Lua numbers are
// doubles) and returns the TATs it read; the Go side then computes every
// reported number with the same gcra functions the memory source uses, so
// both sources answer identically to the nanosecond, and it checks that
// the script's batch verdict agrees.
//
// Concurrent calls to one Redis node share round trips (coalesce.go): they
// are queued and sent as one pipeline as soon as a flusher is free, and
// on a standalone Redis packed into single script calls, each batch still
// decided atomically by one script run.
//
// Buckets are keys of their own (key format v1), or, with Options.Groups,
// fields of a fixed number of hashes (format v2): under a third of the
// Redis memory once each hash holds ten buckets or more, for some 15% more
// script work per decision. The script then also sweeps full buckets out of hashes that
// stay busy, since Redis before 7.4 cannot expire single fields.
//
// On a Redis Cluster a batch whose keys fall into several hash slots is
// applied slot by slot in ascending slot order, and a denied batch gives
// back what its earlier slots spent; docs/redis.md states the guarantees
// precisely, along with the key layout, expiry and failure behaviour.
//
// The package imports nothing of this project but the gcra math: no
// configuration loading and no HTTP.
package redis
