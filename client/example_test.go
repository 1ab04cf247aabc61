package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/limiter-dev/limiter/client"
)

// An application spends a login attempt before checking a password.
// (BaseURL is where the application's limiter listens; this example only
// compiles, as it has no service to call. The main module's test/client
// runs the same calls against the service's handler.)
func Example() {
	c, err := client.New(client.Options{BaseURL: "http://limiter.internal:8080", APIToken: "api-token"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	d, err := c.Spend(context.Background(), client.Transaction{Limit: "LoginAttemptsPerUser", ID: "alice"})
	var e *client.Error
	switch {
	case errors.As(err, &e):
		// A refusal: the API's status and code, and the transaction at fault.
		log.Printf("refused: %d %s (transaction %d): %s", e.StatusCode, e.Code, e.Transaction, e.Message)
	case err != nil:
		// The service could not be reached, or did not answer.
		log.Print(err)
	case !d.Allowed:
		fmt.Printf("denied: try again in %v\n", d.RetryIn)
	default:
		fmt.Printf("allowed, %d left\n", d.Remaining)
	}
}

// A batch is decided whole: when one transaction is denied, none is
// spent.
func ExampleClient_SpendBatch() {
	c, err := client.New(client.Options{BaseURL: "http://limiter.internal:8080"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	d, err := c.SpendBatch(context.Background(), []client.Transaction{
		{Limit: "NewOrdersPerAccount", ID: "42"},
		{Limit: "NewRegistrationsPerIPAddress", ID: "192.0.2.7"},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range d.Decisions {
		fmt.Println(t.Limit, t.ID, t.Allowed, t.Remaining)
	}
}

// An operator lists everyone in a penalty box, one page at a time: a
// page may be empty and still have a next one, so the loop ends on the
// cursor, not on an empty page.
func ExampleClient_Boxes() {
	c, err := client.New(client.Options{BaseURL: "http://limiter.internal:8080", AdminToken: "admin-token"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for cursor := ""; ; {
		page, err := c.Boxes(context.Background(), "LoginLockout", cursor)
		if err != nil {
			log.Fatal(err)
		}
		for _, e := range page.Entries {
			fmt.Printf("%s leaves in %v\n", e.ID, e.ExpiresIn)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
}
