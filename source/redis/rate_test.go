package redis

import (
	"math/rand/v2"
	"testing"

	"github.com/limiter-dev/limiter/ratelimits/ratecounter"
)

// A packed rate counter reads back as the counter it was made from, at
// any second an int64 of nanoseconds holds, before 1970 too, with counts
// up to ratecounter.MaxHitsPerSecond; it is never read as another
// algorithm's value, nor one of those as a counter.
func TestRateCounterPacking(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lasts := []int64{0, 1, -1, 1_790_000_000, -6, 9_223_372_036, -9_223_372_037}
	for i := range 2000 {
		last := lasts[i%len(lasts)]
		c := ratecounter.Counter{Last: last}
		for range 1 + rng.IntN(8) {
			c.Add(last-rng.Int64N(ratecounter.Seconds), 1+rng.Int64N(ratecounter.MaxHitsPerSecond))
		}
		s := formatRate(&c)
		if !isRate(s) {
			t.Fatalf("counter %+v packed as %q: not read as a counter", c, s)
		}
		got, err := parseRate(s)
		if err != nil || got != c {
			t.Fatalf("counter %+v packed as %q reads back as %+v, %v", c, s, got, err)
		}
	}
	for _, v := range []string{"1790000000123456789", "-5", "60000:29833334:17:40", "-60000:1:2:3", ""} {
		if isRate(v) {
			t.Errorf("%q read as a rate counter", v)
		}
	}
	var empty ratecounter.Counter
	if s := formatRate(&empty); s != "" {
		t.Errorf("a counter without hits packed as %q, want \"\"", s)
	}
}
