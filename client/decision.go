package client

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"
)

// Algorithm is how a limit counts, as the service names it.
type Algorithm string

// The algorithms the service has today. A newer service may answer with
// another; the client passes it on as it is.
const (
	GCRA          Algorithm = "gcra"
	SlidingWindow Algorithm = "sliding-window"
	FixedWindow   Algorithm = "fixed-window"
	RateCounter   Algorithm = "rate-counter"
	// Calendar counts hits per calendar day, week, month or year of a
	// time zone.
	Calendar Algorithm = "calendar"
	// Concurrency bounds how much an id does at once: a spend acquires a
	// lease (Client.Acquire), which Release ends and Renew extends.
	Concurrency Algorithm = "concurrency"
)

// Decision is the answer to a spend, check or refund: the batch's figures,
// which come from its deciding transaction (the strictest one that
// counts), then every transaction's own decision. A denial is a Decision
// with Allowed false, not an error.
type Decision struct {
	// Allowed says the batch was allowed (and, for a spend, written).
	Allowed bool
	// Remaining is the deciding transaction's remaining tokens; the
	// largest int64 when no transaction counts (all spend-only, shadow or
	// unlimited).
	Remaining int64
	// RetryIn is how long until a batch of the same costs would be
	// allowed; ResetIn how long until the deciding bucket is full. Both
	// are rounded up to the millisecond, so a caller that waits them is
	// never early.
	RetryIn time.Duration
	ResetIn time.Duration
	// Degraded says the service's source failed and it answered allowed
	// without deciding (a service run with --fail-open).
	Degraded bool
	// Decisions has one entry per transaction, in request order.
	Decisions []TransactionDecision
	// Replayed says the answer is the recorded one of an earlier request
	// with the same idempotency key: this request decided and spent
	// nothing. Its durations are those of the first answer.
	Replayed bool
	// Header holds the answer's HTTP headers. Spend and check answers
	// carry RateLimit, RateLimit-Policy and, when denied, Retry-After,
	// which an application may pass on to its own callers.
	Header http.Header
}

// TransactionDecision is one transaction's decision, and the answer of
// Client.Subscriber.
type TransactionDecision struct {
	// Limit is the limit's name; ID the canonical id, the one the bucket
	// belongs to.
	Limit string
	ID    string
	// Allowed, Remaining, RetryIn and ResetIn are as in Decision, for this
	// transaction alone.
	Allowed   bool
	Remaining int64
	RetryIn   time.Duration
	ResetIn   time.Duration
	// Unlimited says the name has neither a default nor an override for
	// this id: always allowed, never stored, Burst, Count and Period zero.
	Unlimited bool
	// Burst, Count and Period are the effective limit: Count tokens per
	// Period, at most Burst at once. For a window limit, Burst and Count
	// are the hits per window and Period the window; for a rate counter,
	// rate × window and the window. For a calendar limit, Burst and Count
	// are the hits per period, Period is 0 and CalendarPeriod says which
	// period it is.
	Burst  int64
	Count  int64
	Period time.Duration
	// CalendarPeriod, Timezone and PeriodEnd are a calendar limit's: its
	// period ("day", "week", "month" or "year") of the IANA zone Timezone,
	// and when the current one ends, the count starting again from 0.
	// They are empty and zero for other limits.
	CalendarPeriod string
	Timezone       string
	PeriodEnd      time.Time
	// Override says the limit is the id's own, not the name's default.
	Override bool
	// Algorithm is how the limit counts.
	Algorithm Algorithm
	// HasPenaltyBox says the limit has a penalty box (a rate counter, or a
	// limit with a penalty). Only then does Penalized mean anything: the
	// id is in the box after this transaction, and the figures are the
	// box's (Remaining 0, RetryIn the time left in it).
	HasPenaltyBox bool
	Penalized     bool
	// Shadow says the limit is a shadow limit: it never denies, and the
	// figures say what it would have decided.
	Shadow bool
	// HasSyncRate says SyncRate is known: only answers of
	// Client.Subscriber carry it, for a window or rate-counter limit.
	// SyncRate is the name's sync_rate: 0 decides on the shared source,
	// above 0 syncs that often, below 0 counts in each process alone.
	HasSyncRate bool
	SyncRate    time.Duration
	// Lease is the id of the lease a written acquire of a concurrency
	// limit took, and LeaseExpiresIn its time to live; empty and 0 for
	// every other decision.
	Lease          string
	LeaseExpiresIn time.Duration
}

