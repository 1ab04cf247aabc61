package ratelimits_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/internal/vectors"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/source/memory"
)

var start = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// newTestLimiter returns a Limiter on a memory source and a fake clock.
func newTestLimiter(t *testing.T, defaults, overrides string) (*ratelimits.Limiter, clock.FakeClock) {
	t.Helper()
	cfg, err := configfile.Parse("defaults.yaml", []byte(defaults), "overrides.yaml", []byte(overrides))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	clk := clock.NewFake()
	clk.Set(start)
	l, err := ratelimits.NewLimiter(cfg, memory.New(0), clk)
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

// The public vectors, run at the library level: exact nanoseconds.
func TestPublicVectors(t *testing.T) {
	f, err := vectors.Public()
	if err != nil {
		t.Fatal(err)
	}
	l, clk := newTestLimiter(t, string(f.Defaults), string(f.Overrides))
	vectors.Run(t, f, &vectors.LimiterDriver{Limiter: l, Clock: clk}, time.Nanosecond)
}

const testDefaults = `
NewOrdersPerAccount:
  burst: 100
  count: 100
  period: 1h
Logins:
  enum: 101
  id: string
  burst: 3
  count: 3
  period: 1m
PerIP:
  enum: 102
  id: ip
  burst: 2
  count: 2
  period: 1s
`

const testOverrides = `
- PerIP:
    burst: 5
    count: 5
    period: 1s
    ids:
      - id: 2001:db8::1
- CertificatesPerDomainPerAccount:
    burst: 1
    count: 1
    period: 1h
    ids:
      - id: "42"
`

func spendOK(t *testing.T, l *ratelimits.Limiter, txns ...ratelimits.Transaction) *ratelimits.BatchDecision {
	t.Helper()
	bd, err := l.Spend(context.Background(), txns)
	if err != nil {
		t.Fatalf("Spend(%+v): %v", txns, err)
	}
	return bd
}

// Bad batches are refused whole, with the sentinel and the index of the
// transaction at fault, and change nothing.
func TestRefusals(t *testing.T) {
	l, _ := newTestLimiter(t, testDefaults, testOverrides)
	tests := []struct {
		name  string
		txns  []ratelimits.Transaction
		want  error
		index int
	}{
		{"empty batch", nil, ratelimits.ErrEmptyBatch, -1},
		{"unknown limit", []ratelimits.Transaction{{Limit: "Logins", ID: "a", Cost: 1}, {Limit: "Nope", ID: "a", Cost: 1}}, ratelimits.ErrUnknownLimit, 1},
		{"invalid id", []ratelimits.Transaction{{Limit: "PerIP", ID: "not-an-ip", Cost: 1}}, ratelimits.ErrInvalidID, 0},
		{"cost above burst", []ratelimits.Transaction{{Limit: "Logins", ID: "a", Cost: 4}}, ratelimits.ErrInvalidCost, 0},
		{"negative cost", []ratelimits.Transaction{{Limit: "Logins", ID: "a", Cost: -1}}, ratelimits.ErrInvalidCost, 0},
		{"cost above an override's burst is judged by the override", []ratelimits.Transaction{{Limit: "PerIP", ID: "2001:db8::1", Cost: 6}}, ratelimits.ErrInvalidCost, 0},
		{"bad mode", []ratelimits.Transaction{{Limit: "Logins", ID: "a", Cost: 1, Mode: 7}}, ratelimits.ErrInvalidMode, 0},
		{"duplicate bucket after canonicalisation", []ratelimits.Transaction{
			{Limit: "Logins", ID: "a", Cost: 1},
			{Limit: "PerIP", ID: "2001:DB8::1", Cost: 1},
			{Limit: "PerIP", ID: "2001:db8:0::1", Cost: 1},
		}, ratelimits.ErrDuplicateBucket, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.Spend(context.Background(), tt.txns)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			var te *ratelimits.TransactionError
			if got := errors.As(err, &te); got != (tt.index >= 0) || (got && te.Index != tt.index) {
				t.Fatalf("err = %v, want transaction index %d", err, tt.index)
			}
		})
	}
	// Nothing above was written: the first Logins bucket is still full.
	bd := spendOK(t, l, ratelimits.Transaction{Limit: "Logins", ID: "a", Cost: 0})
	if bd.Remaining != 3 {
		t.Fatalf("after refused batches Logins/a has %d remaining, want 3", bd.Remaining)
	}
}

