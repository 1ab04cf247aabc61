// Package boundedtable is the core the tables of per-key entries bounded
// by a capacity share: the memory source's rate counters and penalty box
// entries, and the local layer's. It does no locking (its caller holds
// the lock that guards a table) and decides nothing: which entries count
// nothing, what an evicted entry leaves behind and which entries must not
// be evicted are each caller's. What it keeps is the order that eviction
// follows:
//
//   - Recency: entries in the order they were last touched, so that the
//     least recently touched one is found in O(1);
//   - Expiry: entries in a min-heap by an expiry, so that the one with the
//     least time left is found in O(1) and kept in order in O(log n).
//
// Both hold their keys in a Keys, which gives each key a dense position;
// values live in plain slices indexed by it, and entries link to each
// other by int32 positions rather than pointers, so that a table of a
// pointer-free value holds no pointer at all. Removing an entry moves the
// last one into its position: a position is valid until the next removal.
//
// A capacity bound is the caller's loop over these orders: drop the
// entries that count nothing from the end eviction takes from, then, while
// the table holds its capacity or more, evict from that end. Both callers
// write it, since what "counts nothing" and "evicted" mean differ.
package boundedtable