// decisionJSON is a decision as the service sends it.
type decisionJSON struct {
	Limit     string   `json:"limit"`
	ID        string   `json:"id"`
	Allowed   bool     `json:"allowed"`
	Remaining int64    `json:"remaining"`
	RetryInMS int64    `json:"retry_in_ms"`
	ResetInMS int64    `json:"reset_in_ms"`
	Unlimited bool     `json:"unlimited"`
	Burst     int64    `json:"burst"`
	Count     int64    `json:"count"`
	Period    string   `json:"period"`
	Override  bool     `json:"override"`
	Algorithm string   `json:"algorithm"`
	Timezone  string   `json:"timezone"`
	PeriodEnd string   `json:"period_end"`
	Penalized *bool    `json:"penalized"`
	Shadow    bool     `json:"shadow"`
	Lease     string   `json:"lease"`
	LeaseMS   int64    `json:"lease_expires_in_ms"`
	SyncRate  *float64 `json:"sync_rate"`
}

// batchJSON is a spend, check or refund answer as the service sends it.
type batchJSON struct {
	Allowed   bool           `json:"allowed"`
	Remaining int64          `json:"remaining"`
	RetryInMS int64          `json:"retry_in_ms"`
	ResetInMS int64          `json:"reset_in_ms"`
	Degraded  bool           `json:"degraded"`
	Decisions []decisionJSON `json:"decisions"`
}

// replayedHeader marks an answer replayed from an idempotency record.
const replayedHeader = "Idempotent-Replayed"

// decodeDecision reads a spend, check or refund answer.
func decodeDecision(body []byte, h http.Header) (*Decision, error) {
	var b batchJSON
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, err
	}
	d := &Decision{
		Allowed:   b.Allowed,
		Remaining: b.Remaining,
		RetryIn:   millis(b.RetryInMS),
		ResetIn:   millis(b.ResetInMS),
		Degraded:  b.Degraded,
		Decisions: make([]TransactionDecision, len(b.Decisions)),
		Replayed:  h.Get(replayedHeader) == "true",
		Header:    h,
	}
	for i := range b.Decisions {
		td, err := b.Decisions[i].decision()
		if err != nil {
			return nil, fmt.Errorf("decision %d: %w", i, err)
		}
		d.Decisions[i] = td
	}
	return d, nil
}

// decodeTransactionDecision reads the answer of GET /v1/limits/{limit}/{id}.
func decodeTransactionDecision(body []byte) (*TransactionDecision, error) {
	var j decisionJSON
	if err := json.Unmarshal(body, &j); err != nil {
		return nil, err
	}
	d, err := j.decision()
	if err != nil {
		return nil, err
	}
	return &d, nil
}

func (j *decisionJSON) decision() (TransactionDecision, error) {
	var period time.Duration
	var calendarPeriod string
	var periodEnd time.Time
	if Algorithm(j.Algorithm) == Calendar && j.Timezone != "" {
		calendarPeriod = j.Period
		end, err := time.Parse(time.RFC3339Nano, j.PeriodEnd)
		if err != nil {
			return TransactionDecision{}, fmt.Errorf("period_end: %w", err)
		}
		periodEnd = end
	} else {
		p, err := time.ParseDuration(j.Period)
		if err != nil {
			return TransactionDecision{}, fmt.Errorf("period: %w", err)
		}
		period = p
	}
	d := TransactionDecision{
		CalendarPeriod: calendarPeriod,
		Timezone:       j.Timezone,
		PeriodEnd:      periodEnd,
		Limit:          j.Limit,
		ID:             j.ID,
		Allowed:        j.Allowed,
		Remaining:      j.Remaining,
		RetryIn:        millis(j.RetryInMS),
		ResetIn:        millis(j.ResetInMS),
		Unlimited:      j.Unlimited,
		Burst:          j.Burst,
		Count:          j.Count,
		Period:         period,
		Override:       j.Override,
		Algorithm:      Algorithm(j.Algorithm),
		Shadow:         j.Shadow,
		Lease:          j.Lease,
	}
	d.LeaseExpiresIn = millis(j.LeaseMS)
	if j.Penalized != nil {
		d.HasPenaltyBox, d.Penalized = true, *j.Penalized
	}
	if j.SyncRate != nil {
		d.HasSyncRate, d.SyncRate = true, seconds(*j.SyncRate)
	}
	return d, nil
}

// millis is a count of whole milliseconds as a Duration.
func millis(ms int64) time.Duration {
	return time.Duration(ms) * time.Millisecond
}

// seconds is a JSON number of seconds (0.5, -1, 3600) as a Duration,
// rounded to the nanosecond.
func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}
