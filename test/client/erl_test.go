package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/client"
)

// Rate counters and penalty boxes through the ERL calls, on the Hits rate
// counter (10 hits a second over a minute, boxed for 5 minutes).
func TestERLCalls(t *testing.T) {
	s := newServer(t, serverOptions{})
	c := newClient(t, s, client.Options{})
	ctx := context.Background()
	const entry = "2001:DB8::7" // canonicalised by the ip kind
	hits := func(delta int64) client.RateCheck {
		return client.RateCheck{RateCounter: "Hits", Delta: delta, Window: 60, Limit: 10}
	}

	if n, err := c.Increment(ctx, "Hits", entry, 30); err != nil || n != 30 {
		t.Fatalf("increment: %d %v, want 30 in the minute's blocks", n, err)
	}
	res, err := c.CheckRate(ctx, entry, hits(570), "Hits", 5*time.Minute)
	if err != nil || res != (client.RateResult{Rate: 10}) {
		t.Fatalf("600 hits in a minute: %+v %v, want a rate of 10, not boxed", res, err)
	}
	reading, err := c.RateCounter(ctx, "Hits", entry)
	want := &client.RateCounterReading{Entry: "2001:db8::7", Buckets: [6]int64{600, 600, 600, 600, 600, 600}, Rate1s: 600, Rate10s: 60, Rate60s: 10}
	if err != nil || *reading != *want {
		t.Fatalf("reading: %+v %v, want %+v", reading, err, want)
	}
	rates, err := c.CheckRates(ctx, entry, [2]client.RateCheck{hits(1), {RateCounter: "Other", Delta: 1, Window: 10, Limit: 10}}, "Hits", 5*time.Minute)
	if !client.IsCode(err, client.CodeUnknownLimit) {
		t.Fatalf("check_rates naming an unknown counter: %+v %v, want unknown_limit", rates, err)
	}
	res, err = c.CheckRate(ctx, entry, hits(1), "Hits", 5*time.Minute)
	if err != nil || !res.Penalized || res.PenaltyExpiresIn != 5*time.Minute {
		t.Fatalf("the 601st hit: %+v %v, want boxed for 5m", res, err)
	}
	if has, in, err := c.PenaltyBoxHas(ctx, "Hits", entry); err != nil || !has || in != 5*time.Minute {
		t.Fatalf("has: %v %v %v", has, in, err)
	}
	if removed, err := c.PenaltyBoxRemove(ctx, "Hits", entry); err != nil || !removed {
		t.Fatalf("remove: %v %v", removed, err)
	}
	if in, err := c.PenaltyBoxAdd(ctx, "Lockout", "mallory", 89*time.Second); err != nil || in != time.Minute {
		t.Fatalf("add on a minute mark: %v %v, want the TTL rounded to 1m", in, err)
	}
	if has, _, err := c.PenaltyBoxHas(ctx, "Lockout", "mallory"); err != nil || !has {
		t.Fatalf("has after add: %v %v", has, err)
	}
	if _, err := c.PenaltyBoxAdd(ctx, "Logins", "mallory", time.Minute); !client.IsCode(err, client.CodeInvalidArgument) {
		t.Fatalf("add to a limit without a box: %v, want invalid_argument", err)
	}
}

// check_rates: two counters of one entry, decided together; either going
// above its limit boxes the entry.
func TestCheckRates(t *testing.T) {
	s := newServer(t, serverOptions{})
	c := newClient(t, s, client.Options{})
	ctx := context.Background()
	res, err := c.CheckRates(ctx, "192.0.2.1", [2]client.RateCheck{
		{RateCounter: "Hits", Delta: 100, Window: 60, Limit: 10},
		{RateCounter: "Spikes", Delta: 101, Window: 10, Limit: 10},
	}, "Hits", time.Minute)
	want := client.RatesResult{Penalized: true, PenaltyExpiresIn: time.Minute, Rates: [2]float64{100.0 / 60, 10.1}, Exceeded: [2]bool{false, true}}
	if err != nil || res != want {
		t.Fatalf("check_rates: %+v %v, want %+v", res, err, want)
	}
	res, err = c.CheckRates(ctx, "192.0.2.1", [2]client.RateCheck{
		{RateCounter: "Hits", Delta: 1, Window: 10, Limit: 10},
		{RateCounter: "Hits", Delta: 1, Window: 60, Limit: 10},
	}, "Hits", time.Minute)
	if !client.IsCode(err, client.CodeInvalidArgument) {
		t.Fatalf("two checks of one counter: %+v %v, want invalid_argument", res, err)
	}
}
