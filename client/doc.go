// Package client calls the limiter's HTTP API from Go: typed calls for
// spends, checks, refunds, resets, batches, the limits list, one
// subscriber's bucket, the admin calls and the ERL calls (rate counters
// and penalty boxes), with tokens, retries that never spend twice, and
// errors that keep the API's codes. It is a module of its own,
// github.com/limiter-dev/limiter/client, that requires no other module and
// needs Go 1.24 or later: it imports only the standard library, so it adds
// nothing but itself to an application's go.sum.
//
// Make one Client and share it; it keeps connections open between calls:
//
//	c, err := client.New(client.Options{BaseURL: "http://limiter.internal:8080", APIToken: token})
//	...
//	d, err := c.Spend(ctx, client.Transaction{Limit: "NewOrdersPerAccount", ID: "42"})
//	if err != nil {
//		// The service refused the call or could not be reached.
//	}
//	if !d.Allowed {
//		// Denied: try again in d.RetryIn.
//	}
//
// # Transactions and batches
//
// A Transaction names a limit and an id. Built as a literal it costs 1,
// the API's default; WithCost sets another cost, 0 included (which reads
// the bucket without taking from it). SpendBatch, CheckBatch, RefundBatch
// and ResetBatch send several transactions in one request, decided and
// written atomically as the service's batch rules say.
//
// # Leases
//
// A concurrency limit bounds how much an id does at once. Acquire spends
// on one and, when a slot is free, returns the Lease it took; Release
// ends it and Renew extends it, and a lease that is neither ends by itself after
// its time to live. WithLease does all three around a function: it
// acquires, renews at half the time to live while the function runs, and
// releases when it returns or panics.
//
// # Errors
//
// A denial is not an error: it is a Decision with Allowed false. A call
// the service refuses returns an *Error (use errors.As) with the HTTP
// status, the API's error code (CodeInvalidID, CodeUnauthorized, ...), its
// message, the index of the transaction at fault when there is one, and
// the answer's Retry-After. IsCode tests the code. An answer that is not
// the API's (a proxy's HTML page) is an *Error too, with an empty Code and
// the start of its body as the message. A call that got no answer returns
// the transport's error, wrapped (errors.Is works with
// context.DeadlineExceeded and the like).
//
// # Retries
//
// A failed call is tried again (Options.Retry: by default twice, after a
// jittered, doubling, capped wait) only when a repeat can do no harm:
//   - when nothing was done: no connection could be made, or the service
//     answered 503 CodeSourceUnavailable. Every call is retried then;
//   - when the outcome is unknown (the attempt timed out or its connection
//     broke, the service answered 503 CodeSourceOutcomeUnknown, or a proxy
//     502, 503 or 504): only calls that a repeat cannot apply twice. Those
//     are Check, Limits, Subscriber and the other reads, Reset and Reload,
//     adding to and removing from a penalty box, and Spend, Refund,
//     Acquire, Release and Renew sent with an Idempotency-Key;
//   - 409 CodeIdempotencyKeyUnsettled, for a call with a key: the service
//     answers the same key once the first request's outcome is known.
//
// Any other refusal (every other 4xx, a 500) is returned at once. A
// Retry-After longer than RetryPolicy.MaxDelay ends the retries. The
// caller's context bounds the whole call: its end stops the retries, also
// while waiting between them.
//
// # Idempotency keys
//
// With retries on, Spend and Refund (and their batches), Acquire, Release
// and Renew send a random Idempotency-Key, the same on every attempt of
// one call, so that a retry
// after an unknown outcome is answered with the first decision instead of
// spending again (Decision.Replayed says so). WithIdempotencyKey sends a
// key of the caller's instead, also with retries off.
//
// The service refuses a key (400 CodeInvalidIdempotencyKey) for a batch
// it cannot replay: one with a rate-counter limit, a limit with a penalty,
// a window limit whose sync_rate is not 0, or a check-only transaction of
// a shadow limit beside transactions that write. The client then sends
// the call once more without its key, unless an attempt before the
// refusal had an unknown outcome (it may have been applied under the
// key; the refusal is returned then), and such a call is not retried
// after an unknown outcome: it is retried only when an answer proves it
// was not applied. WithoutIdempotencyKey skips the refused request for
// calls known to be of that kind. A key the caller gave is never dropped:
// its refusal is returned.
//
// With retries off (RetryPolicy{MaxRetries: NoRetries}), every call is
// sent once, and spends, refunds and lease calls carry no key unless the
// caller gives one.
//
// # Tokens
//
// Options.APIToken is sent on every call. The admin calls (Reset,
// ResetBatch, Reload, ReloadStatus, Sync, TopDenied, Boxes,
// PenaltyBoxRemove) send Options.AdminToken
// when it is set, else the API token. A missing or wrong token is an
// *Error with status 401 and CodeUnauthorized.
package client
