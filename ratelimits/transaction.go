package ratelimits

import (
	"errors"
	"fmt"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
)

// Mode says how a transaction takes part in a batch; see bucket.Mode.
type Mode = bucket.Mode

// The three modes (docs/semantics.md, "Modes").
const (
	CheckAndSpend = bucket.CheckAndSpend
	CheckOnly     = bucket.CheckOnly
	SpendOnly     = bucket.SpendOnly
)

// ParseMode reads a mode as spelled in the API. The empty string is the
// default, CheckAndSpend.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "check-and-spend":
		return CheckAndSpend, nil
	case "check-only":
		return CheckOnly, nil
	case "spend-only":
		return SpendOnly, nil
	}
	return 0, fmt.Errorf("%w %q: want check-and-spend, check-only or spend-only", ErrInvalidMode, s)
}

// Errors of a batch that is refused before anything runs. The Limiter wraps
// the per-transaction ones in a *TransactionError that says which one.
var (
	ErrEmptyBatch        = errors.New("empty batch: at least one transaction is needed")
	ErrUnknownLimit      = errors.New("unknown limit")
	ErrInvalidCost       = errors.New("cost out of range")
	ErrInvalidMode       = errors.New("invalid mode")
	ErrDuplicateBucket   = errors.New("duplicate bucket in batch")
	ErrSourceUnavailable = errors.New("source unavailable")
)

// TransactionError is a refusal caused by one transaction of a batch.
type TransactionError struct {
	// Index is the transaction's position in the batch, from 0.
	Index int
	Err   error
}

// Error says which transaction was refused and why.
func (e *TransactionError) Error() string {
	return fmt.Sprintf("transaction %d: %v", e.Index, e.Err)
}

// Unwrap returns the reason, so errors.Is finds the sentinel errors.
func (e *TransactionError) Unwrap() error { return e.Err }

// Transaction asks to spend (or check, or refund) Cost tokens of the limit
// named Limit for the subscriber ID.
type Transaction struct {
	// Limit is a limit name, built in or declared in the defaults file.
	Limit string
	// ID is the subscriber, validated and canonicalised by the name's id kind.
	ID string
	// Cost is how many tokens; 0 reads the bucket. It must not exceed the
	// effective limit's burst, or for a rate-counter limit MaxRateCost.
	Cost int64
	// Mode defaults to CheckAndSpend (the zero value).
	Mode Mode
}

// preparedTxn is a validated transaction: its canonical id, bucket key and
// effective limit. unlimited transactions have no limit and never reach the
// source.
type preparedTxn struct {
	info      NameInfo
	bucketID  string
	key       string
	limit     Limit
	unlimited bool
	algorithm Algorithm // the name's, also when unlimited
	cost      int64
	mode      Mode
	// lease is the lease a release or renew names ("" otherwise).
	lease string
}

// resolve finds a transaction's name, canonical id, bucket key and
// effective limit in cfg. Nothing is read or written: a batch is validated
// whole before anything runs.
func resolve(cfg *Config, txn Transaction) (preparedTxn, error) {
	info, ok := cfg.Lookup(txn.Limit)
	if !ok {
		return preparedTxn{}, fmt.Errorf("%w %q", ErrUnknownLimit, txn.Limit)
	}
	bucketID, overrideID, err := info.Kind.Canonicalize(txn.ID)
	if err != nil {
		return preparedTxn{}, err
	}
	p := preparedTxn{
		info:     info,
		bucketID: bucketID,
		key:      info.BucketKey(bucketID),
		cost:     txn.Cost,
		mode:     txn.Mode,
	}
	p.limit, ok = cfg.Limit(info.Name, overrideID)
	p.unlimited = !ok
	p.algorithm = cfg.Algorithm(info.Name)
	if p.limit.Shadow && p.mode == CheckAndSpend {
		// A shadow limit must never deny the batch: it takes part as a
		// spend-only transaction does, decided and written only when
		// itself allowed and the batch is.
		p.mode = SpendOnly
	}
	return p, nil
}

// checkModeAndCost refuses a mode that does not exist and a cost below 0
// or above the effective limit's burst (a window limit's count), which no
// bucket could ever grant. A rate-counter transaction is hits observed, not
// tokens taken: it may be denied whatever its cost, so its cost is bounded
// by MaxRateCost, the most hits one check_rate adds, not by rate × window.
func (p preparedTxn) checkModeAndCost() error {
	if p.mode > SpendOnly {
		return fmt.Errorf("%w %d", ErrInvalidMode, p.mode)
	}
	if p.cost < 0 {
		return fmt.Errorf("%w: %d is negative", ErrInvalidCost, p.cost)
	}
	switch {
	case p.unlimited || p.cost <= p.limit.MostPerTransaction():
	case p.limit.Algorithm == RateCounter:
		return fmt.Errorf("%w: %d exceeds %d, the most hits one transaction adds to the rate counter %s", ErrInvalidCost, p.cost, MaxRateCost, p.info.Limit)
	default:
		// A window, calendar or concurrency limit has no burst of its own:
		// its Burst is its count, and the message names it so.
		what := "burst"
		if p.limit.Algorithm != GCRA {
			what = "count"
		}
		return fmt.Errorf("%w: %d exceeds the %s of %d for %s", ErrInvalidCost, p.cost, what, p.limit.Burst, p.info.Limit)
	}
	return nil
}

// prepareDecisions validates the batch of a spend, check or refund into
// prepared (len(txns) long): every transaction, its mode and cost, and that
// no two of them name the same bucket.
func prepareDecisions(cfg *Config, txns []Transaction, prepared []preparedTxn) error {
	for i, txn := range txns {
		p, err := resolve(cfg, txn)
		if err == nil {
			err = p.checkModeAndCost()
		}
		if err != nil {
			return &TransactionError{Index: i, Err: err}
		}
		prepared[i] = p
	}
	return checkDistinctBuckets(prepared)
}

// prepareResets validates the batch of a reset into prepared: only the
// buckets matter, so cost and mode are not checked.
func prepareResets(cfg *Config, txns []Transaction, prepared []preparedTxn) error {
	for i, txn := range txns {
		p, err := resolve(cfg, txn)
		if err != nil {
			return &TransactionError{Index: i, Err: err}
		}
		prepared[i] = p
	}
	return checkDistinctBuckets(prepared)
}

// checkDistinctBuckets refuses a batch that names one bucket twice: the
// source decides each bucket once per call.
func checkDistinctBuckets(prepared []preparedTxn) error {
	if i, ok := firstDuplicateKey(prepared); ok {
		return &TransactionError{Index: i, Err: fmt.Errorf("%w: %s %q appears more than once", ErrDuplicateBucket, prepared[i].info.Limit, prepared[i].bucketID)}
	}
	return nil
}

// firstDuplicateKey returns the index of the first transaction whose bucket
// key an earlier one already has. Small batches, the common case, are
// compared pairwise without allocating.
func firstDuplicateKey(prepared []preparedTxn) (int, bool) {
	const pairwiseMax = 16
	if len(prepared) <= pairwiseMax {
		for i := 1; i < len(prepared); i++ {
			for j := range i {
				if prepared[i].key == prepared[j].key {
					return i, true
				}
			}
		}
		return 0, false
	}
	seen := make(map[string]struct{}, len(prepared))
	for i, p := range prepared {
		if _, dup := seen[p.key]; dup {
			return i, true
		}
		seen[p.key] = struct{}{}
	}
	return 0, false
}
