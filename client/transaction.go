package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Mode says how a transaction takes part in its batch. The zero Mode sends
// no mode, and the service takes ModeCheckAndSpend.
type Mode string

// The modes of the API. The client sends a Mode as it is and leaves it to
// the service to refuse one it does not know (CodeInvalidMode), so that a
// client older than the service never stands in the way.
const (
	// ModeCheckAndSpend counts toward the batch's answer and is spent when
	// the whole batch is allowed.
	ModeCheckAndSpend Mode = "check-and-spend"
	// ModeCheckOnly counts toward the batch's answer and is never spent.
	ModeCheckOnly Mode = "check-only"
	// ModeSpendOnly does not count toward the batch's answer; it is spent
	// when it is itself allowed and the whole batch is allowed.
	ModeSpendOnly Mode = "spend-only"
)

// Transaction is one (limit, id) bucket to spend, check, refund or reset.
//
// The cost is not a field, because the API's default cost is 1 and a cost
// of 0 means something else (read the bucket without taking from it): a
// field whose zero value is 0 would make every literal that leaves it out
// a read. A Transaction built as a literal costs 1, the API's default (the
// request carries no cost and the service applies its own default);
// WithCost sets any other cost, 0 included:
//
//	login := client.Transaction{Limit: "LoginAttemptsPerUser", ID: "alice"} // cost 1
//	peek := login.WithCost(0)                                              // reads alice's bucket
//	bulk := login.WithCost(3)
type Transaction struct {
	// Limit names the limit: built in, or declared in the service's
	// defaults file.
	Limit string
	// ID is the subscriber. The service canonicalises it by the limit's
	// id kind, and answers with the canonical form.
	ID string
	// Mode is how the transaction takes part in its batch; the zero value
	// is the service's default, ModeCheckAndSpend.
	Mode Mode

	cost    int64
	costSet bool
}

// WithCost returns a copy of t that costs n tokens (for a window or a
// rate-counter limit, hits). Any n is sent as it is, 0 included; the
// service refuses one out of range with CodeInvalidCost.
func (t Transaction) WithCost(n int64) Transaction {
	t.cost, t.costSet = n, true
	return t
}

// Cost is what t costs: the cost WithCost set, or 1, the API's default.
func (t Transaction) Cost() int64 {
	if !t.costSet {
		return 1
	}
	return t.cost
}

// transactionJSON is a transaction as the API reads it. An unset cost is
// left out, so the service applies its default; an unset mode likewise.
type transactionJSON struct {
	Limit string `json:"limit"`
	ID    string `json:"id"`
	Cost  *int64 `json:"cost,omitempty"`
	Mode  Mode   `json:"mode,omitempty"`
}

func (t Transaction) wire() transactionJSON {
	j := transactionJSON{Limit: t.Limit, ID: t.ID, Mode: t.Mode}
	if t.costSet {
		cost := t.cost
		j.Cost = &cost
	}
	return j
}

// ErrInvalidUTF8 is wrapped by the error of a call given a string that is
// not valid UTF-8: JSON cannot carry it as it is, and the client will not
// send a changed one (the service would decide on another id). Nothing
// is sent.
var ErrInvalidUTF8 = errors.New("not valid UTF-8")

// check refuses a transaction JSON cannot carry unchanged.
func (t Transaction) check() error {
	for _, f := range []struct{ name, value string }{{"limit", t.Limit}, {"id", t.ID}, {"mode", string(t.Mode)}} {
		if !utf8.ValidString(f.value) {
			return fmt.Errorf("%w: the %s %q", ErrInvalidUTF8, f.name, f.value)
		}
	}
	return nil
}

// singleBody is the body of a request of one transaction: the object
// itself, the API's short form.
func singleBody(t Transaction) ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, fmt.Errorf("transaction 0: %w", err)
	}
	return json.Marshal(t.wire())
}

// batchBody is the body of a request of several transactions, decided
// together: {"transactions": [...]}, in order.
func batchBody(txns []Transaction) ([]byte, error) {
	body := struct {
		Transactions []transactionJSON `json:"transactions"`
	}{Transactions: make([]transactionJSON, len(txns))}
	for i, t := range txns {
		if err := t.check(); err != nil {
			return nil, fmt.Errorf("transaction %d: %w", i, err)
		}
		body.Transactions[i] = t.wire()
	}
	return json.Marshal(body)
}
