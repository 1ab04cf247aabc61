package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/jmhodges/clock"

	"github.com/limiter-dev/limiter/client"
	"github.com/limiter-dev/limiter/configfile"
	"github.com/limiter-dev/limiter/httpapi"
	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/source/memory"
)

// An application spends a login attempt before checking a password. The
// service runs in process here, on a fake clock; a real application
// points BaseURL at its limiter.
func Example() {
	cfg, err := configfile.Parse("defaults.yaml", []byte(`
LoginAttemptsPerUser:
  enum: 101
  id: string
  burst: 2
  count: 2
  period: 1m
`), "overrides.yaml", nil)
	if err != nil {
		panic(err)
	}
	limiter, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.NewFake())
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Limiter: limiter}))
	defer srv.Close()

	c, err := client.New(client.Options{BaseURL: srv.URL})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	login := client.Transaction{Limit: "LoginAttemptsPerUser", ID: "alice"}
	for range 3 {
		d, err := c.Spend(ctx, login)
		if err != nil {
			panic(err)
		}
		if !d.Allowed {
			fmt.Printf("denied: try again in %v\n", d.RetryIn)
			continue
		}
		fmt.Printf("allowed, %d left\n", d.Remaining)
	}

	// A refusal is an *Error with the API's code.
	_, err = c.Spend(ctx, client.Transaction{Limit: "LoginAttemptsPerUser", ID: "alice"}.WithCost(5))
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.StatusCode, e.Code, e.Transaction)
	}
	fmt.Println(client.IsCode(err, client.CodeInvalidCost))
	// Output:
	// allowed, 1 left
	// allowed, 0 left
	// denied: try again in 30s
	// 400 invalid_cost 0
	// true
}

// A batch is decided whole: the order is refused because the account is
// out of orders, so the IP's registration token is not spent either.
func Example_batch() {
	cfg, err := configfile.Parse("defaults.yaml", []byte(`
NewOrdersPerAccount:
  burst: 1
  count: 1
  period: 1h
NewRegistrationsPerIPAddress:
  burst: 10
  count: 10
  period: 1h
`), "overrides.yaml", nil)
	if err != nil {
		panic(err)
	}
	limiter, err := ratelimits.NewLimiter(cfg, memory.New(0), clock.NewFake())
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Limiter: limiter}))
	defer srv.Close()
	c, err := client.New(client.Options{BaseURL: srv.URL})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	batch := []client.Transaction{
		{Limit: "NewOrdersPerAccount", ID: "42"},
		{Limit: "NewRegistrationsPerIPAddress", ID: "192.0.2.7"},
	}
	for range 2 {
		d, err := c.SpendBatch(context.Background(), batch)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.Decisions[0].Allowed, d.Decisions[1].Allowed)
	}
	ip, err := c.Subscriber(context.Background(), "NewRegistrationsPerIPAddress", "192.0.2.7")
	if err != nil {
		panic(err)
	}
	fmt.Println(ip.Remaining, "registrations left")
	// Output:
	// true true true
	// false false true
	// 9 registrations left
}