// A limit with neither default nor override for an id is disabled: always
// allowed, reported unlimited, never deciding the batch.
func TestUnlimited(t *testing.T) {
	l, _ := newTestLimiter(t, testDefaults, testOverrides)
	unlimited := ratelimits.Transaction{Limit: "CertificatesPerDomainPerAccount", ID: "7", Cost: 1000}
	bd := spendOK(t, l, unlimited)
	if !bd.Allowed || bd.Deciding != -1 || bd.Remaining != math.MaxInt64 || !bd.Decisions[0].Unlimited {
		t.Fatalf("unlimited alone: %+v", bd)
	}
	// The same name with an override for account 42 is limited, by it.
	limited := ratelimits.Transaction{Limit: "CertificatesPerDomainPerAccount", ID: "42", Cost: 1}
	bd = spendOK(t, l, limited, ratelimits.Transaction{Limit: "Logins", ID: "u", Cost: 1})
	if d := bd.Decisions[0]; d.Unlimited || !d.Effective.Override || d.Remaining != 0 || d.ID != "42" {
		t.Fatalf("overridden account: %+v", d)
	}
	if bd.Deciding != 0 {
		t.Fatalf("deciding = %d, want 0 (remaining 0 beats 2)", bd.Deciding)
	}
	// An unlimited transaction beside a denied one does not rescue it.
	bd = spendOK(t, l, unlimited, limited)
	if bd.Allowed || bd.Deciding != 1 || bd.Decisions[0].Unlimited != true {
		t.Fatalf("unlimited beside denied: %+v", bd)
	}
}

// Ids are canonicalised before they become keys: two spellings of one
// address share a bucket, and the override applies to both.
func TestCanonicalIDsShareBuckets(t *testing.T) {
	l, _ := newTestLimiter(t, testDefaults, testOverrides)
	a := spendOK(t, l, ratelimits.Transaction{Limit: "PerIP", ID: "2001:DB8::1", Cost: 1})
	b := spendOK(t, l, ratelimits.Transaction{Limit: "PerIP", ID: "2001:db8:0::1", Cost: 1})
	if a.Remaining != 4 || b.Remaining != 3 || b.Decisions[0].ID != "2001:db8::1" || !b.Decisions[0].Effective.Override {
		t.Fatalf("got %+v then %+v, want one overridden bucket 2001:db8::1 going 4 then 3", a.Decisions[0], b.Decisions[0])
	}
	c := spendOK(t, l, ratelimits.Transaction{Limit: "PerIP", ID: "::ffff:192.0.2.1", Cost: 2})
	if c.Decisions[0].ID != "192.0.2.1" || c.Decisions[0].Effective.Override || c.Remaining != 0 {
		t.Fatalf("IPv4-mapped id: %+v, want canonical 192.0.2.1 on the default", c.Decisions[0])
	}
}

// Check decides like spend but writes nothing; refund gives back; reset
// empties; all on the fake clock.
func TestCheckRefundReset(t *testing.T) {
	l, clk := newTestLimiter(t, testDefaults, testOverrides)
	ctx := context.Background()
	login := ratelimits.Transaction{Limit: "Logins", ID: "alice", Cost: 2}
	for range 3 {
		bd, err := l.Check(ctx, []ratelimits.Transaction{login})
		if err != nil || !bd.Allowed || bd.Remaining != 1 {
			t.Fatalf("check: %+v, %v; want allowed, 1 remaining, every time", bd, err)
		}
	}
	spendOK(t, l, login)
	if bd := spendOK(t, l, login); bd.Allowed || bd.RetryIn != 20*time.Second {
		t.Fatalf("second spend of 2 of 3: %+v, want denied, retry in 20s", bd)
	}
	clk.Add(20 * time.Second)
	bd, err := l.Refund(ctx, []ratelimits.Transaction{{Limit: "Logins", ID: "alice", Cost: 1}})
	if err != nil || !bd.Decisions[0].Allowed || bd.Decisions[0].Remaining != 3 {
		t.Fatalf("refund: %+v, %v; want given back, 3 remaining", bd, err)
	}
	spendOK(t, l, login)
	n, err := l.Reset(ctx, []ratelimits.Transaction{{Limit: "Logins", ID: "alice"}, {Limit: "Logins", ID: "bob"}})
	if err != nil || n != 1 {
		t.Fatalf("reset: %d, %v; want 1 (bob was full)", n, err)
	}
	d, err := l.Inspect(ctx, "Logins", "alice")
	if err != nil || d.Remaining != 3 || d.Effective.Burst != 3 {
		t.Fatalf("inspect after reset: %+v, %v", d, err)
	}
}

