package ratelimits_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/concurrency"
)

const leaseDefaults = `
Exports:
  enum: 140
  id: account
  algorithm: concurrency
  count: 2
  period: 10m
Logins:
  enum: 101
  id: string
  burst: 3
  count: 3
  period: 1m
`

const leaseOverrides = `
- Exports:
    count: 5
    period: 1m
    ids: [{id: 42}]
`

func TestLimiterLeases(t *testing.T) {
	l, clk := newTestLimiter(t, leaseDefaults, leaseOverrides)
	ctx := context.Background()
	acquire := func() ratelimits.Decision {
		t.Helper()
		bd, err := l.Spend(ctx, []ratelimits.Transaction{{Limit: "Exports", ID: "7", Cost: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return bd.Decisions[0]
	}
	first := acquire()
	if !first.Allowed || !concurrency.ValidID(first.Lease) || first.LeaseExpiresIn != 10*time.Minute || first.Algorithm != ratelimits.Concurrency {
		t.Fatalf("first acquire = %+v, want a lease living 10m", first)
	}
	second := acquire()
	if second.Lease == first.Lease || second.Remaining != 0 || second.RetryIn != 10*time.Minute {
		t.Fatalf("second acquire = %+v, want another lease, 0 left, retry in 10m", second)
	}
	clk.Add(time.Minute)
	if third := acquire(); third.Allowed || third.Lease != "" || third.RetryIn != 9*time.Minute {
		t.Fatalf("third acquire = %+v, want denied without a lease, retry in 9m", third)
	}
	// A check, and a cost-0 spend, take no lease.
	bd, err := l.Check(ctx, []ratelimits.Transaction{{Limit: "Exports", ID: "8", Cost: 1}})
	if err != nil || bd.Decisions[0].Lease != "" || !bd.Allowed {
		t.Fatalf("check = %+v, %v; want allowed, no lease", bd, err)
	}
	rel, err := l.Release(ctx, []ratelimits.LeaseTransaction{{Limit: "Exports", ID: "7", Lease: first.Lease}})
	if err != nil || !rel.Allowed || rel.Remaining != 1 || rel.Decisions[0].Lease != "" {
		t.Fatalf("release = %+v, %v; want allowed, 1 left", rel, err)
	}
	if rel, err = l.Release(ctx, []ratelimits.LeaseTransaction{{Limit: "Exports", ID: "7", Lease: first.Lease}}); err != nil || rel.Allowed {
		t.Fatalf("release again = %+v, %v; want not allowed, no error", rel, err)
	}
	clk.Add(time.Minute)
	ren, err := l.Renew(ctx, []ratelimits.LeaseTransaction{{Limit: "Exports", ID: "7", Lease: second.Lease}})
	if err != nil || !ren.Allowed || ren.ResetIn != 10*time.Minute {
		t.Fatalf("renew = %+v, %v; want allowed, reset in 10m", ren, err)
	}
	// The override's period is the lease's time to live.
	bd, err = l.Spend(ctx, []ratelimits.Transaction{{Limit: "Exports", ID: "42", Cost: 5}})
	if err != nil || !bd.Allowed || bd.Decisions[0].LeaseExpiresIn != time.Minute {
		t.Fatalf("acquire under the override = %+v, %v", bd, err)
	}
	n, err := l.Reset(ctx, []ratelimits.Transaction{{Limit: "Exports", ID: "42"}, {Limit: "Exports", ID: "7"}})
	if err != nil || n != 2 {
		t.Fatalf("Reset = %d, %v; want 2", n, err)
	}
}

func TestLimiterLeaseErrors(t *testing.T) {
	l, _ := newTestLimiter(t, leaseDefaults, "")
	ctx := context.Background()
	valid := concurrency.NewID()
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"refund of a concurrency limit", func() error {
			_, err := l.Refund(ctx, []ratelimits.Transaction{{Limit: "Logins", ID: "a"}, {Limit: "Exports", ID: "7", Cost: 1}})
			return err
		}, ratelimits.ErrConcurrencyRefund},
		{"idempotent refund of a concurrency limit", func() error {
			_, err := l.RefundOnce(ctx, "k", []ratelimits.Transaction{{Limit: "Exports", ID: "7", Cost: 1}})
			return err
		}, ratelimits.ErrConcurrencyRefund},
		{"release of another algorithm", func() error {
			_, err := l.Release(ctx, []ratelimits.LeaseTransaction{{Limit: "Logins", ID: "a", Lease: valid}})
			return err
		}, ratelimits.ErrNotConcurrency},
		{"renew of a lease that is not an id", func() error {
			_, err := l.Renew(ctx, []ratelimits.LeaseTransaction{{Limit: "Exports", ID: "7", Lease: "ABC"}})
			return err
		}, ratelimits.ErrInvalidLease},
		{"cost above the count", func() error {
			_, err := l.Spend(ctx, []ratelimits.Transaction{{Limit: "Exports", ID: "7", Cost: 3}})
			return err
		}, ratelimits.ErrInvalidCost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var te *ratelimits.TransactionError
			if !errors.Is(err, tt.want) || !errors.As(err, &te) {
				t.Fatalf("err = %v, want a TransactionError wrapping %v", err, tt.want)
			}
		})
	}
}

// A replayed spend answers the first call's lease ids and acquires
// nothing; a replayed release releases nothing more.
func TestLimiterLeasesOnce(t *testing.T) {
	l, clk := newTestLimiter(t, leaseDefaults, "")
	ctx := context.Background()
	txns := []ratelimits.Transaction{{Limit: "Exports", ID: "7", Cost: 1}, {Limit: "Logins", ID: "a"}}
	first, err := l.SpendOnce(ctx, "k1", txns)
	if err != nil || first.Decisions[0].Lease == "" {
		t.Fatalf("first = %+v, %v", first, err)
	}
	clk.Add(time.Second)
	again, err := l.SpendOnce(ctx, "k1", txns)
	if err != nil || !again.Replayed || again.Decisions[0].Lease != first.Decisions[0].Lease || again.Decisions[0].Remaining != 1 {
		t.Fatalf("replay = %+v, %v; want the first lease again", again, err)
	}
	bd, _ := l.Check(ctx, []ratelimits.Transaction{{Limit: "Exports", ID: "7", Cost: 0}})
	if bd.Remaining != 1 {
		t.Fatalf("after the replay %d left, want 1", bd.Remaining)
	}
	lease := []ratelimits.LeaseTransaction{{Limit: "Exports", ID: "7", Lease: first.Decisions[0].Lease}}
	if rel, err := l.ReleaseOnce(ctx, "k2", lease); err != nil || !rel.Allowed {
		t.Fatalf("release = %+v, %v", rel, err)
	}
	if rel, err := l.ReleaseOnce(ctx, "k2", lease); err != nil || !rel.Allowed || !rel.Replayed {
		t.Fatalf("replayed release = %+v, %v; want the first answer", rel, err)
	}
	other := []ratelimits.LeaseTransaction{{Limit: "Exports", ID: "7", Lease: concurrency.NewID()}}
	if _, err := l.ReleaseOnce(ctx, "k2", other); !errors.Is(err, ratelimits.ErrIdempotencyMismatch) {
		t.Fatalf("release of another lease under the key: %v, want a mismatch", err)
	}
	if _, err := l.RenewOnce(ctx, "k2", lease); !errors.Is(err, ratelimits.ErrIdempotencyMismatch) {
		t.Fatalf("renew under a release's key: %v, want a mismatch", err)
	}
}
