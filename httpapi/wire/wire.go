// Package wire declares the JSON bodies of the HTTP API, once: the
// handlers answer with them (the hot decision answers through a hand
// encoder that a test holds to these types byte for byte), and tests and
// benchmarks decode into them. It imports nothing, so any of them may use
// it. The Go client, a module of its own that imports only the standard
// library, keeps copies of the bodies it sends and reads; test/client
// holds those copies to these types field for field.
package wire

// TransactionRequest is one transaction: the body of a single-transaction
// request, or an element of BatchRequest. Cost is a pointer because an
// absent cost means 1 and an explicit 0 reads the bucket.
type TransactionRequest struct {
	Limit string `json:"limit"`
	ID    string `json:"id"`
	Cost  *int64 `json:"cost,omitempty"`
	Mode  string `json:"mode,omitempty"`
}

// LeaseRequest is one lease to release or renew: the body of a
// single-lease request to POST /v1/release or /v1/renew, or an element of
// LeaseBatchRequest. Lease is the id a spend answered.
type LeaseRequest struct {
	Limit string `json:"limit"`
	ID    string `json:"id"`
	Lease string `json:"lease"`
}

// LeaseBatchRequest is the body of a release or renew of several leases.
type LeaseBatchRequest struct {
	Transactions []LeaseRequest `json:"transactions"`
}

// BatchRequest is the body of a request with several transactions.
type BatchRequest struct {
	Transactions []TransactionRequest `json:"transactions"`
}

// BatchResponse answers POST /v1/spend, /v1/check and /v1/refund: the
// batch's deciding figures, then every transaction's decision in request
// order. Durations are milliseconds, rounded up so that a client that waits
// them is never early. Degraded is present only when true: the source
// failed and the service answered allowed without deciding.
type BatchResponse struct {
	Allowed   bool               `json:"allowed"`
	Remaining int64              `json:"remaining"`
	RetryInMS int64              `json:"retry_in_ms"`
	ResetInMS int64              `json:"reset_in_ms"`
	Degraded  bool               `json:"degraded,omitempty"`
	Decisions []DecisionResponse `json:"decisions"`
}

// DecisionResponse is one transaction's decision, and the answer of
// GET /v1/limits/{limit}/{id}. Burst, Count and Period are the effective
// limit (zero for an unlimited one); Period is a Go duration string. For
// a window limit, Burst and Count are both the hits allowed per window
// and Period is the window; for a rate-counter limit they are rate ×
// window and Period is the window. Algorithm is how the limit counts:
// "gcra", "sliding-window", "fixed-window", "rate-counter", "calendar" or
// "concurrency". For a calendar limit, Burst and Count are both the hits
// allowed per period, Period is its word ("day", "week", "month" or
// "year"), Timezone its zone's IANA name and PeriodEnd the end of the
// current period, RFC 3339 in UTC with milliseconds
// ("2026-12-31T23:00:00.000Z"). For a concurrency limit, Burst and Count
// are its slots and Period a lease's time to live. Penalized is
// there exactly when the limit has a penalty box: whether the id is in it
// after this transaction. Shadow is there, true, for a shadow limit: it
// never denies the batch, and Allowed is what it would have decided.
// SyncRate, in seconds, is only in the answer of
// GET /v1/limits/{limit}/{id}, for a window or rate-counter limit.
type DecisionResponse struct {
	Limit     string `json:"limit"`
	ID        string `json:"id"`
	Allowed   bool   `json:"allowed"`
	Remaining int64  `json:"remaining"`
	RetryInMS int64  `json:"retry_in_ms"`
	ResetInMS int64  `json:"reset_in_ms"`
	Unlimited bool   `json:"unlimited"`
	Burst     int64  `json:"burst"`
	Count     int64  `json:"count"`
	Period    string `json:"period"`
	Override  bool   `json:"override"`
	Algorithm string `json:"algorithm"`
	Timezone  string `json:"timezone,omitempty"`
	PeriodEnd string `json:"period_end,omitempty"`
	Penalized *bool  `json:"penalized,omitempty"`
	Shadow    bool   `json:"shadow,omitempty"`
	// Lease and LeaseExpiresInMS are there only in the decision of an
	// acquire of a concurrency limit that was written: the lease's id,
	// which release and renew name, and its time to live.
	Lease            string   `json:"lease,omitempty"`
	LeaseExpiresInMS int64    `json:"lease_expires_in_ms,omitempty"`
	SyncRate         *float64 `json:"sync_rate,omitempty"`
}

// ResetResponse answers POST /v1/reset: how many of the buckets were not
// full.
type ResetResponse struct {
	Reset int `json:"reset"`
}

// LimitsResponse answers GET /v1/limits: every known limit name.
type LimitsResponse struct {
	Limits []LimitResponse `json:"limits"`
}

// LimitResponse describes one limit name: how it counts (Algorithm, and
// for a window or rate-counter limit SyncRate in seconds, both the
// name's), its Default (null when the name has none), and Overrides, how
// many ids have their own limit. Capacity is there when the name has a
// penalty box (a rate counter, or a limit with a penalty): how many
// entries each of its counters and its box hold in process memory.
// Shadow is there, true, for a shadow limit, which never denies.
type LimitResponse struct {
	Limit     string         `json:"limit"`
	Enum      int            `json:"enum"`
	IDKind    string         `json:"id_kind"`
	Declared  bool           `json:"declared"`
	Algorithm string         `json:"algorithm"`
	SyncRate  *float64       `json:"sync_rate,omitempty"`
	Capacity  int            `json:"capacity,omitempty"`
	Shadow    bool           `json:"shadow,omitempty"`
	Default   *LimitSettings `json:"default"`
	Overrides int            `json:"overrides"`
}

// LimitSettings is a limit as the configuration files spell it: a GCRA
// limit's burst, count and period, a window limit's count and period (a
// window has no burst), a calendar limit's count, period word and
// timezone, or a rate-counter limit's window, rate and penalty. Penalty, a Go duration string, is there for any limit that has
// one.
type LimitSettings struct {
	Burst    int64  `json:"burst,omitempty"`
	Count    int64  `json:"count,omitempty"`
	Period   string `json:"period,omitempty"`
	Window   string `json:"window,omitempty"`
	Rate     int64  `json:"rate,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	Penalty  string `json:"penalty,omitempty"`
}

// ReloadResponse answers a successful POST /v1/admin/reload.
type ReloadResponse struct {
	Reloaded bool `json:"reloaded"`
}

// StatusResponse answers /healthz and /readyz.
type StatusResponse struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// ErrorResponse is the body of every 4xx and 5xx answer.
type ErrorResponse struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a refusal: Code is stable for programs to switch on,
// Message is for people, and Transaction, when present, is the index of
// the transaction of the batch it concerns.
type ErrorDetail struct {
	Code        string `json:"code"`
	Message     string `json:"message"`
	Transaction *int   `json:"transaction,omitempty"`
}

// ClockRequest moves the fake clock at POST /debug/clock: exactly one of
// Advance (a Go duration) or Set (an RFC 3339 time).
type ClockRequest struct {
	Advance *string `json:"advance,omitempty"`
	Set     *string `json:"set,omitempty"`
}

// ClockResponse is the fake clock's time, RFC 3339 with nanoseconds.
type ClockResponse struct {
	Now string `json:"now"`
}