// A new configuration applies from the next decision; buckets survive.
func TestSetConfigKeepsBuckets(t *testing.T) {
	l, _ := newTestLimiter(t, testDefaults, testOverrides)
	spendOK(t, l, ratelimits.Transaction{Limit: "Logins", ID: "alice", Cost: 2})
	raised := `
Logins:
  enum: 101
  id: string
  burst: 10
  count: 10
  period: 1m
`
	cfg, err := configfile.Parse("raised.yaml", []byte(raised), "none.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(cfg)
	// The TAT (40s ahead) means 4 of the new 10 tokens are spent (6s each).
	bd := spendOK(t, l, ratelimits.Transaction{Limit: "Logins", ID: "alice", Cost: 0})
	if bd.Remaining != 3 || bd.Decisions[0].Effective.Burst != 10 {
		t.Fatalf("after raising the limit: %+v", bd.Decisions[0])
	}
}

// 64 goroutines spending on one bucket of burst 100 get exactly 100.
func TestConcurrentSpendersNeverOvershoot(t *testing.T) {
	l, _ := newTestLimiter(t, testDefaults, testOverrides)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				bd, err := l.Spend(context.Background(), []ratelimits.Transaction{{Limit: "NewOrdersPerAccount", ID: "12345", Cost: 1}})
				if err != nil {
					t.Error(err)
					return
				}
				if bd.Allowed {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := allowed.Load(); got != 100 {
		t.Fatalf("%d spends allowed, want exactly 100", got)
	}
}

func BenchmarkLimiterSpend(b *testing.B) {
	cfg, err := configfile.Parse("d", []byte(testDefaults), "o", nil)
	if err != nil {
		b.Fatal(err)
	}
	l, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.New())
	if err != nil {
		b.Fatal(err)
	}
	txns := []ratelimits.Transaction{{Limit: "NewOrdersPerAccount", ID: "12345", Cost: 1}}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = l.Spend(context.Background(), txns)
	}
}

// stallingSource waits on every Spend for its context to end (a few
// seconds at most), and records the deadline it was given.
type stallingSource struct {
	*memory.Source
	deadline chan time.Time
}

func (s stallingSource) Spend(ctx context.Context, _ int64, _ []bucket.Op, _ []bucket.Outcome) error {
	d, _ := ctx.Deadline()
	s.deadline <- d
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Second):
		return errors.New("stallingSource: no deadline came")
	}
}

// A source call that outlasts the caller's deadline fails with
// ErrSourceUnavailable: the source is slow, the request is not at fault.
func TestCallerDeadlineFailsSourceUnavailable(t *testing.T) {
	cfg, err := configfile.Parse("defaults.yaml", []byte(testDefaults), "overrides.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	src := stallingSource{Source: memory.New(0), deadline: make(chan time.Time, 1)}
	l, err := ratelimits.NewLimiter(cfg, src, clock.New())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = l.Spend(ctx, []ratelimits.Transaction{{Limit: "Logins", ID: "a", Cost: 1}})
	if !errors.Is(err, ratelimits.ErrSourceUnavailable) {
		t.Fatalf("Spend past the caller's deadline: %v, want ErrSourceUnavailable", err)
	}
	if want, _ := ctx.Deadline(); !(<-src.deadline).Equal(want) {
		t.Fatal("the source was not given the caller's deadline")
	}
}
