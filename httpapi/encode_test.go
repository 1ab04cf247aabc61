package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/limiter-dev/limiter/httpapi/wire"
	"github.com/limiter-dev/limiter/ratelimits"
)

// batchResponse is bd in the wire types, as the contract describes it.
func batchResponse(bd *ratelimits.BatchDecision) wire.BatchResponse {
	resp := wire.BatchResponse{
		Allowed:   bd.Allowed,
		Remaining: max(bd.Remaining, 0),
		RetryInMS: millisUp(bd.RetryIn),
		ResetInMS: millisUp(bd.ResetIn),
		Degraded:  bd.Degraded,
		Decisions: make([]wire.DecisionResponse, len(bd.Decisions)),
	}
	for i := range bd.Decisions {
		resp.Decisions[i] = decisionResponse(&bd.Decisions[i], false)
	}
	return resp
}

// decisionResponse is d in the wire types; withSyncRate adds the
// sync_rate of a window limit, as GET /v1/limits/{limit}/{id} shows it.
func decisionResponse(d *ratelimits.Decision, withSyncRate bool) wire.DecisionResponse {
	resp := wire.DecisionResponse{
		Limit:     d.Limit,
		ID:        d.ID,
		Allowed:   d.Allowed,
		Remaining: max(d.Remaining, 0),
		RetryInMS: millisUp(d.RetryIn),
		ResetInMS: millisUp(d.ResetIn),
		Unlimited: d.Unlimited,
		Burst:     d.Effective.Burst,
		Count:     d.Effective.Count,
		Period:    d.Effective.Period.String(),
		Override:  d.Effective.Override,
		Algorithm: d.Algorithm.String(),
		Shadow:    d.Shadow,
	}
	if d.Effective.Penalty > 0 {
		penalized := d.Penalized
		resp.Penalized = &penalized
	}
	if withSyncRate && !d.Unlimited && (d.Effective.Algorithm.Windowed() || d.Effective.Algorithm == ratelimits.RateCounter) {
		seconds := d.Effective.SyncRate.Seconds()
		resp.SyncRate = &seconds
	}
	return resp
}

