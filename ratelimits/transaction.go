package ratelimits

import (
	"errors"
	"fmt"

	"github.com/limiter-dev/limiter/ratelimits/gcra"
)

// Mode says how a transaction takes part in a batch; see gcra.Mode.
type Mode = gcra.Mode

// The three modes of spec/gcra.md.
const (
	CheckAndSpend = gcra.CheckAndSpend
	CheckOnly     = gcra.CheckOnly
	SpendOnly     = gcra.SpendOnly
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
	// effective limit's burst.
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
	cost      int64
	mode      Mode
}

// prepare validates one transaction against cfg. Nothing is read or written:
// a batch is validated whole before anything runs.
func prepare(cfg *Config, txn Transaction, checkCost bool) (preparedTxn, error) {
	info, ok := cfg.Lookup(txn.Limit)
	if !ok {
		return preparedTxn{}, fmt.Errorf("%w %q", ErrUnknownLimit, txn.Limit)
	}
	bucketID, overrideID, err := info.Kind.Canonicalize(txn.ID)
	if err != nil {
		return preparedTxn{}, err
	}
	if txn.Mode > SpendOnly {
		return preparedTxn{}, fmt.Errorf("%w %d", ErrInvalidMode, txn.Mode)
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
	if checkCost {
		if txn.Cost < 0 {
			return preparedTxn{}, fmt.Errorf("%w: %d is negative", ErrInvalidCost, txn.Cost)
		}
		if !p.unlimited && txn.Cost > p.limit.Burst {
			return preparedTxn{}, fmt.Errorf("%w: %d exceeds the burst of %d for %s", ErrInvalidCost, txn.Cost, p.limit.Burst, info.Limit)
		}
	}
	return p, nil
}

// prepareBatch validates a whole batch into prepared (len(txns) long):
// every transaction, and that no two of them name the same bucket.
// checkCost is false for reset, which ignores cost and mode.
func prepareBatch(cfg *Config, txns []Transaction, checkCost bool, prepared []preparedTxn) error {
	for i, txn := range txns {
		if !checkCost {
			txn.Mode = CheckAndSpend
		}
		p, err := prepare(cfg, txn, checkCost)
		if err != nil {
			return &TransactionError{Index: i, Err: err}
		}
		prepared[i] = p
	}
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
