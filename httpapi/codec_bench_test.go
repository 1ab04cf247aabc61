package httpapi

import (
	"testing"
	"time"

	"github.com/limiter-dev/limiter/ratelimits"
)

// BenchmarkDecode reads a one-transaction body and a batch of three.
func BenchmarkDecode(b *testing.B) {
	for _, c := range []struct{ name, body string }{
		{"single", `{"limit":"APIRequestsPerKey","id":"key-1234","cost":1}`},
		{"batch3", `{"transactions":[{"limit":"A","id":"1"},{"limit":"B","id":"2","mode":"check-only"},{"limit":"C","id":"3","cost":2}]}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			body := []byte(c.body)
			b.ReportAllocs()
			for b.Loop() {
				if _, e := decodeBody(body, 100, decisionBody); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}

// BenchmarkEncode writes the answer to a one-transaction spend, headers
// included.
func BenchmarkEncode(b *testing.B) {
	bd := &ratelimits.BatchDecision{Allowed: true, Remaining: 99, ResetIn: 10 * time.Millisecond, Decisions: []ratelimits.Decision{{
		Limit: "APIRequestsPerKey", ID: "key-1234", Allowed: true, Remaining: 99, ResetIn: 10 * time.Millisecond,
		Effective: mustLimit(b, 100, 100, time.Second),
	}}}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		h := make(map[string][]string, 4)
		setRateLimitHeaders(h, bd)
		buf = appendBatch(buf[:0], bd)
	}
}

// mustLimit is ratelimits.NewLimit for values a test knows are valid.
func mustLimit(tb testing.TB, burst, count int64, period time.Duration) ratelimits.Limit {
	tb.Helper()
	l, err := ratelimits.NewLimit(burst, count, period)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// BenchmarkDecodeCheckRate reads a check_rate body and a check_rates body.
func BenchmarkDecodeCheckRate(b *testing.B) {
	b.Run("check_rate", func(b *testing.B) {
		benchmarkDecodeERL(b, checkRateFields, nil, `{"entry":"192.0.2.1","ratecounter":"RequestsPerClientIP","delta":1,"window":10,"limit":100,"penaltybox":"RequestsPerClientIP","ttl":"15m"}`)
	})
	b.Run("check_rates", func(b *testing.B) {
		benchmarkDecodeERL(b, checkRatesFields, rateCheckFields, `{"entry":"192.0.2.1","checks":[{"ratecounter":"A","delta":1,"window":10,"limit":100},{"ratecounter":"B","delta":1,"window":60,"limit":30}],"penaltybox":"A","ttl":"15m"}`)
	})
}

func benchmarkDecodeERL(b *testing.B, fields, checkFields []string, text string) {
	body := []byte(text)
	b.ReportAllocs()
	for b.Loop() {
		if _, e := decodeERLBody(body, fields, checkFields); e != nil {
			b.Fatal(e)
		}
	}
}
