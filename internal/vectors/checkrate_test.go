package vectors

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
	"github.com/limiter-dev/limiter/source/sourcetest"
)

// TestCheckRateSpendPathIsTheCall: a check_rate whose box is its own
// counter's is answered through the source's spend of one rate-counter op;
// every answer must be the one the ERL call's own rules (bucket.ApplyCall,
// on the model) give, over random deltas, windows, limits, TTLs and times.
func TestCheckRateSpendPathIsTheCall(t *testing.T) {
	f, err := Algorithms()
	if err != nil {
		t.Fatal(err)
	}
	l, clk := newAlgorithmsLimiter(t, f, NewModelSource())
	model := sourcetest.Model{}
	rng := rand.New(rand.NewPCG(3, 4))
	const key = "306:203.0.113.50" // RequestsPerIP's enum and the entry
	for step := range 3000 {
		clk.Add(time.Duration(rng.Int64N(int64(4 * time.Second))))
		chk := ratelimits.RateCheck{Counter: "RequestsPerIP", Delta: rng.Int64N(40), Window: []int64{1, 10, 60}[rng.IntN(3)], Limit: 10 + rng.Int64N(5)}
		ttl := time.Duration(60+rng.IntN(3540)) * time.Second
		got, err := l.CheckRate(context.Background(), "203.0.113.50", []ratelimits.RateCheck{chk}, "RequestsPerIP", ttl)
		if err != nil {
			t.Fatal(err)
		}
		now := clk.Now().UnixNano()
		call := bucket.Call{
			Counters: []bucket.CounterCheck{{Key: key, Delta: chk.Delta, Limit: ratecounter.Limit{Window: chk.Window, Rate: chk.Limit}}},
			Box:      key, Action: bucket.BoxWhenAbove, Until: ratelimits.BoxUntil(now, ttl),
		}
		var want bucket.CallResult
		model.Call(now, &call, &want)
		hits := want.Counters[0].Window(ratecounter.Second(now), chk.Window)
		expiresIn := time.Duration(max(0, want.Expires-now))
		if got.Hits[0] != hits || got.Exceeded[0] != want.Above[0] || got.Penalized != (want.Expires > now) || got.PenaltyExpiresIn != expiresIn {
			t.Fatalf("step %d, %+v ttl %s: got %+v; the call gives hits %d, above %v, expires in %s", step, chk, ttl, got, hits, want.Above[0], expiresIn)
		}
	}
}
