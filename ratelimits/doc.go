// Package ratelimits decides rate limits: given a batch of transactions
// ("spend 1 token of NewOrdersPerAccount for account 42"), it says whether
// each is allowed and takes the tokens, exactly and atomically, with the
// Generic Cell Rate Algorithm of package gcra or the sliding and fixed
// windows of package window.
//
// Its parts:
//
//   - A Limit is a GCRA bucket of Burst tokens refilled at Count per Period,
//     or a window limit of Count hits per window of Period. A Config holds
//     each limit name's default and its per-subscriber overrides; the
//     effective limit of a transaction is its override, else the default,
//     else none (unlimited). A name's algorithm is fixed for as long as its
//     enum is: a reload refuses a new Config that changes it
//     (AlgorithmChanges).
//   - A Transaction names a limit, a subscriber id, a cost and a Mode.
//   - The Limiter validates a batch whole, resolves each transaction's
//     effective limit, hands the batch to its Source in one call and
//     combines the answers into a BatchDecision. It knows nothing of HTTP
//     or of storage.
//   - A Source stores buckets and decides and writes a whole batch in one
//     atomic step. source/memory and source/redis implement it, and
//     source/sourcetest is the conformance suite every implementation
//     passes.
//
// To use it as a library, build a Config (the package's examples parse one
// from YAML), pick a Source and a clock, and call the Limiter:
//
//	limiter, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.New())
//	...
//	d, err := limiter.Spend(ctx, []ratelimits.Transaction{
//		{Limit: "NewOrdersPerAccount", ID: "42", Cost: 1},
//	})
//	if err == nil && !d.Allowed {
//		// refuse, and tell the caller to come back after d.RetryIn
//	}
//
// Errors that refuse a batch before anything runs name the transaction at
// fault (*TransactionError) and wrap a sentinel (ErrUnknownLimit,
// ErrInvalidID, ErrInvalidCost, ...); a failing source gives
// ErrSourceUnavailable, with ErrNotApplied when the call certainly changed
// nothing.
//
// The rules a decision follows (the arithmetic, batches, modes, refunds,
// overrides) are written out in docs/semantics.md.
package ratelimits
