package vectors

import (
	"context"
	"errors"
	"sync"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/once"
	"github.com/limiter-dev/limiter/source/sourcetest"
)

// ErrNoRecords is the model source's answer to SpendOnce and RefundOnce:
// it keeps no idempotency records, which the vectors do not use.
var ErrNoRecords = errors.New("vectors: the model source keeps no idempotency records")

// ModelSource is a ratelimits.Source over sourcetest.Model, the reference
// every source is compared with: a map of states and the bucket package's
// batch functions, under one lock. Running vectors on it checks their
// arithmetic (the Limiter's and the algorithms') apart from any real
// source's storage. It is for tests; it keeps everything forever.
type ModelSource struct {
	mu    sync.Mutex
	model sourcetest.Model
}

var _ ratelimits.Source = (*ModelSource)(nil)

// NewModelSource returns an empty model source.
func NewModelSource() *ModelSource {
	return &ModelSource{model: sourcetest.Model{}}
}

// Spend decides ops as one batch and stores what it writes.
func (s *ModelSource) Spend(_ context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	copy(outcomes, s.model.Apply(now, ops, false))
	return nil
}

// Refund gives back each op's cost and stores what changed.
func (s *ModelSource) Refund(_ context.Context, now int64, ops []bucket.Op, outcomes []bucket.Outcome) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	copy(outcomes, s.model.Apply(now, ops, true))
	return nil
}

// Call applies an ERL call and stores what it writes.
func (s *ModelSource) Call(_ context.Context, now int64, call *bucket.Call, res *bucket.CallResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.model.Call(now, call, res)
	return nil
}

// SpendOnce fails with ErrNoRecords, wrapping once.ErrNotApplied.
func (s *ModelSource) SpendOnce(context.Context, int64, once.Record, []bucket.Op, []bucket.Outcome) (bool, error) {
	return false, errors.Join(ErrNoRecords, once.ErrNotApplied)
}

// RefundOnce fails with ErrNoRecords, wrapping once.ErrNotApplied.
func (s *ModelSource) RefundOnce(context.Context, int64, once.Record, []bucket.Op, []bucket.Outcome) (bool, error) {
	return false, errors.Join(ErrNoRecords, once.ErrNotApplied)
}

// Reset deletes the ops' states (and box entries) and counts those that
// still counted.
func (s *ModelSource) Reset(_ context.Context, now int64, ops []bucket.Op) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.model.Reset(now, ops), nil
}

// Ping always answers.
func (s *ModelSource) Ping(context.Context) error { return nil }

// Close does nothing.
func (s *ModelSource) Close() error { return nil }