// standardJSON is what encoding/json writes for v, newline included, with
// HTML characters left as they are (the API is not embedded in HTML).
func standardJSON(t testing.TB, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// checkEncodersAgree asserts that the hand encoder writes exactly the bytes
// encoding/json writes for the wire types, for a batch and for each of its
// decisions alone, with and without the sync_rate of the answer of
// GET /v1/limits/{limit}/{id}.
func checkEncodersAgree(t testing.TB, bd *ratelimits.BatchDecision) {
	t.Helper()
	if got, want := appendBatch(nil, bd), standardJSON(t, batchResponse(bd)); !bytes.Equal(got, want) {
		t.Fatalf("appendBatch wrote\n%s\nencoding/json writes\n%s", got, want)
	}
	for i := range bd.Decisions {
		d := &bd.Decisions[i]
		for _, withSyncRate := range []bool{false, true} {
			if got, want := append(appendDecision(nil, d, withSyncRate), '\n'), standardJSON(t, decisionResponse(d, withSyncRate)); !bytes.Equal(got, want) {
				t.Fatalf("appendDecision (sync_rate %v) wrote\n%s\nencoding/json writes\n%s", withSyncRate, got, want)
			}
		}
	}
}

// tricky are the characters a JSON string encoder can get wrong: quotes and
// backslashes, every control character, HTML characters, the two line
// separators JavaScript does not allow in strings, invalid and truncated
// UTF-8, and multi-byte runes.
var tricky = func() []string {
	s := []string{`"`, `\`, "/", "<", ">", "&", "\u2028", "\u2029", "\x7f", "\xff", "\xc3", "\xe2\x80", "é", "€", "😀", "\ufffd", "a", "Z", "0", " ", "-", ":"}
	for c := range 0x20 {
		s = append(s, string(rune(c)))
	}
	return s
}()

// randomString joins up to 12 tricky pieces.
func randomString(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(13) {
		b.WriteString(tricky[r.IntN(len(tricky))])
	}
	return b.String()
}

// randomInt64 favours the edges: zero, ±1, the extremes, then anything.
func randomInt64(r *rand.Rand) int64 {
	switch r.IntN(6) {
	case 0:
		return []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 999_999, 1_000_000}[r.IntN(7)]
	case 1:
		return r.Int64N(10_000_000_000)
	case 2:
		return -r.Int64N(1_000)
	}
	return int64(r.Uint64())
}

func randomDecision(r *rand.Rand) ratelimits.Decision {
	return ratelimits.Decision{
		Limit:     randomString(r),
		ID:        randomString(r),
		Allowed:   r.IntN(2) == 0,
		Remaining: randomInt64(r),
		RetryIn:   time.Duration(randomInt64(r)),
		ResetIn:   time.Duration(randomInt64(r)),
		Unlimited: r.IntN(2) == 0,
		Effective: ratelimits.Limit{
			Algorithm: randomAlgorithm(r),
			Burst:     randomInt64(r),
			Count:     randomInt64(r),
			Period:    time.Duration(randomInt64(r)),
			Override:  r.IntN(2) == 0,
			SyncRate:  randomSyncRate(r),
			Penalty:   []time.Duration{0, 0, time.Second, time.Hour}[r.IntN(4)],
		},
		Algorithm: randomAlgorithm(r),
		Penalized: r.IntN(2) == 0,
		Shadow:    r.IntN(2) == 0,
	}
}

// randomAlgorithm is any algorithm, or a value that is none.
func randomAlgorithm(r *rand.Rand) ratelimits.Algorithm {
	return ratelimits.Algorithm(r.IntN(5))
}

// randomSyncRate favours what a configuration holds (0, -1s, whole
// milliseconds and seconds), then reaches the float forms: nanoseconds
// (exponent form), the extremes, anything.
func randomSyncRate(r *rand.Rand) time.Duration {
	switch r.IntN(5) {
	case 0:
		return []time.Duration{0, -time.Second, -1, 1, time.Millisecond, 500 * time.Millisecond, time.Hour, math.MaxInt64, math.MinInt64}[r.IntN(9)]
	case 1:
		return time.Duration(r.Int64N(1e6)) * time.Millisecond
	case 2:
		return -time.Duration(r.Int64N(1e3))
	}
	return time.Duration(randomInt64(r))
}

// TestEncodeMatchesEncodingJSON compares the two encoders on random
// batches of zero to four decisions.
func TestEncodeMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 5))
	for range 5000 {
		bd := &ratelimits.BatchDecision{
			Allowed:   r.IntN(2) == 0,
			Remaining: randomInt64(r),
			RetryIn:   time.Duration(randomInt64(r)),
			ResetIn:   time.Duration(randomInt64(r)),
			Degraded:  r.IntN(4) == 0,
			Decisions: make([]ratelimits.Decision, r.IntN(5)),
		}
		for i := range bd.Decisions {
			bd.Decisions[i] = randomDecision(r)
		}
		checkEncodersAgree(t, bd)
	}
}

// FuzzEncode compares the two encoders on any names, ids and numbers.
func FuzzEncode(f *testing.F) {
	f.Add("NewOrdersPerAccount", "12345", int64(99), int64(0), int64(10_000_000), int64(100), int64(100), int64(time.Second), uint8(5))
	f.Add("\"\\\b\f\n\r\t\x00\x1f", "<>&\u2028\u2029\xff", int64(-1), int64(1), int64(math.MaxInt64), int64(math.MinInt64), int64(0), int64(-1), uint8(0xff))
	f.Add("APIRequestsPerConsumer", "gold", int64(3), int64(1), int64(120_000_000_000), int64(100), int64(100), int64(time.Minute), uint8(0x45))
	f.Add("Uploads", "7", int64(0), int64(-1), int64(0), int64(10), int64(10), int64(time.Hour), uint8(0x81))
	f.Fuzz(func(t *testing.T, limit, id string, remaining, retryIn, resetIn, burst, count, period int64, flags uint8) {
		// The top bits choose the algorithm and, for a window or a rate
		// counter, a sync_rate from the numbers already drawn; bit 5 a
		// penalty box, whose penalized is bit 0.
		alg := ratelimits.Algorithm(flags >> 6)
		d := ratelimits.Decision{
			Limit: limit, ID: id, Allowed: flags&1 != 0, Remaining: remaining,
			RetryIn: time.Duration(retryIn), ResetIn: time.Duration(resetIn), Unlimited: flags&2 != 0,
			Effective: ratelimits.Limit{Algorithm: alg, Burst: burst, Count: count, Period: time.Duration(period), Override: flags&4 != 0,
				SyncRate: time.Duration(retryIn - resetIn), Penalty: time.Duration(flags&32) * time.Second},
			Algorithm: alg,
			Penalized: flags&1 != 0,
			Shadow:    flags&2 != 0 && flags&1 == 0,
		}
		swapped := d
		swapped.Limit, swapped.ID = id, limit
		checkEncodersAgree(t, &ratelimits.BatchDecision{
			Allowed: flags&8 != 0, Remaining: remaining, RetryIn: time.Duration(retryIn), ResetIn: time.Duration(resetIn),
			Degraded: flags&16 != 0, Decisions: []ratelimits.Decision{d, swapped},
		})
	})
}
