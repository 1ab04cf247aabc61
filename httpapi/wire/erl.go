package wire

// The bodies of the ERL endpoints (Fastly's Edge Rate Limiting: rate
// counters and penalty boxes). Request fields are pointers so that a
// missing field is told from a zero one: every field of a request is
// required. Durations sent are Go duration strings ("10m"); durations
// answered are whole milliseconds, rounded up.

// CheckRateRequest is the body of POST /v1/erl/check_rate: Delta hits are
// added to Entry's counter of the rate-counter limit RateCounter, whose
// rate over Window seconds (1, 10 or 60) is then compared with Limit hits
// per second; above it, Entry is put in PenaltyBox for TTL.
type CheckRateRequest struct {
	Entry       *string `json:"entry"`
	RateCounter *string `json:"ratecounter"`
	Delta       *int64  `json:"delta"`
	Window      *int64  `json:"window"`
	Limit       *int64  `json:"limit"`
	PenaltyBox  *string `json:"penaltybox"`
	TTL         *string `json:"ttl"`
}

// CheckRateResponse answers check_rate. Rate is the counter's rate over
// the window after the hits, in hits per second (a JSON number, not
// rounded: hits / window). Penalized says Entry is in the box after the
// call, for PenaltyExpiresInMS more (0 when not).
type CheckRateResponse struct {
	Penalized          bool    `json:"penalized"`
	Rate               float64 `json:"rate"`
	PenaltyExpiresInMS int64   `json:"penalty_expires_in_ms"`
}

// RateCheckRequest is one of the two checks of POST /v1/erl/check_rates.
type RateCheckRequest struct {
	RateCounter *string `json:"ratecounter"`
	Delta       *int64  `json:"delta"`
	Window      *int64  `json:"window"`
	Limit       *int64  `json:"limit"`
}

// CheckRatesRequest is the body of POST /v1/erl/check_rates: exactly two
// checks, on two different counters, of one entry, and one box it goes
// into when either check goes above its limit.
type CheckRatesRequest struct {
	Entry      *string             `json:"entry"`
	Checks     *[]RateCheckRequest `json:"checks"`
	PenaltyBox *string             `json:"penaltybox"`
	TTL        *string             `json:"ttl"`
}

// CheckRatesResponse answers check_rates: each check's rate and whether
// it went above its limit, in request order, and the box as in
// CheckRateResponse.
type CheckRatesResponse struct {
	Penalized          bool      `json:"penalized"`
	Rates              []float64 `json:"rates"`
	Exceeded           []bool    `json:"exceeded"`
	PenaltyExpiresInMS int64     `json:"penalty_expires_in_ms"`
}

// IncrementRequest is the body of POST
// /v1/erl/ratecounters/{ratecounter}/increment: Delta hits (0 to 1,000)
// added to Entry's counter.
type IncrementRequest struct {
	Entry *string `json:"entry"`
	Delta *int64  `json:"delta"`
}

// IncrementResponse answers increment with the entry's bucket.60s after
// the hits.
type IncrementResponse struct {
	Bucket60s int64 `json:"bucket_60s"`
}

// RateCounterResponse answers GET /v1/erl/ratecounters/{ratecounter}/{entry}:
// the canonical entry, its hits in the aligned ten-second blocks of the
// last 10 to 60 seconds, and its rates over the last 1, 10 and 60
// seconds in hits per second. An entry never counted reads as zeros.
type RateCounterResponse struct {
	Entry   string      `json:"entry"`
	Buckets RateBuckets `json:"buckets"`
	Rates   Rates       `json:"rates"`
}

// RateBuckets are Fastly's bucket.10s to bucket.60s.
type RateBuckets struct {
	S10 int64 `json:"10s"`
	S20 int64 `json:"20s"`
	S30 int64 `json:"30s"`
	S40 int64 `json:"40s"`
	S50 int64 `json:"50s"`
	S60 int64 `json:"60s"`
}

// Rates are Fastly's rate.1s, rate.10s and rate.60s.
type Rates struct {
	S1  float64 `json:"1s"`
	S10 float64 `json:"10s"`
	S60 float64 `json:"60s"`
}

// BoxAddRequest is the body of POST /v1/erl/penaltyboxes/{penaltybox}/add.
type BoxAddRequest struct {
	Entry *string `json:"entry"`
	TTL   *string `json:"ttl"`
}

// BoxAddResponse answers add: how long the entry now stays in the box.
type BoxAddResponse struct {
	PenaltyExpiresInMS int64 `json:"penalty_expires_in_ms"`
}

// BoxHasResponse answers GET /v1/erl/penaltyboxes/{penaltybox}/{entry}.
type BoxHasResponse struct {
	Has                bool  `json:"has"`
	PenaltyExpiresInMS int64 `json:"penalty_expires_in_ms"`
}

// BoxRemoveRequest is the body of POST
// /v1/erl/penaltyboxes/{penaltybox}/remove.
type BoxRemoveRequest struct {
	Entry *string `json:"entry"`
}

// BoxRemoveResponse answers remove: whether the entry was in the box.
type BoxRemoveResponse struct {
	Removed bool `json:"removed"`
}
