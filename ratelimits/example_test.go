package ratelimits_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

// A Limiter decides with a configuration, a bucket source and a clock.
// Here: five logins per user, one more every three minutes, declared in
// code (the configfile package reads the same from YAML files).
func ExampleLimiter_Spend() {
	logins, err := ratelimits.NewLimit(5, 5, 15*time.Minute)
	if err != nil {
		panic(err)
	}
	cfg, err := ratelimits.NewConfig(
		[]ratelimits.NameInfo{{Name: 101, Limit: "LoginAttemptsPerUser", Kind: ratelimits.KindString}},
		map[string]ratelimits.Limit{"LoginAttemptsPerUser": logins},
		nil)
	if err != nil {
		panic(err)
	}
	clk := clock.NewFake()
	limiter, err := ratelimits.NewLimiter(cfg, memory.New(0), clk)
	if err != nil {
		panic(err)
	}
	login := []ratelimits.Transaction{{Limit: "LoginAttemptsPerUser", ID: "alice", Cost: 1}}
	for range 6 {
		d, err := limiter.Spend(context.Background(), login)
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v remaining=%d retry in %v\n", d.Allowed, d.Remaining, d.RetryIn)
	}
	clk.Add(3 * time.Minute)
	d, _ := limiter.Spend(context.Background(), login)
	fmt.Printf("three minutes later: allowed=%v remaining=%d\n", d.Allowed, d.Remaining)
	// Output:
	// allowed=true remaining=4 retry in 0s
	// allowed=true remaining=3 retry in 0s
	// allowed=true remaining=2 retry in 0s
	// allowed=true remaining=1 retry in 0s
	// allowed=true remaining=0 retry in 3m0s
	// allowed=false remaining=0 retry in 3m0s
	// three minutes later: allowed=true remaining=0
}

// A batch is decided as a whole: if one counting transaction is denied,
// nothing is spent. Errors name the transaction at fault.
func ExampleLimiter_Spend_batch() {
	cfg, _ := configfile.Parse("defaults.yaml", []byte(`
NewOrdersPerAccount:
  burst: 2
  count: 2
  period: 1h
`), "overrides.yaml", nil)
	limiter, _ := ratelimits.NewLimiter(cfg, memory.New(0), clock.NewFake())
	_, err := limiter.Spend(context.Background(), []ratelimits.Transaction{
		{Limit: "NewOrdersPerAccount", ID: "42", Cost: 1},
		{Limit: "NewOrdersPerAccount", ID: "0042", Cost: 1},
	})
	var te *ratelimits.TransactionError
	fmt.Println(errors.Is(err, ratelimits.ErrInvalidID), errors.As(err, &te) && te.Index == 1)
	// Output: true true
}
